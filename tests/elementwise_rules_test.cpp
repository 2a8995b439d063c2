// Element-wise ops, PyTorch's rules: result_type promotion (tensors, 0-d tensors, scalars),
// scalar operands of arithmetic, comparisons, where and clamp, pow's special cases, int64
// wrap-around, remainder / fmod signs, isnan / isinf / isfinite.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {

std::vector<float> fv(const Tensor& t) { return t.to_vector<float>(); }

}  // namespace

// ---- PyTorch's result_type (expected dtypes checked against torch 1.13) ----

TEST_CASE("promotion: dimensioned tensors rank above 0-d tensors, which rank above scalars") {
  Tensor b = tensor(std::vector<bool>{true, false});
  CHECK((randn({2}) + scalar_tensor(1.0, kFloat64)).dtype() == kFloat32);
  CHECK((arange(3) + scalar_tensor(1.5, kFloat64)).dtype() == kFloat64);
  CHECK((scalar_tensor(1.0, kFloat64) + scalar_tensor(1, kInt64)).dtype() == kFloat64);
  CHECK((b + scalar_tensor(1, kInt64)).dtype() == kInt64);
  CHECK((arange(3) * 2.0).dtype() == kFloat32);
  CHECK((arange(3) * 2).dtype() == kInt64);
  CHECK((2.5 * arange(3)).dtype() == kFloat32);
  CHECK((b + 1).dtype() == kInt64);
  CHECK((b + true).dtype() == kBool);
  CHECK((b * 2.5).dtype() == kFloat32);
  CHECK((zeros({2}, kFloat64) * 2.0).dtype() == kFloat64);
  CHECK((scalar_tensor(1, kInt64) + 1.5).dtype() == kFloat32);
  CHECK((scalar_tensor(1.5, kFloat64) + 1).dtype() == kFloat64);
  CHECK((arange(3) + 0.0).dtype() == kFloat32);
  CHECK(pow(arange(3), 2.0).dtype() == kFloat32);
  CHECK(pow(arange(3), 2).dtype() == kInt64);
  CHECK(clamp(arange(4), 1.0, 3.0).dtype() == kFloat32);
  CHECK(clamp(arange(4), 1, 3).dtype() == kInt64);
  CHECK(clamp(arange(4), std::nullopt, 2.0).dtype() == kFloat32);
  CHECK(result_type({arange(2), scalar_tensor(0.5, kFloat64)}) == kFloat64);
  CHECK(result_type({randn({2}), scalar_tensor(0.5, kFloat64)}) == kFloat32);
  CHECK(result_type({arange(2)}, {2.0}) == kFloat32);
  CHECK(result_type({}, {1, 2}) == kInt64);
  CHECK(result_type({}, {true, 2.0}) == kFloat32);

  // values: the scalar's C++ type decides, not its value
  CHECK((arange(3) * 2.5).to_vector<double>() == std::vector<double>{0, 2.5, 5});
  CHECK((arange(3) + 0.0).to_vector<float>() == std::vector<float>{0, 1, 2});
  CHECK(clamp(arange(4), 1.0, 2.5).to_vector<float>() == std::vector<float>{1, 1, 2, 2.5f});
  CHECK((2 * arange(3)).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 4});
  CHECK((10 - arange(3)).to_vector<int64_t>() == std::vector<int64_t>{10, 9, 8});
  // a 0-d float64 does not widen float32 data: 0.1f == float(0.1) in float32 (torch: True)
  CHECK((tensor({0.1f}) == scalar_tensor(0.1, kFloat64)).to_vector<bool>() ==
        std::vector<bool>{true});
  Tensor s = tensor({1.f, 2.f}) + scalar_tensor(0.1, kFloat64);
  CHECK(s.to_vector<float>() == std::vector<float>{1.f + 0.1f, 2.f + 0.1f});
  CHECK(where(b, tensor({1.f, 2.f}), scalar_tensor(7.0, kFloat64)).dtype() == kFloat32);
  // int64 scalars beyond 2^53 stay exact
  const int64_t big = (int64_t{1} << 53) + 1;
  CHECK((zeros({1}, kInt64) + big).item<int64_t>() == big);
}

