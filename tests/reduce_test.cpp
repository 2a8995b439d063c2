// Reductions and softmax against naive loops and hand values.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/engine.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {

// x[i][j][k] = (i * 7 + j * 3 + k * 5) % 11 - 4, shape [2, 3, 4]
Tensor cube() {
  std::vector<float> v;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) v.push_back(static_cast<float>((i * 7 + j * 3 + k * 5) % 11 - 4));
  return tensor(v, {2, 3, 4});
}
float cube_at(int i, int j, int k) { return static_cast<float>((i * 7 + j * 3 + k * 5) % 11 - 4); }

// ---- naive reductions, to check the kernels' paths against ----

// n values with many ties, multiples of 1/8 for floating T, so that sums are exact in any order.
template <class T>
std::vector<T> pattern(int64_t n) {
  std::vector<T> v(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = i * 37 % 23 - 11;
    v[i] = std::is_floating_point_v<T> ? static_cast<T>(k * 0.125) : static_cast<T>(k);
  }
  return v;
}

// The elements of each output slot (row-major over the kept dims), each list in row-major order
// of the reduced dims, from x's values `v` in row-major order.
template <class T>
std::vector<std::vector<T>> slots_of(const std::vector<T>& v, const Shape& shape,
                                     const IntList& dims) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  std::vector<bool> red(nd, false);
  for (int64_t d : dims) red[d] = true;
  int64_t slots = 1;
  for (int64_t d = 0; d < nd; ++d)
    if (!red[d]) slots *= shape[d];
  std::vector<std::vector<T>> out(slots);
  std::vector<int64_t> idx(nd, 0);
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t slot = 0;
    for (int64_t d = 0; d < nd; ++d)
      if (!red[d]) slot = slot * shape[d] + idx[d];
    out[slot].push_back(v[i]);
    for (int64_t d = nd - 1; d >= 0 && ++idx[d] == shape[d]; --d) idx[d] = 0;
  }
  return out;
}

// Values of x.permute(perm) in row-major order, from x's row-major values v.
template <class T>
std::vector<T> permuted(const std::vector<T>& v, const Shape& shape, const IntList& perm) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  std::vector<int64_t> st(nd, 1), idx(nd, 0);
  for (int64_t d = nd - 2; d >= 0; --d) st[d] = st[d + 1] * shape[d + 1];
  std::vector<T> out;
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t off = 0;
    for (int64_t k = 0; k < nd; ++k) off += idx[k] * st[perm[k]];
    out.push_back(v[off]);
    for (int64_t k = nd - 1; k >= 0 && ++idx[k] == shape[perm[k]]; --k) idx[k] = 0;
  }
  return out;
}

template <class T>
double naive_sum(const std::vector<T>& e) {
  double s = 0;
  for (T x : e) s += static_cast<double>(x);
  return s;
}

double naive_var(const std::vector<double>& e, bool unbiased) {
  const double n = static_cast<double>(e.size());
  double m = 0, ss = 0;
  for (double x : e) m += x;
  m /= n;
  for (double x : e) ss += (x - m) * (x - m);
  if (unbiased && e.size() <= 1) return std::numeric_limits<double>::quiet_NaN();
  return ss / (unbiased ? n - 1 : n);
}

// Index of the first NaN, else of the first greatest (least) element.
template <class T>
int64_t naive_best(const std::vector<T>& e, bool is_max) {
  for (size_t i = 0; i < e.size(); ++i)
    if (e[i] != e[i]) return static_cast<int64_t>(i);
  int64_t b = 0;
  for (size_t i = 1; i < e.size(); ++i)
    if (is_max ? e[i] > e[b] : e[i] < e[b]) b = static_cast<int64_t>(i);
  return b;
}

// Equal, with NaN equal to NaN and the sign of a zero counting.
template <class T>
bool same(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
  else
    return a == b;
}

// got is ref, or NaN with ref; within a relative eps.
bool close(double got, double ref, double eps) {
  if (std::isnan(ref)) return std::isnan(got);
  return got == doctest::Approx(ref).epsilon(eps);
}

