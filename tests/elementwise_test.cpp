// Element-wise ops: values against hand values or naive loops, dtype rules, broadcasting,
// non-contiguous inputs, empty tensors and error paths.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/kernels/kernels.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {

std::vector<float> fv(const Tensor& t) { return t.to_vector<float>(); }


}  // namespace

TEST_CASE("unary float ops match std math") {
  std::vector<float> v = {-2.f, -0.5f, 0.f, 0.25f, 1.f, 3.f};
  Tensor x = tensor(v);
  auto ex = fv(exp(x)), th = fv(tanh(x)), sg = fv(sigmoid(x)), ab = fv(abs(x)), ng = fv(neg(x));
  auto re = fv(relu(x)), ge = fv(gelu(x)), gt = fv(gelu(x, true));
  for (size_t i = 0; i < v.size(); ++i) {
    float a = v[i];
    CHECK(ex[i] == doctest::Approx(std::exp(a)));
    CHECK(th[i] == doctest::Approx(std::tanh(a)));
    CHECK(sg[i] == doctest::Approx(1.0 / (1.0 + std::exp(-a))));
    CHECK(ab[i] == std::fabs(a));
    CHECK(ng[i] == -a);
    CHECK(re[i] == (a > 0 ? a : 0.f));
    CHECK(ge[i] == doctest::Approx(0.5 * a * (1 + std::erf(a / std::sqrt(2.0)))).epsilon(1e-5));
    double c = std::sqrt(2.0 / M_PI);
    CHECK(gt[i] ==
          doctest::Approx(0.5 * a * (1 + std::tanh(c * (a + 0.044715 * a * a * a)))).epsilon(1e-5));
  }
  // gelu(1) = 0.8413447 (PyTorch), tanh approximation 0.8411920
  CHECK(gelu(scalar_tensor(1.0)).item<float>() == doctest::Approx(0.8413447f));
  CHECK(gelu(scalar_tensor(1.0), true).item<float>() == doctest::Approx(0.8411920f));
  Tensor p = tensor({1.f, 4.f, 9.f});
  CHECK(fv(sqrt(p)) == std::vector<float>{1.f, 2.f, 3.f});
  auto rs = fv(rsqrt(p));
  CHECK(rs[1] == doctest::Approx(0.5f));
  auto lg = fv(log(p));
  CHECK(lg[1] == doctest::Approx(std::log(4.0)));
  CHECK(std::isnan(log(scalar_tensor(-1.0)).item<float>()));
}

TEST_CASE("sin, cos, log1p, expm1, reciprocal, floor, ceil, round and sign") {
  std::vector<float> v = {-2.5f, -0.5f, 0.f, 0.5f, 1.5f, 2.5f, 3.f};
  Tensor x = tensor(v);
  auto sn = fv(sin(x)), cs = fv(cos(x)), em = fv(expm1(x)), fl = fv(floor(x)), ce = fv(ceil(x));
  for (size_t i = 0; i < v.size(); ++i) {
    CHECK(sn[i] == doctest::Approx(std::sin(v[i])));
    CHECK(cs[i] == doctest::Approx(std::cos(v[i])));
    CHECK(em[i] == doctest::Approx(std::expm1(v[i])));
    CHECK(fl[i] == std::floor(v[i]));
    CHECK(ce[i] == std::ceil(v[i]));
  }
  // torch.round is half to even: [-2, -0, 0, 0, 2, 2, 3]; sign of NaN and -0.0 is 0
  CHECK(fv(round(x)) == std::vector<float>{-2.f, -0.f, 0.f, 0.f, 2.f, 2.f, 3.f});
  CHECK(fv(sign(tensor({-3.f, -0.f, NAN, 2.f}))) == std::vector<float>{-1.f, 0.f, 0.f, 1.f});
  // accurate near 0, where log(1 + x) in float32 gives 1.19e-7
  CHECK(log1p(scalar_tensor(1e-7)).item<float>() == doctest::Approx(1e-7).epsilon(1e-6));
  CHECK(fv(reciprocal(tensor({2.f, -4.f}))) == std::vector<float>{0.5f, -0.25f});
  // dtypes as torch: integers go to float32 for sin..reciprocal, keep theirs for the rest
  Tensor i = tensor<int64_t>({-3, 0, 2});
  CHECK(reciprocal(i).dtype() == kFloat32);
  CHECK(sin(i).dtype() == kFloat32);
  CHECK(floor(i).to_vector<int64_t>() == std::vector<int64_t>{-3, 0, 2});
  CHECK(round(i).dtype() == kInt64);
  CHECK(sign(i).to_vector<int64_t>() == std::vector<int64_t>{-1, 0, 1});
  CHECK(sign(tensor<bool>({true, false})).dtype() == kBool);
  check_throws_mentioning<TypeError>([] { floor(tensor<bool>({true})); }, "[floor]");
  CHECK_THROWS_AS(round(tensor<bool>({true})), TypeError);
}