TEST_CASE("promotion inside vmap uses the per-set (logical) rank") {
  Tensor x = tensor({1.f, 2.f, 3.f});
  Tensor s = tensor(std::vector<double>{0.5, 1.5});  // per set: a 0-d float64
  Tensor y = vmap([](Tensor a, Tensor b) { return a + b; }, {.in_dims = {std::nullopt, 0}})(x, s);
  CHECK(y.dtype() == kFloat32);
  CHECK(y.shape() == Shape{2, 3});
  CHECK(y.to_vector<float>() == std::vector<float>{1.5f, 2.5f, 3.5f, 2.5f, 3.5f, 4.5f});
  // per-set 0-d float32 with an unbatched 0-d float64: same tier, so float64 (torch: float64)
  Tensor z = vmap([](Tensor a) { return a + scalar_tensor(1.0, kFloat64); })(tensor({1.f, 2.f}));
  CHECK(z.dtype() == kFloat64);
  CHECK(z.to_vector<double>() == std::vector<double>{2, 3});
  Tensor w = vmap([](Tensor a) { return a * 2.0; })(arange(4).view({2, 2}));
  CHECK(w.dtype() == kFloat32);
}

TEST_CASE("pow of integers to a negative integer scalar raises; to a tensor of them, truncates") {
  check_throws_mentioning<RuntimeError>([] { pow(arange(3), -1); }, "negative integer powers");
  check_throws_mentioning<RuntimeError>([] { arange(3).pow(-2); }, "[pow]");
  check_throws_naming_op<RuntimeError>([] { pow(tensor(std::vector<bool>{true}), -1); }, "pow");
  // a tensor exponent takes integer powers, as torch's: values checked in PyTorch 1.13
  using I = std::vector<int64_t>;
  CHECK(pow(tensor<int64_t>({0, 1, -1, 2, -2, 3}), tensor<int64_t>({-1, -1, -1, -1, -2, -3}))
            .to_vector<int64_t>() == I{0, 1, -1, 0, 0, 0});
  CHECK(
      pow(tensor<int64_t>({0, 1, -1, 2}), tensor<int64_t>({-2, -2, -2, 0})).to_vector<int64_t>() ==
      I{0, 1, 1, 1});
  CHECK(pow(2, tensor<int64_t>({-1, 1})).to_vector<int64_t>() == I{0, 2});
  // floating exponents or bases are fine: [0^-1, 1^-1, 2^-1] = [inf, 1, 0.5]
  CHECK(pow(arange(3), -1.0).to_vector<float>() == std::vector<float>{INFINITY, 1.f, 0.5f});
  CHECK(pow(arange(3).to(kFloat32), -1).to_vector<float>() ==
        std::vector<float>{INFINITY, 1.f, 0.5f});
  CHECK(pow(arange(3), 0).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 1});
  CHECK(pow(2, arange(3)).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 4});
}

// The vector kernels' sqrt and division are IEEE's, as the scalar tail's: xsimd 8.1's aarch64 float
// ones were estimates refined by Newton steps, an ulp or so off.
TEST_CASE("sqrt and rsqrt of float32 are correctly rounded, in the vector lanes too") {
  std::vector<float> v;
  for (int i = 0; i < 1000; ++i) v.push_back(0.37f + 1.7f * static_cast<float>(i * i) / 7.0f);
  v.push_back(-0.f);
  std::vector<float> s = sqrt(tensor(v)).to_vector<float>();
  std::vector<float> r = rsqrt(tensor(v)).to_vector<float>();
  int wrong = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const float want_s = std::sqrt(v[i]), want_r = 1.f / std::sqrt(v[i]);
    wrong += std::memcmp(&s[i], &want_s, sizeof(float)) != 0;
    wrong += std::memcmp(&r[i], &want_r, sizeof(float)) != 0;
  }
  CHECK(wrong == 0);
}