// Every reduction of x over dims (with and without keepdim) against the naive loops; `v` holds
// x's values in row-major order.
template <class T>
void check_reductions(const Tensor& x, const std::vector<T>& v, const IntList& dims) {
  CAPTURE(shape_str(x.shape()));
  CAPTURE(shape_str(dims));
  const auto slots = slots_of(v, x.shape(), dims);
  const int64_t n = static_cast<int64_t>(slots.size());
  const bool all = dims.size() == x.shape().size();
  for (bool keepdim : {false, true}) {
    CAPTURE(keepdim);
    Shape shape;
    for (int64_t d = 0; d < x.dim(); ++d) {
      const bool red = std::find(dims.begin(), dims.end(), d) != dims.end();
      if (!red || keepdim) shape.push_back(red ? 1 : x.shape()[d]);
    }
    using S = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
    const Tensor s = sum(x, dims, keepdim);
    REQUIRE(s.shape() == shape);
    const auto sv = s.to_vector<S>();
    for (int64_t k = 0; k < n; ++k) CHECK(same(sv[k], static_cast<S>(naive_sum(slots[k]))));
    if constexpr (std::is_floating_point_v<T>) {
      const auto mv = mean(x, dims, keepdim).to_vector<T>();
      const auto vu = var(x, dims, true, keepdim).to_vector<T>();
      const auto vb = var(x, dims, false, keepdim).to_vector<T>();
      const auto sd = td::std(x, dims, true, keepdim).to_vector<T>();
      for (int64_t k = 0; k < n; ++k) {
        const double r = static_cast<double>(slots[k].size());
        CHECK(same(mv[k], static_cast<T>(naive_sum(slots[k]) / r)));
        const std::vector<double> e(slots[k].begin(), slots[k].end());
        const double eps = std::is_same_v<T, float> ? 1e-6 : 1e-12;
        CHECK(close(vb[k], naive_var(e, false), eps));
        CHECK(close(vu[k], naive_var(e, true), eps));
        CHECK(close(sd[k], std::sqrt(naive_var(e, true)), eps));
      }
    }
    for (bool is_max : {true, false}) {
      CAPTURE(is_max);
      const Tensor a = is_max ? amax(x, dims, keepdim) : amin(x, dims, keepdim);
      REQUIRE(a.shape() == shape);
      const auto av = a.to_vector<T>();
      for (int64_t k = 0; k < n; ++k) CHECK(same(av[k], slots[k][naive_best(slots[k], is_max)]));
      // argmax takes one dim, or none for the flattened input.
      if (dims.size() != 1 && !all) continue;
      const std::optional<int64_t> dim =
          all && dims.size() != 1 ? std::nullopt : std::optional<int64_t>(dims[0]);
      const Tensor i = is_max ? argmax(x, dim, keepdim) : argmin(x, dim, keepdim);
      REQUIRE(i.shape() == shape);
      const auto iv = i.to_vector<int64_t>();
      for (int64_t k = 0; k < n; ++k) CHECK(iv[k] == naive_best(slots[k], is_max));
    }
  }
}

// x of `shape` holding pattern values, checked over dims.
template <class T>
void check_pattern(const Shape& shape, const IntList& dims) {
  const auto v = pattern<T>(shape_numel(shape));
  check_reductions(tensor(v, shape), v, dims);
}

}  // namespace

TEST_CASE("sum and mean over dims against a naive loop") {
  Tensor x = cube();
  CHECK(sum(x).dim() == 0);
  float total = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) total += cube_at(i, j, k);
  CHECK(sum(x).item<float>() == doctest::Approx(total));
  CHECK(mean(x).item<float>() == doctest::Approx(total / 24));

  Tensor s1 = sum(x, {1});
  CHECK(s1.shape() == Shape{2, 4});
  auto v1 = s1.to_vector<float>();
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      float r = 0;
      for (int j = 0; j < 3; ++j) r += cube_at(i, j, k);
      CHECK(v1[i * 4 + k] == doctest::Approx(r));
    }
  Tensor s02 = x.sum({0, -1}, true);
  CHECK(s02.shape() == Shape{1, 3, 1});
  auto v02 = s02.to_vector<float>();
  for (int j = 0; j < 3; ++j) {
    float r = 0;
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k) r += cube_at(i, j, k);
    CHECK(v02[j] == doctest::Approx(r));
  }
  auto m2 = mean(x, {2}).to_vector<float>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      float r = 0;
      for (int k = 0; k < 4; ++k) r += cube_at(i, j, k);
      CHECK(m2[i * 3 + j] == doctest::Approx(r / 4));
    }
}

TEST_CASE("reductions of non-contiguous inputs") {
  Tensor x = cube();
  Tensor p = x.permute({2, 0, 1});  // [4, 2, 3]
  auto v = sum(p, {0}).to_vector<float>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      float r = 0;
      for (int k = 0; k < 4; ++k) r += cube_at(i, j, k);
      CHECK(v[i * 3 + j] == doctest::Approx(r));
    }
  Tensor e = tensor({1.f, 2.f}).unsqueeze(1).expand({2, 5});
  CHECK(sum(e, {1}).to_vector<float>() == std::vector<float>{5.f, 10.f});
  Tensor s = arange(0, 10, 1, kFloat32).slice(0, 1, std::nullopt, 3);  // 1 4 7
  CHECK(sum(s).item<float>() == 12.f);
  CHECK(amax(s).item<float>() == 7.f);
}