TEST_CASE("unary dtype rules") {
  Tensor i = tensor<int64_t>({1, -2, 3});
  CHECK(exp(i).dtype() == kFloat32);
  CHECK(sqrt(tensor<bool>({true, false})).dtype() == kFloat32);
  CHECK(neg(i).dtype() == kInt64);
  CHECK(neg(i).to_vector<int64_t>() == std::vector<int64_t>{-1, 2, -3});
  CHECK(abs(i).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3});
  CHECK(relu(i).dtype() == kInt64);
  CHECK(relu(i).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 3});
  Tensor d = tensor<double>({0.5});
  CHECK(exp(d).dtype() == kFloat64);
  CHECK(exp(d).item<double>() == doctest::Approx(std::exp(0.5)).epsilon(1e-12));
  Tensor b = tensor<bool>({true, false});
  check_throws_mentioning<TypeError>(
      [&] { neg(b); },
      "[neg] is not implemented for bool tensors (shape [2]); use logical_not to invert a mask");
  check_throws_naming_op<TypeError>([&] { abs(b); }, "abs");
  check_throws_naming_op<TypeError>([&] { relu(b); }, "relu");
  CHECK(logical_not(b).to_vector<bool>() == std::vector<bool>{false, true});
  CHECK((!tensor({0.f, 2.f})).to_vector<bool>() == std::vector<bool>{true, false});
  CHECK(logical_not(i).dtype() == kBool);
}