TEST_CASE("pow by a scalar 0.5, -0.5, -1, 2, 3 or -2 is computed as torch's fast paths") {
  // torch.pow(x, e) values for x = [-inf, -0.0, 4, 1e20, -2, nan], checked in PyTorch 1.13;
  // std::pow differs at -inf (0.5: inf), -0 (0.5: +0, -0.5: +inf) and 1e20f ** -2 (1e-40)
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  Tensor x = tensor({-inf, -0.f, 4.f, 1e20f, -2.f, nan});
  auto same = [](const Tensor& t, std::vector<float> want) {
    std::vector<float> got = t.to_vector<float>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      CAPTURE(i);
      if (std::isnan(want[i])) {
        CHECK(std::isnan(got[i]));
      } else {
        // exact for infinities and zeros (Approx takes no infinity), else within 1e-6
        CHECK((got[i] == want[i] || std::abs(got[i] - want[i]) <= 1e-6f * std::abs(want[i])));
        CHECK(std::signbit(got[i]) == std::signbit(want[i]));
      }
    }
  };
  same(pow(x, 0.5), {nan, -0.f, 2.f, 1e10f, nan, nan});
  same(pow(x, -0.5), {nan, -inf, 0.5f, 1e-10f, nan, nan});
  same(pow(x, -1), {-0.f, -inf, 0.25f, 1e-20f, -0.5f, nan});
  same(pow(x, 2), {inf, 0.f, 16.f, inf, 4.f, nan});
  same(pow(x, 3.0), {-inf, -0.f, 64.f, inf, -8.f, nan});
  same(pow(x, -2), {0.f, inf, 0.0625f, 0.f, 0.25f, nan});
  CHECK(pow(x, 0.5).dtype() == kFloat32);
  // an integral base with a float exponent: float32, same path; an int64 square stays int64
  CHECK(pow(tensor<int64_t>({4, 9}), 0.5).to_vector<float>() == std::vector<float>{2.f, 3.f});
  CHECK(pow(tensor<int64_t>({4, 9}), 2).to_vector<int64_t>() == std::vector<int64_t>{16, 81});
  // a tensor exponent is std::pow, as torch's: pow(-inf, tensor(0.5)) is inf
  CHECK(pow(tensor({-inf}), scalar_tensor(0.5)).item<float>() == inf);
}

TEST_CASE("pow of float32 by a scalar float32 cannot hold keeps the double exponent, as torch") {
  // torch.pow(torch.tensor(x, dtype=dt), e) in PyTorch 1.13, float32 and float64 alike, for
  // x = [nan, inf, -inf, 0, -0, -2, 0.5, 2, 1, -1]; td rounded 1e-310 to a float32 0 (all 1)
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const std::vector<double> x{nan, inf, -inf, 0.0, -0.0, -2.0, 0.5, 2.0, 1.0, -1.0};
  auto same = [](const Tensor& t, const std::vector<double>& want) {
    std::vector<double> got = t.to_vector<double>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      CAPTURE(i);
      CHECK(std::isnan(got[i]) == std::isnan(want[i]));
      if (!std::isnan(want[i])) CHECK((got[i] == want[i] && !std::signbit(got[i])));
    }
  };
  const std::vector<double> tiny{nan, inf, inf, 0, 0, nan, 1, 1, 1, nan};
  const std::vector<double> neg_tiny{nan, 0, 0, inf, inf, nan, 1, 1, 1, nan};
  const std::vector<double> huge{nan, inf, inf, 0, 0, inf, 0, inf, 1, 1};
  const std::vector<double> neg_huge{nan, 0, 0, inf, inf, 0, inf, 0, 1, 1};
  for (DType dt : {kFloat32, kFloat64}) {
    CAPTURE(dt);
    Tensor t = tensor<double>(x).to(dt);
    same(pow(t, 1e-310), tiny);
    same(pow(t, 1e-45), tiny);
    same(pow(t, -1e-310), neg_tiny);
    same(pow(t, 1e40), huge);
    same(pow(t, -1e40), neg_huge);
    CHECK(pow(t, 1e-310).dtype() == dt);
  }
  // 16777217 rounds to the even 16777216 in float32; torch keeps the odd power:
  // torch.pow(torch.tensor([-1., -2., -1.0000001]), 16777217.0) -> [-1, -inf, -7.389056205749512]
  std::vector<float> odd = pow(tensor({-1.f, -2.f, -1.0000001f}), 16777217.0).to_vector<float>();
  CHECK(odd ==
        std::vector<float>{-1.f, -std::numeric_limits<float>::infinity(), -7.389056205749512f});
  CHECK(pow(tensor({-1.f, -2.f, -1.0000001f}), 16777217).to_vector<float>() == odd);  // an int
  // an integral base: float32, as torch.pow(torch.tensor([0, 2, -2]), 1e-310) -> [0, 1, nan]
  Tensor yi = pow(tensor<int64_t>({0, 2, -2}), 1e-310);
  CHECK(yi.dtype() == kFloat32);
  same(yi, {0, 1, nan});
  // and under vmap, set by set
  Tensor xs = tensor<double>(x).to(kFloat32).view({2, 5});
  same(vmap([](Tensor v) { return pow(v, 1e-310); })(xs).flatten(), tiny);
}