TEST_CASE("sum dtypes") {
  CHECK(sum(tensor<bool>({true, true, false})).dtype() == kInt64);
  CHECK(sum(tensor<bool>({true, true, false})).item<int64_t>() == 2);
  CHECK(sum(tensor<int64_t>({4, 5})).item<int64_t>() == 9);
  CHECK(sum(tensor<double>({0.5})).dtype() == kFloat64);
  CHECK_THROWS_AS(mean(tensor<int64_t>({1, 2})), TypeError);
  check_throws_naming_op<TypeError>([] { mean(tensor<int64_t>({1, 2})); }, "mean");
  CHECK_THROWS_AS(var(tensor<int64_t>({1, 2})), TypeError);
  CHECK_THROWS_AS(td::std(tensor<bool>({true})), TypeError);
}

TEST_CASE("var and std, biased and unbiased") {
  Tensor x = tensor({1.f, 2.f, 3.f, 4.f});
  // mean 2.5, squared deviations sum 5
  CHECK(var(x).item<float>() == doctest::Approx(5.0 / 3));
  CHECK(var(x, {}, false).item<float>() == doctest::Approx(5.0 / 4));
  CHECK(td::std(x).item<float>() == doctest::Approx(std::sqrt(5.0 / 3)));
  CHECK(td::std(x, {0}, false).item<float>() == doctest::Approx(std::sqrt(5.0 / 4)));
  Tensor m = tensor({1.f, 3.f, 2.f, 6.f}, {2, 2});
  auto v0 = var(m, {0}).to_vector<float>();  // columns [1,2], [3,6]: 0.5, 4.5
  CHECK(v0[0] == doctest::Approx(0.5));
  CHECK(v0[1] == doctest::Approx(4.5));
  CHECK(var(m, {1}, true, true).shape() == Shape{2, 1});
  CHECK(std::isnan(var(tensor({1.f})).item<float>()));  // unbiased with one element
}

TEST_CASE("amax amin argmax argmin") {
  Tensor x = cube();
  auto mx = amax(x, {1}).to_vector<float>();
  auto mn = amin(x, {1}).to_vector<float>();
  auto am = argmax(x, 1).to_vector<int64_t>();
  auto an = argmin(x, 1).to_vector<int64_t>();
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      float best = cube_at(i, 0, k), worst = best;
      int64_t bi = 0, wi = 0;
      for (int j = 1; j < 3; ++j) {
        float v = cube_at(i, j, k);
        if (v > best) best = v, bi = j;
        if (v < worst) worst = v, wi = j;
      }
      CHECK(mx[i * 4 + k] == best);
      CHECK(mn[i * 4 + k] == worst);
      CHECK(am[i * 4 + k] == bi);
      CHECK(an[i * 4 + k] == wi);
    }
  Tensor t = tensor({3.f, 9.f, 9.f, -1.f, -1.f}, {5});
  CHECK(argmax(t).item<int64_t>() == 1);  // first occurrence
  CHECK(argmin(t).item<int64_t>() == 3);
  CHECK(argmax(t).dtype() == kInt64);
  Tensor m = tensor({1.f, 8.f, 3.f, 9.f, 0.f, 2.f}, {2, 3});
  CHECK(argmax(m).item<int64_t>() == 3);  // flattened
  CHECK(argmax(m, std::nullopt, true).shape() == Shape{1, 1});
  CHECK(argmax(m, -1, true).shape() == Shape{2, 1});
  CHECK(argmax(m, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0});
  CHECK(amax(m, {0, 1}).item<float>() == 9.f);
  CHECK(amax(tensor<int64_t>({3, -7})).item<int64_t>() == 3);
  CHECK(amin(tensor<int64_t>({3, -7})).dtype() == kInt64);
}

TEST_CASE("argmax and argmin refuse bool tensors, max and min with a dim take them, as torch") {
  // torch: '"argmax_cpu" not implemented for 'Bool''; td gave indices
  Tensor b = tensor<bool>({false, true, true, false, false, true}, {2, 3});
  check_throws_naming_op<TypeError>([&] { argmax(b); }, "argmax");
  check_throws_mentioning<TypeError>([&] { argmin(b, 1); },
                                     "[argmin] is not implemented for bool tensors (shape [2, 3])");
  CHECK_THROWS_AS(b.argmax(0, true), TypeError);
  CHECK_THROWS_AS(vmap([](Tensor t) { return argmax(t); })(b), TypeError);
  // torch.max(b, 1) = ([true, true], [1, 2]); torch.min(b, 0) = ([false, false, true], [0, 1, 0])
  // (the first extreme of each column)
  auto [mv, mi] = max(b, 1);
  CHECK(mv.dtype() == kBool);
  CHECK(mv.to_vector<bool>() == std::vector<bool>{true, true});
  CHECK(mi.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  auto [nv, ni] = min(b, 0, true);
  CHECK(nv.shape() == Shape{1, 3});
  CHECK(nv.to_vector<bool>() == std::vector<bool>{false, false, true});
  CHECK(ni.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0});
}