TEST_CASE("clamp") {
  Tensor x = tensor({-2.f, 0.5f, 3.f});
  CHECK(fv(clamp(x, -1.0, 1.0)) == std::vector<float>{-1.f, 0.5f, 1.f});
  CHECK(fv(clamp(x, 0.0, std::nullopt)) == std::vector<float>{0.f, 0.5f, 3.f});
  CHECK(fv(clamp(x, std::nullopt, 0.0)) == std::vector<float>{-2.f, 0.f, 0.f});
  Tensor i = tensor<int64_t>({1, 5});
  CHECK(clamp(i, 2, std::nullopt).dtype() == kInt64);
  CHECK(clamp(i, 2.0, std::nullopt).dtype() == kFloat32);  // the bound's type decides (torch)
  Tensor ci = clamp(i, 2.5, std::nullopt);  // PyTorch: [2.5, 5.0] float32
  CHECK(ci.dtype() == kFloat32);
  CHECK(fv(ci) == std::vector<float>{2.5f, 5.f});
  // int64 values and bounds are compared exactly, not through a double (INT64_MAX would come
  // back as INT64_MIN, 2^53 + 1 as 2^53)
  const int64_t top = std::numeric_limits<int64_t>::max(), odd = (int64_t{1} << 53) + 1;
  CHECK(clamp(tensor<int64_t>({top, odd, -5}), 0, top).to_vector<int64_t>() ==
        std::vector<int64_t>{top, odd, 0});
  CHECK(clamp(tensor<int64_t>({top, 1}), std::nullopt, odd).to_vector<int64_t>() ==
        std::vector<int64_t>{odd, 1});
  CHECK_THROWS_AS(clamp(x, std::nullopt, std::nullopt), ValueError);
  check_throws_naming_op<ValueError>([&] { clamp(x, std::nullopt, std::nullopt); }, "clamp");
  // a bool input with bool bounds stays bool, which torch cannot clamp ("clamp_scalar_cpu" not
  // implemented for 'Bool'); an int or float bound promotes it as torch does
  const Tensor b = tensor<bool>({true, false});
  check_throws_mentioning<TypeError>([&] { clamp(b, false, true); },
                                     "[clamp] is not implemented for bool tensors (shape [2])");
  CHECK_THROWS_AS(clamp(b, true, std::nullopt), TypeError);
  CHECK(clamp(b, 0, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(clamp(b, 0, 1).dtype() == kInt64);
  CHECK(fv(clamp(b, 0.5, std::nullopt)) == std::vector<float>{1.f, 0.5f});
}

TEST_CASE("a uint64 scalar beyond int64 is refused, not wrapped") {
  check_throws_mentioning<RuntimeError>([] { (void)(arange(3) + uint64_t{UINT64_MAX}); },
                                        "[Scalar] 18446744073709551615 does not fit int64");
  CHECK_THROWS_AS(full({2}, uint64_t{1} << 63), RuntimeError);
  CHECK(full({1}, uint64_t{INT64_MAX}).item<int64_t>() == INT64_MAX);  // the edge fits
  CHECK((arange(2) + uint32_t{4000000000u}).to_vector<int64_t>() ==
        std::vector<int64_t>{4000000000, 4000000001});
}

TEST_CASE("clamp with a NaN bound gives NaN everywhere, as torch") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = tensor({-2.f, 0.5f, 3.f});
  for (const Tensor& r : {clamp(x, nan, std::nullopt), clamp(x, std::nullopt, nan),
                          clamp(x, -1.0, nan), clamp(x, nan, 1.0)})
    for (float v : fv(r)) CHECK(std::isnan(v));
  // an integer tensor with a floating NaN bound becomes float32 NaN
  Tensor ci = clamp(tensor<int64_t>({-4, 7}), nan, 2);
  CHECK(ci.dtype() == kFloat32);
  for (float v : fv(ci)) CHECK(std::isnan(v));
}

TEST_CASE("binary arithmetic with broadcasting against a naive loop") {
  Tensor a = arange(0, 6, 1, kFloat32).reshape({2, 3});
  Tensor b = tensor({10.f, 20.f, 30.f});
  Tensor c = tensor({1.f, 2.f}).reshape({2, 1});
  auto s = fv(a + b), m = fv(a * c), d = fv(a - c), q = fv(a / b);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      float av = static_cast<float>(i * 3 + j);
      CHECK(s[i * 3 + j] == av + 10.f * (j + 1));
      CHECK(m[i * 3 + j] == av * (i + 1));
      CHECK(d[i * 3 + j] == av - (i + 1));
      CHECK(q[i * 3 + j] == doctest::Approx(av / (10.f * (j + 1))));
    }
  // [2,1] + [3] -> [2,3]
  CHECK((c + b).shape() == Shape{2, 3});
  CHECK(fv(pow(tensor({2.f, 3.f}), tensor({3.f, 2.f}))) == std::vector<float>{8.f, 9.f});
  CHECK(fv(maximum(tensor({1.f, 5.f}), tensor({3.f, 2.f}))) == std::vector<float>{3.f, 5.f});
  CHECK(fv(minimum(tensor({1.f, 5.f}), tensor({3.f, 2.f}))) == std::vector<float>{1.f, 2.f});
  CHECK(std::isnan(fv(maximum(tensor({NAN}), tensor({1.f})))[0]));
}

TEST_CASE("binary on non-contiguous inputs") {
  Tensor base = arange(0, 12, 1, kFloat32).reshape({3, 4});
  Tensor t = base.t();                                             // [4, 3] transposed
  Tensor s = base.slice(1, 0, std::nullopt, 2);                    // [3, 2] step 2
  Tensor e = tensor({1.f, 2.f, 3.f}).unsqueeze(1).expand({3, 2});  // stride 0
  auto r1 = fv(t + t);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) CHECK(r1[i * 3 + j] == 2.f * (j * 4 + i));
  auto r2 = fv(s * e);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) CHECK(r2[i * 2 + j] == static_cast<float>(i * 4 + 2 * j) * (i + 1));
  auto r3 = fv(exp(s));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      CHECK(r3[i * 2 + j] == doctest::Approx(std::exp(static_cast<float>(i * 4 + 2 * j))));
  auto r4 = fv(relu(t - 5.0));  // t[0][1] = base[1][0] = 4, t[3][2] = base[2][3] = 11
  CHECK(r4[1] == 0.f);
  CHECK(r4[11] == 6.f);
}