TEST_CASE("pow of bool by bool and gelu of integers are TypeErrors, as torch") {
  // torch: '"pow" not implemented for 'Bool'' (td gave a bool tensor) and '"GeluKernelImpl" not
  // implemented for 'Long'' (td gave float32)
  Tensor b = tensor<bool>({true, false});
  check_throws_naming_op<TypeError>([&] { pow(b, b); }, "pow");
  check_throws_mentioning<TypeError>(
      [&] { pow(b, tensor<bool>({true})); },
      "[pow] is not implemented for bool tensors (shapes [2] and [1])");
  CHECK_THROWS_AS(pow(b, true), TypeError);
  CHECK_THROWS_AS(pow(false, b), TypeError);
  // another dtype promotes the bool: true ** 2 = 1, 2 ** [true, false] = [2, 1]
  CHECK(pow(b, 2).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(pow(2, b).to_vector<int64_t>() == std::vector<int64_t>{2, 1});
  CHECK(pow(b, 0.5).to_vector<float>() == std::vector<float>{1.f, 0.f});
  check_throws_naming_op<TypeError>([] { gelu(arange(3)); }, "gelu");
  check_throws_mentioning<TypeError>([] { gelu(tensor<bool>({true}), true); }, "shape [1]");
  CHECK(gelu(arange(3).to(kFloat64)).dtype() == kFloat64);
}

TEST_CASE("a float scalar beyond float32 is cast in arithmetic, refused by where and clamp") {
  // torch: float32 + 1e300 is inf (the wrapped number is cast); td raised full's overflow error
  const float inf = std::numeric_limits<float>::infinity();
  Tensor f = tensor({1.f, -2.f});
  Tensor i = tensor<int64_t>({1, 2});
  CHECK(fv(f + 1e300) == std::vector<float>{inf, inf});
  CHECK(fv(f * -1e39) == std::vector<float>{-inf, inf});
  CHECK(fv(i + 1e300) == std::vector<float>{inf, inf});  // int64 + float scalar: float32
  CHECK(fv(1e300 - f) == std::vector<float>{inf, inf});
  CHECK((f < 1e300).to_vector<bool>() == std::vector<bool>{true, true});
  Tensor g = f.clone();
  g.add_(1e300);
  CHECK(fv(g) == std::vector<float>{inf, inf});
  CHECK((tensor<double>({1.0}) + 1e300).item<double>() == 1e300);  // float64 holds it
  // where and clamp check the value against the result dtype, as torch does
  Tensor c = tensor<bool>({true, false});
  check_throws_naming_op<RuntimeError>([&] { where(c, f, 1e300); }, "where");
  CHECK_THROWS_AS(where(c, -1e39, f), RuntimeError);
  CHECK(where(c, tensor<double>({1.0, 2.0}), 1e300).to_vector<double>() ==
        std::vector<double>{1.0, 1e300});
  check_throws_naming_op<RuntimeError>([&] { clamp(f, 1e300, std::nullopt); }, "clamp");
  CHECK_THROWS_AS(clamp(f, std::nullopt, -1e39), RuntimeError);
  CHECK_THROWS_AS(clamp(i, 3.5e38, std::nullopt), RuntimeError);  // the result is float32
  CHECK(clamp(tensor<double>({1.0}), 1e300, std::nullopt).item<double>() == 1e300);
  CHECK(fv(clamp(f, -inf, 0.0)) == std::vector<float>{0.f, -2.f});  // infinities fit
  // where of two int64 scalars is exact (through a double, 2^53 + 1 came back as 2^53)
  const int64_t odd = (int64_t{1} << 53) + 1;
  CHECK(where(c, odd, int64_t{-3}).to_vector<int64_t>() == std::vector<int64_t>{odd, -3});
  CHECK(where(c, odd, true).to_vector<int64_t>() == std::vector<int64_t>{odd, 1});
}

TEST_CASE("comparison, bitwise and where operators with scalars") {
  Tensor x = tensor({0.f, 1.f, 2.f}), y = tensor({0.f, 5.f, 2.f});
  using B = std::vector<bool>;
  CHECK((x == y).to_vector<bool>() == B{true, false, true});
  CHECK((x != y).to_vector<bool>() == B{false, true, false});
  CHECK((x == 0.0).to_vector<bool>() == B{true, false, false});
  CHECK((x != 1).to_vector<bool>() == B{true, false, true});
  CHECK((1 == x).to_vector<bool>() == B{false, true, false});
  CHECK((2 != x).to_vector<bool>() == B{true, true, false});
  CHECK((1 < x).to_vector<bool>() == B{false, false, true});
  CHECK((1 <= x).to_vector<bool>() == B{false, true, true});
  CHECK((1 > x).to_vector<bool>() == B{true, false, false});
  CHECK((0.5 >= x).to_vector<bool>() == B{true, false, false});
  CHECK((x == y).dtype() == kBool);

  Tensor a = tensor(B{true, true, false, false}), b = tensor(B{true, false, true, false});
  CHECK((a & b).to_vector<bool>() == B{true, false, false, false});
  CHECK((a | b).to_vector<bool>() == B{true, true, true, false});
  CHECK((a ^ b).to_vector<bool>() == B{false, true, true, false});
  CHECK((~a).to_vector<bool>() == B{false, false, true, true});
  CHECK((a & b).dtype() == kBool);
  check_throws_naming_op<TypeError>([&] { (void)(x & x); }, "bitwise_and");
  check_throws_naming_op<TypeError>([&] { (void)(~x); }, "bitwise_not");
  check_throws_naming_op<TypeError>([&] { (void)(x ^ y); }, "bitwise_xor");
  // int64, by hand (two's complement); bool with int64 promotes to int64, as in PyTorch
  using I = std::vector<int64_t>;
  Tensor p = tensor<int64_t>({12, 10, -1, 0}, {4}), q = tensor<int64_t>({10, 6, 5, 7}, {4});
  CHECK((p & q).to_vector<int64_t>() == I{8, 2, 5, 0});
  CHECK((p | q).to_vector<int64_t>() == I{14, 14, -1, 7});
  CHECK((p ^ q).to_vector<int64_t>() == I{6, 12, -6, 7});
  CHECK((~p).to_vector<int64_t>() == I{-13, -11, 0, -1});
  CHECK((p & q).dtype() == kInt64);
  CHECK((a | arange(4)).to_vector<int64_t>() == I{1, 1, 2, 3});
  CHECK((a | arange(4)).dtype() == kInt64);

  Tensor w = where(a, 1.0, 0.0);
  CHECK(w.dtype() == kFloat32);
  CHECK(w.to_vector<float>() == std::vector<float>{1, 1, 0, 0});
  Tensor wi = where(a, 3, -1);
  CHECK(wi.dtype() == kInt64);
  CHECK(wi.to_vector<int64_t>() == std::vector<int64_t>{3, 3, -1, -1});
  CHECK(where(a, true, false).dtype() == kBool);
  CHECK(where(a, arange(4), 0.5).dtype() == kFloat32);
  CHECK(where(a, arange(4), 0.5).to_vector<float>() == std::vector<float>{0, 1, 0.5f, 0.5f});
}

TEST_CASE("int64 arithmetic wraps in two's complement, as PyTorch's") {
  const int64_t max = INT64_MAX, min = INT64_MIN;
  auto i64 = [](std::vector<int64_t> v) { return tensor(v); };
  auto vec = [](const Tensor& t) { return t.to_vector<int64_t>(); };
  CHECK(vec(add(i64({max}), int64_t{1})) == std::vector<int64_t>{min});
  CHECK(vec(sub(i64({min}), int64_t{1})) == std::vector<int64_t>{max});
  CHECK(vec(mul(i64({max}), int64_t{2})) == std::vector<int64_t>{-2});
  CHECK(vec(neg(i64({min}))) == std::vector<int64_t>{min});
  CHECK(vec(abs(i64({min, -3}))) == std::vector<int64_t>{min, 3});
  // 3^100 mod 2^64 = 15462121228172006353 = -2984622845537545263 as int64
  CHECK(vec(pow(i64({3}), 100)) == std::vector<int64_t>{-2984622845537545263});
  // 2^-1 truncates to 0; 3^63 mod 2^64 = 15208858086377056683
  CHECK(vec(pow(i64({2, 3}), i64({-1, 63}))) == std::vector<int64_t>{0, -3237885987332494933});
  Tensor t = i64({max});
  t.add_(int64_t{1});
  CHECK(vec(t) == std::vector<int64_t>{min});
}

TEST_CASE("isnan, isinf and isfinite, for every dtype and under vmap") {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = tensor<double>({1.0, nan, inf, -inf, -0.0, -3e38}).to(dt);
    CHECK(isnan(x).dtype() == kBool);
    CHECK(isnan(x).to_vector<bool>() == std::vector<bool>{false, true, false, false, false, false});
    CHECK(isinf(x).to_vector<bool>() == std::vector<bool>{false, false, true, true, false, false});
    CHECK(isfinite(x).to_vector<bool>() ==
          std::vector<bool>{true, false, false, false, true, true});
  }
  for (const Tensor& x : {tensor<int64_t>({0, -5, INT64_MAX}), tensor<bool>({true, false, true})}) {
    CHECK(isnan(x).to_vector<bool>() == std::vector<bool>(3, false));
    CHECK(isinf(x).to_vector<bool>() == std::vector<bool>(3, false));
    CHECK(isfinite(x).to_vector<bool>() == std::vector<bool>(3, true));
  }
  Tensor sets = tensor<double>({1.0, nan, inf, 2.0, -inf, nan}, {2, 3});
  Tensor m = vmap([](Tensor r) { return isnan(r) | isinf(r); })(sets);
  CHECK(m.to_vector<bool>() == std::vector<bool>{false, true, true, false, true, true});
  CHECK(vmap(isfinite)(sets).to_vector<bool>() ==
        std::vector<bool>{true, false, false, true, false, false});
}