TEST_CASE("empty reductions and dim errors") {
  Tensor e = zeros({0, 3});
  CHECK(sum(e).item<float>() == 0.f);
  CHECK(sum(e, {0}).to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(sum(e, {1}).shape() == Shape{0});
  CHECK(amax(e, {1}).shape() == Shape{0});
  CHECK_THROWS_AS(amax(e, {0}), ValueError);
  check_throws_naming_op<ValueError>([&] { amax(e); }, "amax");
  CHECK_THROWS_AS(argmax(e), ValueError);
  CHECK_THROWS_AS(amin(zeros({0})), ValueError);
  Tensor x = zeros({2, 3});
  CHECK_THROWS_AS(sum(x, {2}), IndexError);
  check_throws_naming_op<IndexError>([&] { sum(x, {-3}); }, "sum");
  CHECK_THROWS_AS(sum(x, {1, -1}), ValueError);
  check_throws_naming_op<ValueError>([&] { mean(x, {0, 0}); }, "mean");
  CHECK_THROWS_AS(argmax(x, 5), IndexError);
  // 0-d input
  Tensor s = scalar_tensor(2.5);
  CHECK(sum(s).item<float>() == 2.5f);
  CHECK(sum(s, {0}).item<float>() == 2.5f);
  CHECK(argmax(s).item<int64_t>() == 0);
}

TEST_CASE("softmax and log_softmax") {
  Tensor x = tensor({1.f, 2.f, 3.f, 0.f, 0.f, 0.f}, {2, 3});
  auto s = softmax(x, 1).to_vector<float>();
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  CHECK(s[0] == doctest::Approx(std::exp(1.0) / z));
  CHECK(s[2] == doctest::Approx(std::exp(3.0) / z));
  CHECK(s[4] == doctest::Approx(1.0 / 3));
  auto ls = log_softmax(x, -1).to_vector<float>();
  CHECK(ls[1] == doctest::Approx(2.0 - std::log(z)));
  auto s0 = softmax(x, 0).to_vector<float>();
  CHECK(s0[0] == doctest::Approx(std::exp(1.0) / (std::exp(1.0) + 1)));
  CHECK(s0[3] == doctest::Approx(1 / (std::exp(1.0) + 1)));
  // stable for huge inputs
  auto big = softmax(tensor({1000.f, 1000.f}), 0).to_vector<float>();
  CHECK(big[0] == doctest::Approx(0.5));
  auto lbig = log_softmax(tensor({1000.f, 0.f}), 0).to_vector<float>();
  CHECK(lbig[0] == doctest::Approx(0.0));
  CHECK(lbig[1] == doctest::Approx(-1000.0));
  // transposed input
  auto st = softmax(x.t(), 0).to_vector<float>();  // [3, 2], columns are x's rows
  CHECK(st[0] == doctest::Approx(std::exp(1.0) / z));
  CHECK(st[1] == doctest::Approx(1.0 / 3));
  CHECK(softmax(tensor<double>({0.0, 0.0}), 0).dtype() == kFloat64);
  CHECK(softmax(scalar_tensor(3.0), 0).item<float>() == 1.f);
  CHECK_THROWS_AS(softmax(tensor<int64_t>({1, 2}), 0), TypeError);
  check_throws_naming_op<TypeError>([] { log_softmax(tensor<int64_t>({1}), 0); }, "log_softmax");
  CHECK_THROWS_AS(softmax(x, 2), IndexError);
}

TEST_CASE("softmax and log_softmax on long rows, strided rows, NaN and -inf rows") {
  // Rows of 1, 16, 37 and 70 values reach the vector loops and the padded tail; dim 0 of the
  // [n, 3] input makes strided rows. Each row is checked against a loop in double.
  for (DType dt : {kFloat32, kFloat64}) {
    const double tol = dt == kFloat32 ? 1e-6 : 1e-13;
    for (int64_t n : {1, 16, 37, 70}) {
      CAPTURE(n);
      std::vector<double> v(n * 3);
      for (int64_t i = 0; i < n * 3; ++i) v[i] = std::sin(0.7 * i) * 20.0;
      Tensor x = tensor(v, {n, 3}).to(dt);
      for (bool log : {false, true})
        for (int64_t dim : {0, 1}) {
          CAPTURE(log);
          CAPTURE(dim);
          Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
          auto yv = y.to_vector<double>();
          const int64_t len = dim == 0 ? n : 3, rows = dim == 0 ? 3 : n;
          for (int64_t r = 0; r < rows; ++r) {
            auto at = [&](int64_t k) { return dim == 0 ? k * 3 + r : r * 3 + k; };
            double mx = -INFINITY, z = 0;
            for (int64_t k = 0; k < len; ++k) mx = std::max(mx, v[at(k)]);
            for (int64_t k = 0; k < len; ++k) z += std::exp(v[at(k)] - mx);
            for (int64_t k = 0; k < len; ++k) {
              const double want = log ? v[at(k)] - mx - std::log(z) : std::exp(v[at(k)] - mx) / z;
              CHECK(yv[at(k)] == doctest::Approx(want).epsilon(tol).scale(log ? 20 : 1));
            }
          }
        }
    }
  }
  // A NaN makes its whole row NaN; a row of -inf is NaN too (0 / 0), as torch's
  std::vector<float> v(2 * 37, 1.f);
  v[30] = std::nanf("");
  for (int64_t i = 37; i < 74; ++i) v[i] = -INFINITY;
  auto y = softmax(tensor(v, {2, 37}), 1).to_vector<float>();
  for (float f : y) CHECK(std::isnan(f));
}

TEST_CASE("reductions over contiguous inner dims match naive loops") {
  for (int64_t n : {1, 7, 33, 1000, 4099}) {
    check_pattern<float>({n}, {0});
    check_pattern<double>({n}, {0});
    check_pattern<int64_t>({n}, {0});
    check_pattern<float>({3, n}, {1});
    check_pattern<double>({3, n}, {1});
    check_pattern<int64_t>({3, n}, {1});
  }
  // several inner dims merged into one run, with outer dims kept or reduced too
  check_pattern<float>({3, 5, 7}, {1, 2});
  check_pattern<double>({2, 3, 33}, {0, 1, 2});
  check_pattern<int64_t>({2, 7, 9}, {1, 2});
  check_pattern<float>({4, 1, 33}, {1, 2});
}

TEST_CASE("reductions over outer dims with contiguous inner kept dims match naive loops") {
  // 1000 and 4099 kept columns span several column blocks
  for (int64_t m : {7, 33, 1000, 4099})
    for (int64_t r : {1, 7, 33}) {
      check_pattern<float>({r, m}, {0});
      check_pattern<double>({r, m}, {0});
      check_pattern<int64_t>({r, m}, {0});
    }
  check_pattern<float>({3, 5, 7}, {0, 1});
  check_pattern<double>({7, 3, 9}, {0});
  // a middle dim: an outer kept dim around the blocks of columns
  check_pattern<float>({3, 7, 33}, {1});
  check_pattern<double>({5, 6, 7}, {1});
  check_pattern<int64_t>({4, 9, 1000}, {1});
  check_pattern<float>({2, 3, 4, 5}, {0, 2});
}

TEST_CASE("reductions over dims neither inner nor outer match naive loops") {
  check_pattern<float>({3, 5, 7}, {0, 2});
  check_pattern<double>({4, 3, 33}, {0, 2});
  check_pattern<int64_t>({2, 3, 4, 5}, {1, 3});
}

TEST_CASE("reductions of non-contiguous views match naive loops") {
  const Shape s{33, 7};
  const auto v = pattern<float>(231);
  const Tensor x = tensor(v, s);
  const auto vt = permuted(v, s, {1, 0});
  for (const IntList& dims : {IntList{0}, IntList{1}, IntList{0, 1}}) {
    check_reductions(x.t(), vt, dims);
    check_reductions(x.t().to(kFloat64), std::vector<double>(vt.begin(), vt.end()), dims);
    check_reductions(tensor(pattern<int64_t>(231), s).t(),
                     permuted(pattern<int64_t>(231), s, {1, 0}), dims);
  }
  const Shape s3{5, 6, 33};
  const auto v3 = pattern<double>(990);
  const Tensor p = tensor(v3, s3).permute({2, 0, 1});
  const auto vp = permuted(v3, s3, {2, 0, 1});
  for (const IntList& dims : {IntList{0}, IntList{1}, IntList{2}, IntList{0, 1}, IntList{1, 2},
                              IntList{0, 2}, IntList{0, 1, 2}})
    check_reductions(p, vp, dims);
  // every third column of 4099: rows strided inside
  const auto w = pattern<float>(3 * 4099);
  std::vector<float> ws;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 1; j < 4099; j += 3) ws.push_back(w[i * 4099 + j]);
  const Tensor sl = tensor(w, {3, 4099}).slice(1, 1, std::nullopt, 3);
  for (const IntList& dims : {IntList{0}, IntList{1}, IntList{0, 1}})
    check_reductions(sl, ws, dims);
  // a window of rows and columns: each row a contiguous run at an offset
  std::vector<float> wn;
  for (int64_t i = 1; i < 3; ++i)
    for (int64_t j = 2; j < 1002; ++j) wn.push_back(w[i * 4099 + j]);
  const Tensor nw = tensor(w, {3, 4099}).slice(0, 1, 3).slice(1, 2, 1002);
  for (const IntList& dims : {IntList{0}, IntList{1}, IntList{0, 1}})
    check_reductions(nw, wn, dims);
  // expanded: stride 0
  const Tensor e = tensor(pattern<float>(33), {33, 1}).expand({33, 9});
  std::vector<float> ve;
  for (float a : pattern<float>(33)) ve.insert(ve.end(), 9, a);
  for (const IntList& dims : {IntList{0}, IntList{1}}) check_reductions(e, ve, dims);
}