TEST_CASE("type promotion") {
  Tensor i = tensor<int64_t>({1, 2});
  Tensor f = tensor({0.5f, 1.5f});
  Tensor d = tensor<double>({1.0, 2.0});
  Tensor b = tensor<bool>({true, false});
  CHECK((i + f).dtype() == kFloat32);
  CHECK((f + d).dtype() == kFloat64);
  CHECK((i + b).dtype() == kInt64);
  CHECK((b + b).dtype() == kBool);
  CHECK((b + b).to_vector<bool>() == std::vector<bool>{true, false});
  CHECK((b * 2).dtype() == kInt64);
  CHECK((b * 2).to_vector<int64_t>() == std::vector<int64_t>{2, 0});
  CHECK((b * 2.0).dtype() == kFloat32);
  CHECK((i / i).dtype() == kFloat32);  // true division
  CHECK(fv(tensor<int64_t>({1, 3}) / tensor<int64_t>({2, 2})) == std::vector<float>{0.5f, 1.5f});
  CHECK(fv(i / 2.0) == std::vector<float>{0.5f, 1.f});
  // scalars: int + 2.5 -> float32, float64 + 1 -> float64, int + 2 -> int64, f32 + 1e300 stays f32
  CHECK((i + 2.5).dtype() == kFloat32);
  CHECK(fv(i + 2.5) == std::vector<float>{3.5f, 4.5f});
  CHECK((d + 1.0).dtype() == kFloat64);
  CHECK((i + 2).dtype() == kInt64);
  CHECK((i + 2).to_vector<int64_t>() == std::vector<int64_t>{3, 4});
  CHECK((i + 2.0).dtype() == kFloat32);  // a floating scalar, whatever its value (torch)
  CHECK((f * 2.0).dtype() == kFloat32);
  CHECK((2.0 - f).to_vector<float>() == std::vector<float>{1.5f, 0.5f});
  CHECK((3.0 / f).to_vector<float>() == std::vector<float>{6.f, 2.f});
  CHECK((1 + i).dtype() == kInt64);
  CHECK((1.0 + i).dtype() == kFloat32);
  CHECK((2 * i).to_vector<int64_t>() == std::vector<int64_t>{2, 4});
  CHECK(pow(i, 2).to_vector<int64_t>() == std::vector<int64_t>{1, 4});
  CHECK(wrap_scalar(2.0, i).dim() == 0);
  CHECK(wrap_scalar(2.5, d).dtype() == kFloat64);
  CHECK_THROWS_AS(b - b, TypeError);
  check_throws_naming_op<TypeError>([&] { sub(b, b); }, "sub");
  // one bool operand is refused too, as torch does, whatever the other would promote it to
  check_throws_mentioning<TypeError>([&] { (void)(1 - b); }, "[sub] subtraction with a bool");
  CHECK_THROWS_AS((void)(b - 1), TypeError);
  CHECK_THROWS_AS((void)(f - b), TypeError);
  CHECK_THROWS_AS(sub_(f, b), TypeError);
  CHECK((b + 1).to_vector<int64_t>() == std::vector<int64_t>{2, 1});  // other ops promote
  // a bool scalar is a bool operand too (torch: f - True raises), on either side and in place
  check_throws_mentioning<TypeError>([&] { (void)(f - true); }, "[sub] subtraction with a bool");
  check_throws_mentioning<TypeError>([&] { (void)(true - i); }, "[sub] subtraction with a bool");
  check_throws_mentioning<TypeError>([&] { sub(d, false); }, "shape [2]");
  check_throws_naming_op<TypeError>([&] { f.sub_(true); }, "sub_");
  CHECK(fv(f) == std::vector<float>{0.5f, 1.5f});                          // untouched
  CHECK((f + true).to_vector<float>() == std::vector<float>{1.5f, 2.5f});  // add takes it
}

