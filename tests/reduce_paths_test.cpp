// Every path of the reduction kernels (contiguous inner dims, outer dims with inner kept dims,
// dims neither inner nor outer, non-contiguous views) against naive reductions: sums in double,
// NaN and ties in amax/argmax, the same bits whatever the input's layout.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "engine/engine.h"
#include "tests/test_util.h"

using namespace td;
using namespace td::test;

namespace {

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