TEST_CASE("float32 sums accumulate in double on every path") {
  // 1e8 and then ones: a float accumulator drops the ones (its spacing there is 8).
  const int64_t n = 4099;
  std::vector<float> v(n, 1.f), v3(3 * n, 1.f);
  v[0] = v3[0] = v3[1] = v3[2] = 1e8f;
  const float total = static_cast<float>(1e8 + (n - 1));
  const float avg = static_cast<float>((1e8 + (n - 1)) / n);
  CHECK(sum(tensor(v)).item<float>() == total);
  CHECK(mean(tensor(v)).item<float>() == avg);
  // n rows of 3 contiguous columns
  CHECK(sum(tensor(v3, {n, 3}), {0}).to_vector<float>() == std::vector<float>(3, total));
  CHECK(mean(tensor(v3, {n, 3}), {0}).to_vector<float>() == std::vector<float>(3, avg));
  // expanded columns (stride 0)
  CHECK(sum(tensor(v, {n, 1}).expand({n, 3}), {0}).to_vector<float>() ==
        std::vector<float>(3, total));
}

TEST_CASE("amax argmax amin argmin: NaN wins, first of ties and of NaNs") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // v repeated in 5 columns, row-major
  const auto columns = [](const std::vector<float>& v) {
    std::vector<float> e;
    for (float a : v) e.insert(e.end(), 5, a);
    return e;
  };
  for (int64_t n : {7, 33, 1000}) {
    CAPTURE(n);
    for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
      CAPTURE(at);
      auto v = pattern<float>(n);
      v[at] = nan;
      check_reductions(tensor(v, {n}), v, {0});
      // the same run as 5 columns, and as the middle one of 3 runs
      check_reductions(tensor(columns(v), {n, 5}), columns(v), {0});
      std::vector<float> w = pattern<float>(3 * n);
      std::copy(v.begin(), v.end(), w.begin() + n);
      check_reductions(tensor(w, {3, n}), w, {1});
      check_reductions(tensor(w, {3, n}).t(), permuted(w, {3, n}, {1, 0}), {0});
      // a second NaN later: the first one's index
      if (at < n - 1) {
        v[n - 1] = nan;
        CHECK(argmax(tensor(v, {n})).item<int64_t>() == at);
        CHECK(argmin(tensor(v, {n}), 0).item<int64_t>() == at);
        CHECK(argmax(tensor(v, {n, 1}), 0).item<int64_t>() == at);
        CHECK(argmax(tensor(columns(v), {n, 5}), 0).to_vector<int64_t>() ==
              std::vector<int64_t>(5, at));
        CHECK(argmin(tensor(columns(v), {n, 5}).t(), 1).to_vector<int64_t>() ==
              std::vector<int64_t>(5, at));
      }
    }
  }
  // -0 and +0 tie: the first one, sign included
  const Tensor z = tensor(std::vector<float>{-0.f, 0.f, -0.f, 0.f, -1.f, -0.f, 0.f, -2.f, 0.f});
  CHECK(std::signbit(amax(z).item<float>()));
  CHECK(std::signbit(amax(z.slice(0, 1)).item<float>()) == false);
  CHECK(argmax(z.slice(0, 1)).item<int64_t>() == 0);
  std::vector<float> zz;
  for (float a : z.to_vector<float>()) zz.insert(zz.end(), 2, a);
  for (float a : amax(tensor(zz, {9, 2}), {0}).to_vector<float>()) CHECK(std::signbit(a));
  // the first zero in the second lane of 8-wide vectors, a later one in the first lane
  std::vector<float> z2(20, -1.f);
  z2[1] = -0.f;
  z2[8] = 0.f;
  CHECK(std::signbit(amax(tensor(z2)).item<float>()));
  z2[1] = 0.f;
  z2[8] = -0.f;
  CHECK(std::signbit(amax(tensor(z2)).item<float>()) == false);
  std::vector<double> big(1000, 0.0);
  big[3] = -0.0;
  big[700] = -0.0;
  CHECK(std::signbit(amin(tensor(big)).item<double>()) == false);
  CHECK(std::signbit(amin(tensor(big).slice(0, 3)).item<double>()));
  CHECK(argmax(tensor(big).slice(0, 3)).item<int64_t>() == 0);
}