TEST_CASE("comparisons and logical ops give bool") {
  Tensor a = tensor({1.f, 2.f, 3.f});
  Tensor b = tensor({3.f, 2.f, 1.f});
  CHECK((a < b).to_vector<bool>() == std::vector<bool>{true, false, false});
  CHECK((a <= b).to_vector<bool>() == std::vector<bool>{true, true, false});
  CHECK((a > b).to_vector<bool>() == std::vector<bool>{false, false, true});
  CHECK((a >= b).to_vector<bool>() == std::vector<bool>{false, true, true});
  CHECK(eq(a, b).to_vector<bool>() == std::vector<bool>{false, true, false});
  CHECK(ne(a, b).to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK((a < 2.0).to_vector<bool>() == std::vector<bool>{true, false, false});
  CHECK((a >= 2.0).dtype() == kBool);
  CHECK(eq(tensor<int64_t>({2, 3}), 2.5).to_vector<bool>() == std::vector<bool>{false, false});
  CHECK(lt(tensor<int64_t>({2, 3}), 2.5).to_vector<bool>() == std::vector<bool>{true, false});
  CHECK(le(a, 1.0).to_vector<bool>()[0]);
  CHECK(gt(a, 1.0).to_vector<bool>()[2]);
  CHECK(ge(a, 3.0).to_vector<bool>()[2]);
  CHECK(ne(a, 3.0).to_vector<bool>()[0]);
  Tensor p = tensor<bool>({true, true, false, false});
  Tensor q = tensor<bool>({true, false, true, false});
  CHECK((p && q).to_vector<bool>() == std::vector<bool>{true, false, false, false});
  CHECK((p || q).to_vector<bool>() == std::vector<bool>{true, true, true, false});
  CHECK(logical_and(tensor({0.f, 2.f}), tensor<int64_t>({1, 1})).to_vector<bool>() ==
        std::vector<bool>{false, true});
}

TEST_CASE("where") {
  Tensor c = tensor<bool>({true, false, true});
  Tensor a = tensor({1.f, 2.f, 3.f});
  Tensor b = tensor<double>({10.0});
  Tensor w = where(c, a, b);
  CHECK(w.dtype() == kFloat64);
  CHECK(w.to_vector<double>() == std::vector<double>{1, 10, 3});
  CHECK(fv(where(c, a, 0.0)) == std::vector<float>{1, 0, 3});
  CHECK(fv(where(c, -1.0, a)) == std::vector<float>{-1, 2, -1});
  Tensor c2 = tensor<bool>({true, false}).reshape({2, 1});
  CHECK(where(c2, a, b).shape() == Shape{2, 3});
  CHECK_THROWS_AS(where(a, a, a), TypeError);
  check_throws_naming_op<TypeError>([&] { where(a, a, a); }, "where");
  CHECK_THROWS_AS(where(c, a, tensor({1.f, 2.f})), ValueError);
}

TEST_CASE("to_dtype casts") {
  Tensor x = tensor({-1.7f, 0.f, 2.5f});
  CHECK(x.to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{-1, 0, 2});
  CHECK(x.to(kBool).to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(x.to(kFloat64).dtype() == kFloat64);
  CHECK(x.to(kFloat32).is_same(x));
  Tensor t = arange(0, 6, 1, kInt64).reshape({2, 3}).t().to(kFloat32);
  CHECK(fv(t) == std::vector<float>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("empty tensors and errors") {
  Tensor e = zeros({0, 3});
  CHECK((e + 1.0).shape() == Shape{0, 3});
  CHECK(exp(e).numel() == 0);
  CHECK((e + tensor({1.f, 2.f, 3.f})).shape() == Shape{0, 3});
  CHECK_THROWS_AS(add(tensor({1.f, 2.f}), tensor({1.f, 2.f, 3.f})), ValueError);
  check_throws_naming_op<ValueError>([&] { mul(zeros({2, 3}), zeros({4})); }, "mul");
}

TEST_CASE("kernels are counted") {
  Tensor a = ones({4}), b = ones({4});
  reset_kernel_counts();
  Tensor c = a + b;
  CHECK(kernel_count(KernelKind::Elementwise) == 1);
  Tensor d = a.t().contiguous();
  (void)c;
  (void)d;
}

TEST_CASE("copy_into and binary_inplace kernels on strided outputs") {
  // dst: every other column of a [2, 4] buffer; src broadcast from [2, 1] and cast int64 -> f32
  Tensor buf = zeros({2, 4});
  Tensor dst = buf.slice(1, 0, std::nullopt, 2);
  kernels::copy_into(tensor<int64_t>({7, 9}, {2, 1}), dst);
  CHECK(buf.to_vector<float>() == std::vector<float>{7, 0, 7, 0, 9, 0, 9, 0});
  // transposed dst and transposed src (same strides) copy element-wise
  Tensor a = zeros({3, 2});
  kernels::copy_into(arange(0, 6, 1, kFloat32).view({2, 3}).t(), a);
  CHECK(a.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  Tensor b = zeros({2, 3});
  kernels::copy_into(arange(0, 6, 1, kFloat64).view({3, 2}).t(), b.t().t());
  CHECK(b.to_vector<float>() == std::vector<float>{0, 2, 4, 1, 3, 5});
  kernels::binary_inplace(kernels::BinaryKind::Add, dst, tensor({1.f, 2.f}));
  CHECK(buf.to_vector<float>() == std::vector<float>{8, 0, 9, 0, 10, 0, 11, 0});
  kernels::binary_inplace(kernels::BinaryKind::Mul, buf.t(), tensor<int64_t>({2, 3}));
  CHECK(buf.to_vector<float>() == std::vector<float>{16, 0, 18, 0, 30, 0, 33, 0});
  CHECK_THROWS_AS(kernels::binary_inplace(kernels::BinaryKind::Add, zeros({2}), zeros({3, 2})),
                  ValueError);
}

TEST_CASE("int64 and float64 arithmetic") {
  Tensor i = tensor<int64_t>({7, -7, 3});
  Tensor j = tensor<int64_t>({2, 2, 4});
  CHECK((i * j).to_vector<int64_t>() == std::vector<int64_t>{14, -14, 12});
  CHECK((i - j).to_vector<int64_t>() == std::vector<int64_t>{5, -9, -1});
  CHECK(pow(j, tensor<int64_t>({3, 0, 2})).to_vector<int64_t>() == std::vector<int64_t>{8, 1, 16});
  CHECK(maximum(i, j).to_vector<int64_t>() == std::vector<int64_t>{7, 2, 4});
  CHECK((i / j).to_vector<float>() == std::vector<float>{3.5f, -3.5f, 0.75f});
  Tensor d = tensor<double>({0.1, 0.2});
  Tensor s = d + tensor<double>({0.2, 0.1});
  CHECK(s.to_vector<double>()[0] == 0.1 + 0.2);  // computed in double, not float
  CHECK(sigmoid(d).to_vector<double>()[0] ==
        doctest::Approx(1 / (1 + std::exp(-0.1))).epsilon(1e-14));
}

TEST_CASE("vectorised unary paths match std math on long inputs") {
  std::vector<double> v;
  for (int i = 0; i < 103; ++i) v.push_back(-6.0 + 0.12 * i);  // not a multiple of any width
  Tensor d = tensor(v);
  Tensor f = d.to(kFloat32);
  auto check = [&](auto op, double (*ref)(double), bool positive_only) {
    auto rd = op(d).template to_vector<double>();
    auto rf = op(f).template to_vector<float>();
    for (size_t i = 0; i < v.size(); ++i) {
      if (positive_only && v[i] <= 0) continue;
      double want = ref(v[i]);
      CHECK(std::abs(rd[i] - want) <= 1e-13 + 1e-12 * std::abs(want));
      CHECK(std::abs(rf[i] - want) <= 1e-6 + 1e-5 * std::abs(want));
    }
  };
  check([](const Tensor& t) { return exp(t); }, [](double x) { return std::exp(x); }, false);
  check([](const Tensor& t) { return tanh(t); }, [](double x) { return std::tanh(x); }, false);
  check([](const Tensor& t) { return sigmoid(t); }, [](double x) { return 1 / (1 + std::exp(-x)); },
        false);
  check([](const Tensor& t) { return gelu(t); },
        [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, false);
  check([](const Tensor& t) { return gelu(t, true); },
        [](double x) {
          return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        },
        false);
  check([](const Tensor& t) { return log(t); }, [](double x) { return std::log(x); }, true);
  check([](const Tensor& t) { return sqrt(t); }, [](double x) { return std::sqrt(x); }, true);
  check([](const Tensor& t) { return rsqrt(t); }, [](double x) { return 1 / std::sqrt(x); }, true);
}

// An element's bits must not depend on where it sits: in a vector or the tail, in a contiguous
// tensor or a strided one (vmap's chunks and blocks of sets move it). The tail took std::tanh
// and friends, whose last bits differ from xsimd's: Tanh gave other bits with chunk_size.
TEST_CASE("vectorised unary maps give an element the same bits at any position and stride") {
  std::vector<float> v;
  for (int i = 0; i < 40; ++i) v.push_back(-3.0f + 0.1537f * static_cast<float>(i));
  const Tensor x = tensor(v);
  const Tensor grid = tensor(v, {8, 5});
  std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops = {
      {"exp", [](const Tensor& t) { return exp(t); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
      {"gelu", [](const Tensor& t) { return gelu(t); }},
      {"gelu_tanh", [](const Tensor& t) { return gelu(t, true); }},
      {"log", [](const Tensor& t) { return log(abs(t)); }}};
  for (const auto& [name, op] : ops) {
    CAPTURE(name);
    const std::vector<float> whole = op(x).to_vector<float>();
    // every prefix length: each element once in a full vector, once in the tail
    for (int64_t n = 1; n <= 40; ++n) {
      const std::vector<float> part = op(x.slice(0, 0, n)).to_vector<float>();
      for (int64_t i = 0; i < n; ++i) CHECK(part[i] == whole[i]);
    }
    // a transposed (strided) input: the same bits as the contiguous one
    const std::vector<float> t = op(grid.t()).to_vector<float>();
    for (int64_t r = 0; r < 5; ++r)
      for (int64_t c = 0; c < 8; ++c) CHECK(t[r * 8 + c] == whole[c * 5 + r]);
  }
  // and the values are still the functions' (a loop in double)
  const std::vector<float> th = tanh(x).to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) CHECK(std::abs(th[i] - std::tanh(double(v[i]))) <= 1e-6);
}

// xsimd 8.1's exp overflows early and its double log is wrong on subnormals; torch's are not
TEST_CASE("exp near the overflow edge and log of subnormals are right, as torch's") {
  // float: exp(88.5) = 2.715e38 is finite (xsimd gave inf from 88.376 on), exp(88.8) is not,
  // exp(-88.5) = 3.67e-39 is subnormal (xsimd gave 0)
  std::vector<float> fx(20, 1.0f);
  fx[3] = 88.5f, fx[17] = 88.7f, fx[18] = 88.8f, fx[19] = -88.5f, fx[4] = -103.0f;
  const auto fe = exp(tensor(fx)).to_vector<float>();
  for (size_t i = 0; i < fx.size(); ++i) {
    CAPTURE(fx[i]);
    const double want = std::exp(static_cast<double>(fx[i]));
    if (want > std::numeric_limits<float>::max())
      CHECK(std::isinf(fe[i]));
    else  // within one float ulp, subnormal ulps included
      CHECK(std::abs(fe[i] - want) <= std::max(2e-7 * want, 1.5e-45));
  }
  // sigmoid(-88.5) = 1 / (1 + exp(88.5)), a subnormal float, not 0
  const auto sg = sigmoid(tensor(fx)).to_vector<float>();
  CHECK(sg[19] > 0.0f);
  CHECK(std::abs(sg[19] - 1.0 / (1.0 + std::exp(88.5))) <= 1e-44);
  // double: exp(709.5) is finite; log of a subnormal is about -709.4 (xsimd gave -746.2)
  std::vector<double> dx(9, 2.0);
  dx[1] = 709.5, dx[2] = -740.0, dx[5] = 8.35e-309, dx[8] = 4.9e-324;
  const auto de = exp(tensor(dx)).to_vector<double>();
  CHECK(std::abs(de[1] - std::exp(709.5)) <= 1e-15 * std::exp(709.5));
  CHECK(de[2] > 0.0);  // 4.2e-322, subnormal
  const auto dl = log(tensor(dx)).to_vector<double>();
  CHECK(dl[5] == doctest::Approx(std::log(8.35e-309)).epsilon(1e-14));
  CHECK(dl[8] == doctest::Approx(-744.44007192138122).epsilon(1e-14));
  CHECK(dl[0] == doctest::Approx(std::log(2.0)).epsilon(1e-15));
}

TEST_CASE("copy_into rejects a source that does not broadcast") {
  CHECK_THROWS_AS(kernels::copy_into(zeros({3}), zeros({2})), ValueError);
  CHECK_THROWS_AS(kernels::copy_into(zeros({2, 2}), zeros({2})), ValueError);
  // the kernel names itself: the ops that call it check their shapes first, naming themselves
  check_throws_mentioning<ValueError>([] { kernels::copy_into(zeros({3}), zeros({2})); },
                                      "[copy_into]");
  check_throws_mentioning<ValueError>([] { kernels::copy_into(zeros({2, 2}), zeros({2})); },
                                      "[copy_into] source of shape [2, 2]");
  Tensor d = zeros({2, 2});
  kernels::copy_into(scalar_tensor(5.0), d);
  CHECK(d.to_vector<float>() == std::vector<float>{5, 5, 5, 5});
}