TEST_CASE("remainder (%) takes the divisor's sign, fmod the dividend's, as torch") {
  Tensor a = tensor<int64_t>({5, -5, 5, -5, 6, INT64_MIN}),
         b = tensor<int64_t>({3, 3, -3, -3, 3, -1});
  CHECK(remainder(a, b).dtype() == kInt64);
  CHECK(remainder(a, b).to_vector<int64_t>() == std::vector<int64_t>{2, 1, -1, -2, 0, 0});
  CHECK(fmod(a, b).to_vector<int64_t>() == std::vector<int64_t>{2, -2, 2, -2, 0, 0});
  CHECK((a % b).to_vector<int64_t>() == remainder(a, b).to_vector<int64_t>());
  Tensor x = tensor({-1.5f, 1.5f, -1.5f, 7.0f, 2.0f});
  Tensor y = tensor({1.0f, -1.0f, -1.0f, 0.0f, 0.5f});
  auto r = remainder(x, y).to_vector<float>(), f = fmod(x, y).to_vector<float>();
  CHECK(r[0] == 0.5f);
  CHECK(r[1] == -0.5f);
  CHECK(r[2] == -0.5f);
  CHECK(std::isnan(r[3]));  // a float divisor of 0 gives NaN, no error
  CHECK(r[4] == 0.0f);
  CHECK(f[0] == -0.5f);
  CHECK(f[1] == 0.5f);
  CHECK(f[2] == -0.5f);
  CHECK(std::isnan(f[3]));
  // scalars: an int tensor with a float scalar computes in float32, as torch
  CHECK((arange(5) % 2).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0, 1, 0});
  CHECK((arange(3) % 2.5).dtype() == kFloat32);
  CHECK((7 % tensor<int64_t>({-2, 4})).to_vector<int64_t>() == std::vector<int64_t>{-1, 3});
  check_throws_mentioning<RuntimeError>(
      [&] {
        remainder(a, tensor<int64_t>({1, 0, 1, 1, 1, 1}));
      },
      "[remainder] ZeroDivisionError");
  check_throws_mentioning<RuntimeError>([&] { fmod(arange(3), 0); }, "[fmod]");
  check_throws_mentioning<TypeError>([] { remainder(tensor<bool>({true}), tensor<bool>({true})); },
                                     "[remainder]");
  // under vmap, with the divisor per set
  Tensor m = vmap([](Tensor p, Tensor q) { return p % q; })(tensor<int64_t>({7, -7, 7, -7}, {2, 2}),
                                                            tensor<int64_t>({2, -3}));
  CHECK(m.to_vector<int64_t>() == std::vector<int64_t>{1, 1, -2, -1});
}