TEST_CASE("reductions are counted") {
  Tensor x = ones({3, 4});
  reset_kernel_counts();
  sum(x, {1});
  CHECK(kernel_count(KernelKind::Reduce) == 1);
}

TEST_CASE("one dim as an integer, as in PyTorch; braces still list dims") {
  Tensor x = arange(24).view({2, 3, 4}).to(kFloat32);
  // by hand: sums over dim 2 of rows 0..3, 4..7, ... are 6, 22, 38, ...
  std::vector<float> want;
  for (int r = 0; r < 6; ++r) want.push_back(static_cast<float>(16 * r + 6));
  CHECK(equal(sum(x, -1), tensor(want).view({2, 3})));
  CHECK(equal(x.sum(2), sum(x, {2})));
  CHECK(equal(sum(x, 1, true), sum(x, {1}, true)));
  CHECK(sum(x, 1, true).shape() == Shape{2, 1, 4});
  CHECK(equal(x.mean(0), mean(x, {0})));
  CHECK(equal(mean(x, 0), mean(x, {0})));
  CHECK(equal(var(x, 1), var(x, {1})));
  CHECK(equal(td::std(x, 1, false), td::std(x, {1}, false)));
  CHECK(equal(amax(x, 2), amax(x, {2})));
  CHECK(equal(amin(x, -2), amin(x, {1})));
  CHECK(sum(x, {}).dim() == 0);  // {} is every dim, not dim 0
  CHECK(x.sum().item<float>() == 276.0f);
  CHECK_THROWS_AS(sum(x, 3), IndexError);
}

TEST_CASE("all, any, max and min as torch's, and the reductions as methods") {
  using B = std::vector<bool>;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = tensor({0.f, 2.f, 3.f, 4.f}, {2, 2});
  CHECK(all(x).dtype() == kBool);
  CHECK_FALSE(all(x).item<bool>());
  CHECK(any(x).item<bool>());
  CHECK(all(x, 1).to_vector<bool>() == B{false, true});
  CHECK(any(x, 0, true).shape() == Shape{1, 2});
  CHECK(x.all(0).to_vector<bool>() == B{false, true});
  CHECK(tensor({nan, 1.f}).all().item<bool>());  // NaN is nonzero
  CHECK(zeros({0}).all().item<bool>());          // of nothing: true, as torch
  CHECK_FALSE(zeros({0}).any().item<bool>());
  CHECK(all(arange(3) + 1).item<bool>());
  // a bad dim is reported as all's, any's, max's or min's own (they are built on sum and amax)
  check_throws_mentioning<IndexError>([&] { all(x, IntList{3}); }, "[all] dim 3 out of range");
  check_throws_mentioning<IndexError>([&] { any(x, IntList{-5}); }, "[any]");
  check_throws_mentioning<ValueError>([&] { all(x, IntList{0, -2}); }, "[all] dim appears");
  check_throws_mentioning<IndexError>([&] { max(x, 3); }, "[max] dim 3 out of range");
  check_throws_mentioning<IndexError>([&] { min(x, -3); }, "[min]");
  check_throws_mentioning<ValueError>(
      [] {
        max(zeros({2, 0}), 1);
      },
      "[max] cannot reduce over dim 1 of size 0");
  auto [sv, si] = max(scalar_tensor(4.0), 0);  // a 0-d input takes dim 0, as torch
  CHECK(sv.item<float>() == 4.f);
  CHECK(si.item<int64_t>() == 0);

  // [[1, 5], [7, 2]]: max over dim 0 is values [7, 5] at [1, 0]; min over dim 1 [1, 2] at [0, 1]
  Tensor m = tensor(std::vector<int64_t>{1, 5, 7, 2}, {2, 2});
  CHECK(max(m).item<int64_t>() == 7);
  CHECK(m.min().item<int64_t>() == 1);
  auto [v, i] = max(m, 0, true);
  CHECK(v.shape() == Shape{1, 2});
  CHECK(v.to_vector<int64_t>() == std::vector<int64_t>{7, 5});
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  auto [mv, mi] = m.min(1);
  CHECK(mv.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  CHECK(mi.to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  CHECK(max(tensor({1.f, 4.f}), tensor({3.f, 2.f})).to_vector<float>() ==
        std::vector<float>{3.f, 4.f});
  CHECK(min(tensor({1.f, 4.f}), tensor({3.f, 2.f})).to_vector<float>() ==
        std::vector<float>{1.f, 2.f});
  check_throws_naming_op<ValueError>([] { max(zeros({0, 2})); }, "max");
  check_throws_naming_op<ValueError>([] { zeros({0}).min(); }, "min");

  // methods are the free functions
  Tensor c = cube();
  CHECK(allclose(c.var(1), var(c, {1})));
  CHECK(allclose(c.std(-1, false, true), td::std(c, {-1}, false, true)));
  CHECK(allclose(c.amax(2), amax(c, {2})));
  CHECK(allclose(c.amin({0, 2}), amin(c, {0, 2})));
  CHECK(c.argmax(1).to_vector<int64_t>() == argmax(c, 1).to_vector<int64_t>());
  CHECK(c.argmin().item<int64_t>() == argmin(c).item<int64_t>());
  CHECK(allclose(c.softmax(-1), softmax(c, -1)));
  CHECK(allclose(c.log_softmax(0), log_softmax(c, 0)));
  CHECK(c.pow(2).to_vector<float>()[1] == cube_at(0, 0, 1) * cube_at(0, 0, 1));
  CHECK(allclose(c.pow(c.abs()), pow(c, abs(c))));
  CHECK(allclose(c.clamp(-1.0, 1.0), clamp(c, -1.0, 1.0)));
  CHECK(allclose(c.tanh(), tanh(c)));
  CHECK(allclose(c.sigmoid(), sigmoid(c)));
  // arithmetic methods, checked by hand: [1, 2] op [4, 8] and op 2
  Tensor p = tensor({1.f, 2.f}), q = tensor({4.f, 8.f});
  CHECK(p.add(q).to_vector<float>() == std::vector<float>{5.f, 10.f});
  CHECK(p.sub(q).to_vector<float>() == std::vector<float>{-3.f, -6.f});
  CHECK(p.mul(q).to_vector<float>() == std::vector<float>{4.f, 16.f});
  CHECK(p.div(q).to_vector<float>() == std::vector<float>{0.25f, 0.25f});
  CHECK(p.add(2).to_vector<float>() == std::vector<float>{3.f, 4.f});
  CHECK(p.sub(2).to_vector<float>() == std::vector<float>{-1.f, 0.f});
  CHECK(p.mul(2.5).to_vector<float>() == std::vector<float>{2.5f, 5.f});
  CHECK(tensor<int64_t>({1, 3}).div(2).to_vector<float>() == std::vector<float>{0.5f, 1.5f});
}

TEST_CASE("int64 sums wrap as PyTorch's; a huge expanded reduction is a RuntimeError") {
  const int64_t max = INT64_MAX, min = INT64_MIN;
  CHECK(tensor(std::vector<int64_t>{max, 1}).sum().item<int64_t>() == min);
  CHECK(tensor(std::vector<int64_t>{min, -1, 5}).sum().item<int64_t>() == min + 4);
  // over columns: [max, 1] + [1, max]
  CHECK(tensor(std::vector<int64_t>{max, 1, 1, max}, {2, 2}).sum(0).to_vector<int64_t>() ==
        std::vector<int64_t>{min, min});
  check_throws_naming_op<RuntimeError>([] { ones({1}).expand({int64_t{1} << 62}).sum(); }, "sum");
}

// A reduction's bits must not depend on its input's layout: vmap's chunks and blocks of sets
// give a set's slice other strides (a contiguous run, columns, or gathered elements), and sums
// took a different order on each path (float64 var under vmap changed with chunk_size).
TEST_CASE("sum, mean, var and std give the same bits whatever the input's layout") {
  for (DType dt : {kFloat32, kFloat64})
    for (auto shape : {Shape{3, 50, 7}, Shape{5, 9, 40}, Shape{2, 70, 3}}) {
      const Tensor x = mul(randn(shape, dt), 3.0);
      // the same values in two other layouts
      const Tensor xt = x.permute({2, 1, 0}).contiguous().permute({2, 1, 0});
      const Tensor xm = x.permute({1, 0, 2}).contiguous().permute({1, 0, 2});
      for (const IntList& dims : {IntList{0}, IntList{1}, IntList{2}, IntList{0, 2}, IntList{}})
        for (const Tensor& other : {xt, xm}) {
          CAPTURE(dims);
          CAPTURE(shape);
          CAPTURE(dt == kFloat64);
          CHECK(equal(sum(x, dims), sum(other, dims)));
          CHECK(equal(mean(x, dims), mean(other, dims)));
          CHECK(equal(var(x, dims), var(other, dims)));
          CHECK(equal(td::std(x, dims), td::std(other, dims)));
        }
    }
}
