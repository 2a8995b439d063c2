// conv2d (stride, padding, dilation, groups) and max/avg pooling (ceil_mode) against direct loops
// and hand values: non-contiguous and expanded inputs, NaN and -inf windows, size parameters,
// empty kernels and overflowing geometry, errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "engine/engine.h"
#include "tests/tensor_values.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {

// Direct convolution: x [N, C, H, W] (row-major values), w [O, C/g, kh, kw].
std::vector<double> ref_conv(const std::vector<double>& x, const std::vector<double>& w,
                             const std::vector<double>& b, int64_t n, int64_t c, int64_t h,
                             int64_t wd, int64_t o, int64_t kh, int64_t kw, int64_t s0, int64_t s1,
                             int64_t p0, int64_t p1, int64_t d0, int64_t d1, int64_t g, int64_t& oh,
                             int64_t& ow) {
  oh = (h + 2 * p0 - d0 * (kh - 1) - 1) / s0 + 1;
  ow = (wd + 2 * p1 - d1 * (kw - 1) - 1) / s1 + 1;
  const int64_t cg = c / g, og = o / g;
  std::vector<double> y(n * o * oh * ow, 0.0);
  for (int64_t in = 0; in < n; ++in)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t yy = 0; yy < oh; ++yy)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double acc = b.empty() ? 0.0 : b[oc];
          const int64_t grp = oc / og;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                int64_t iy = yy * s0 - p0 + i * d0, ix = xx * s1 - p1 + j * d1;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                acc += x[((in * c + grp * cg + ic) * h + iy) * wd + ix] *
                       w[((oc * cg + ic) * kh + i) * kw + j];
              }
          y[((in * o + oc) * oh + yy) * ow + xx] = acc;
        }
  return y;
}

// Direct pooling over [N*C, H, W] planes.
std::vector<double> ref_pool(const std::vector<double>& x, int64_t planes, int64_t h, int64_t w,
                             int64_t k0, int64_t k1, int64_t s0, int64_t s1, int64_t p0, int64_t p1,
                             int64_t d0, int64_t d1, bool is_max) {
  int64_t oh = (h + 2 * p0 - d0 * (k0 - 1) - 1) / s0 + 1;
  int64_t ow = (w + 2 * p1 - d1 * (k1 - 1) - 1) / s1 + 1;
  std::vector<double> y;
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t yy = 0; yy < oh; ++yy)
      for (int64_t xx = 0; xx < ow; ++xx) {
        double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
        for (int64_t i = 0; i < k0; ++i)
          for (int64_t j = 0; j < k1; ++j) {
            int64_t iy = yy * s0 - p0 + i * d0, ix = xx * s1 - p1 + j * d1;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            double v = x[(pl * h + iy) * w + ix];
            acc = is_max ? std::max(acc, v) : acc + v;
          }
        y.push_back(is_max ? acc : acc / static_cast<double>(k0 * k1));
      }
  return y;
}

// A pool's geometry: kernel, stride, padding, dilation as (rows, columns), and ceil_mode.
struct PoolCase {
  int64_t k0, k1, s0, s1, p0, p1, d0, d1;
  bool ceil;
};

// torch's output length: floor (or with ceil_mode ceil) of room / s, plus one, less one if the
// last window would start in the right padding; 0 where torch refuses the input.
int64_t pool_len(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  const int64_t room = n + 2 * p - d * (k - 1) - 1;
  const int64_t num = room + (ceil ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil && (out - 1) * s >= n + p) --out;
  return std::max<int64_t>(out, 0);
}

// Pools x's [planes, h, w] values a window at a time, its taps in row then column order: a max
// takes the last NaN, else the first maximum, and its index iy * w + ix (the first tap inside
// when all are -inf; -1 for a window with no tap inside); an avg sums the taps inside in double
// and divides by divisor, or else by the window clipped to the padded input (count_include_pad)
// or by the taps inside.
template <class T>
struct PoolRef {
  std::vector<T> out;
  std::vector<int64_t> idx;
};
template <class T>
PoolRef<T> ref_pool_windows(const std::vector<T>& x, int64_t planes, int64_t h, int64_t w,
                            const PoolCase& c, bool is_max, bool count_include_pad,
                            int64_t divisor) {
  const int64_t oh = pool_len(h, c.k0, c.s0, c.p0, c.d0, c.ceil);
  const int64_t ow = pool_len(w, c.k1, c.s1, c.p1, c.d1, c.ceil);
  PoolRef<T> r;
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        const int64_t y0 = oy * c.s0 - c.p0, x0 = ox * c.s1 - c.p1;
        T m = -std::numeric_limits<T>::infinity();
        int64_t arg = -1, inside = 0;
        double sum = 0;
        for (int64_t i = 0; i < c.k0; ++i)
          for (int64_t j = 0; j < c.k1; ++j) {
            const int64_t iy = y0 + i * c.d0, ix = x0 + j * c.d1;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            const T v = x[(pl * h + iy) * w + ix];
            if (arg < 0) arg = iy * w + ix;
            ++inside;
            sum += v;
            if (std::isnan(v) || (!std::isnan(m) && v > m)) {
              m = v;
              arg = iy * w + ix;
            }
          }
        if (is_max) {
          r.out.push_back(m);
          r.idx.push_back(arg);
          continue;
        }
        double div = static_cast<double>(inside);
        if (divisor != 0)
          div = static_cast<double>(divisor);
        else if (count_include_pad)
          div = static_cast<double>(std::min(y0 + c.k0, h + c.p0) - y0) *
                static_cast<double>(std::min(x0 + c.k1, w + c.p1) - x0);
        r.out.push_back(static_cast<T>(sum / div));
      }
  return r;
}

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

bool tensor_bits_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  return a.dtype() == kFloat32 ? same_bits(a.to_vector<float>(), b.to_vector<float>())
                               : same_bits(a.to_vector<double>(), b.to_vector<double>());
}

// Values with ties, signed zeros, NaNs of distinct payloads and runs of -inf (max), or of
// magnitudes far apart, so that a sum's order shows in its bits (avg).
template <class T>
std::vector<T> pool_input(int64_t n, bool for_max) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const Bits quiet_nan = std::bit_cast<Bits>(std::numeric_limits<T>::quiet_NaN());
  std::vector<T> v(n);
  for (int64_t i = 0; i < n; ++i) {
    if (!for_max) {
      v[i] = static_cast<T>(std::sin(0.7 * i) * std::pow(10.0, i % 9 - 4));
      continue;
    }
    v[i] = static_cast<T>((i * 7919) % 13) - 6;
    if (i % 17 == 3) v[i] = T(-0.0);
    if (i % 19 == 5) v[i] = T(0.0);
    if (i % 29 == 7) v[i] = std::bit_cast<T>(static_cast<Bits>(quiet_nan | (i % 5 + 1)));
    if (i % 41 < 9) v[i] = -std::numeric_limits<T>::infinity();
  }
  return v;
}

// Every output of max_pool2d (with and without indices) and avg_pool2d (count_include_pad both
// ways, divisor_override) against ref_pool_windows, bit for bit. `layout` 0: contiguous, 1:
// transposed storage, 2: every other column of a wider tensor.
template <class T>
void check_pools(int64_t n, int64_t c, int64_t h, int64_t w, const PoolCase& g, int layout) {
  CAPTURE(h);
  CAPTURE(w);
  CAPTURE(layout);
  CAPTURE(g.k0);
  CAPTURE(g.k1);
  CAPTURE(g.s0);
  CAPTURE(g.s1);
  CAPTURE(g.p0);
  CAPTURE(g.p1);
  CAPTURE(g.d0);
  CAPTURE(g.d1);
  CAPTURE(g.ceil);
  auto make = [&](const std::vector<T>& v) {
    if (layout == 0) return tensor<T>(v, {n, c, h, w});
    std::vector<T> u(v.size() * (layout == 2 ? 2 : 1), T(7));
    for (int64_t pl = 0; pl < n * c; ++pl)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          const T e = v[(pl * h + y) * w + x];
          if (layout == 1)
            u[(pl * w + x) * h + y] = e;
          else
            u[(pl * h + y) * 2 * w + 2 * x] = e;
        }
    if (layout == 1) return tensor<T>(u, {n, c, w, h}).transpose(2, 3);
    return tensor<T>(u, {n, c, h, 2 * w}).slice(3, 0, std::nullopt, 2);
  };
  const int64_t oh = pool_len(h, g.k0, g.s0, g.p0, g.d0, g.ceil);
  const int64_t ow = pool_len(w, g.k1, g.s1, g.p1, g.d1, g.ceil);
  const std::vector<T> xm = pool_input<T>(n * c * h * w, true);
  const Tensor x = make(xm);
  auto pool = [&] {
    return max_pool2d_with_indices(x, {g.k0, g.k1}, {g.s0, g.s1}, {g.p0, g.p1}, {g.d0, g.d1},
                                   g.ceil);
  };
  if (oh < 1 || ow < 1) {
    CHECK_THROWS_AS(pool(), ValueError);
    return;
  }
  Tensor mx, idx;
  std::tie(mx, idx) = pool();
  REQUIRE(mx.shape() == Shape{n, c, oh, ow});
  const PoolRef<T> ref = ref_pool_windows(xm, n * c, h, w, g, true, false, 0);
  const std::vector<T> got = mx.to_vector<T>();
  const std::vector<T> plain =
      max_pool2d(x, {g.k0, g.k1}, {g.s0, g.s1}, {g.p0, g.p1}, {g.d0, g.d1}, g.ceil).to_vector<T>();
  const std::vector<int64_t> got_idx = idx.to_vector<int64_t>();
  int64_t bad = 0;
  for (size_t k = 0; k < ref.out.size(); ++k)
    bad += !same_bits(got[k], ref.out[k]) || !same_bits(plain[k], ref.out[k]) ||
           (ref.idx[k] >= 0 && got_idx[k] != ref.idx[k]);
  CHECK(bad == 0);
  if (g.d0 != 1 || g.d1 != 1) return;  // avg_pool2d has no dilation
  const std::vector<T> xa = pool_input<T>(n * c * h * w, false);
  const Tensor y = make(xa);
  for (bool include_pad : {false, true})
    for (int64_t divisor : {0, 3}) {
      CAPTURE(include_pad);
      CAPTURE(divisor);
      const std::vector<T> avg =
          avg_pool2d(y, {g.k0, g.k1}, {g.s0, g.s1}, {g.p0, g.p1}, g.ceil, include_pad,
                     divisor == 0 ? std::nullopt : std::optional<int64_t>(divisor))
              .to_vector<T>();
      const PoolRef<T> aref = ref_pool_windows(xa, n * c, h, w, g, false, include_pad, divisor);
      REQUIRE(avg.size() == aref.out.size());
      int64_t wrong = 0;
      for (size_t k = 0; k < avg.size(); ++k) wrong += !same_bits(avg[k], aref.out[k]);
      CHECK(wrong == 0);
    }
}

}  // namespace

TEST_CASE("conv2d: hand values") {
  // 3x3 ones with a 2x2 ones kernel: each output sums 4 ones.
  Tensor y = conv2d(ones({1, 1, 3, 3}), ones({1, 1, 2, 2}));
  CHECK(y.shape() == Shape{1, 1, 2, 2});
  CHECK(y.to_vector<float>() == std::vector<float>(4, 4.f));
  // Padding 1: the corners see 1 one, the edges 2, the centre 4.
  Tensor p = conv2d(ones({1, 1, 2, 2}), ones({1, 1, 2, 2}), tensor({0.5f}), {1, 1}, {1, 1});
  CHECK(p.to_vector<float>() ==
        std::vector<float>{1.5f, 2.5f, 1.5f, 2.5f, 4.5f, 2.5f, 1.5f, 2.5f, 1.5f});
  // Unbatched [C, H, W] input gives [O, OH, OW].
  Tensor u = conv2d(ones({1, 3, 3}), ones({2, 1, 2, 2}));
  CHECK(u.shape() == Shape{2, 2, 2});
}

TEST_CASE("conv2d against a direct convolution loop") {
  struct Case {
    int64_t n, c, h, w, o, kh, kw, s0, s1, p0, p1, d0, d1, g;
    bool bias;
  };
  const Case cases[] = {
      {2, 3, 7, 6, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1, true},    // plain
      {1, 2, 8, 9, 3, 3, 2, 2, 3, 1, 1, 1, 1, 1, false},   // stride, padding
      {2, 2, 9, 9, 2, 3, 3, 1, 2, 2, 1, 2, 3, 1, true},    // dilation
      {2, 4, 6, 5, 6, 3, 1, 1, 1, 1, 0, 1, 1, 2, true},    // groups
      {1, 6, 5, 5, 6, 2, 2, 2, 1, 1, 1, 2, 1, 6, true},    // depthwise, mixed
      {3, 4, 4, 4, 8, 1, 1, 1, 1, 0, 0, 1, 1, 4, false},   // 1x1 grouped
      {2, 3, 9, 40, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, true},   // stride 2, rows of 20 outputs
      {1, 2, 7, 37, 3, 3, 2, 3, 2, 0, 1, 2, 1, 1, false},  // stride (3, 2), row dilation
      {2, 2, 6, 5, 2, 2, 3, 2, 2, 1, 2, 1, 2, 1, true},    // stride 2, more padding than input
      {1, 1, 4, 34, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, true},   // stride 2, rows of 16 + 1
      {1, 2, 5, 3, 2, 3, 3, 2, 2, 0, 0, 1, 1, 1, false},   // stride 2, rows of 1
      {1, 1, 3, 19, 1, 3, 3, 1, 1, 0, 0, 1, 1, 1, false},  // stride 1, rows of 16 + 1
      // output planes of 64 or more: the register-blocked kernel writes them in place
      {2, 3, 9, 11, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},    // 7 channels, planes of 99
      {2, 4, 10, 10, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, false},  // groups, planes of 100
      {1, 2, 1, 130, 5, 1, 5, 1, 1, 0, 2, 1, 1, 1, true},   // a unit height (conv1d)
  };
  for (DType dt : {kFloat32, kFloat64}) {
    for (const Case& k : cases) {
      Tensor x = seq({k.n, k.c, k.h, k.w}, dt, 0.31);
      Tensor w = seq({k.o, k.c / k.g, k.kh, k.kw}, dt, 0.57);
      Tensor b = k.bias ? seq({k.o}, dt, 1.1) : Tensor();
      Tensor y = conv2d(x, w, b, {k.s0, k.s1}, {k.p0, k.p1}, {k.d0, k.d1}, k.g);
      int64_t oh = 0, ow = 0;
      auto ref = ref_conv(x.to_vector<double>(), w.to_vector<double>(),
                          k.bias ? b.to_vector<double>() : std::vector<double>{}, k.n, k.c, k.h,
                          k.w, k.o, k.kh, k.kw, k.s0, k.s1, k.p0, k.p1, k.d0, k.d1, k.g, oh, ow);
      CHECK(y.shape() == Shape{k.n, k.o, oh, ow});
      CHECK(y.dtype() == dt);
      check_close(y, ref, dt == kFloat32 ? 1e-4 : 1e-12);
    }
  }
}

TEST_CASE("conv2d's register-blocked path gathers every geometry's receptive fields") {
  // Float32 output planes of 64 or more pixels with small filters: the kernel reads each panel
  // of 16 or 32 output pixels from x itself (no padding, stride 1, rows of unit stride) or from
  // a zero-padded copy split into phases by the stride, in place when each of the panel's two
  // vectors lies within one output row and copied a run at a time otherwise. So panels that
  // span output rows, rows of a multiple of the vector (8 or 16) and not, windows in the padding
  // on either side, strides 1-3 mixed with dilations (taps in every phase), depths past one
  // panel's (128 rows), strided inputs and a last panel not full all meet it.
  struct Case {
    int64_t n, c, h, w, o, kh, kw, s0, s1, p0, p1, d0, d1, g;
    bool channels_last;
  };
  const Case cases[] = {
      {2, 3, 12, 80, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},   // rows of 80: in place and not
      {1, 2, 4, 70, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},    // rows of 70: panels span rows
      {1, 2, 3, 64, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},    // rows of 64: whole panels
      {1, 2, 10, 70, 3, 3, 3, 2, 1, 2, 3, 2, 3, 1, false},   // dilation, padding past the taps
      {1, 20, 3, 66, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},   // depth 180: two k-blocks of panels
      {1, 15, 1, 100, 4, 1, 9, 1, 1, 0, 4, 1, 1, 1, false},  // depth 135, a unit height
      {2, 8, 3, 65, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4, false},    // groups
      {1, 3, 3, 67, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},     // channels-last input (strided rows)
      {1, 4, 9, 70, 4, 3, 3, 2, 1, 0, 1, 1, 1, 1, true},     // channels-last, stride 2 down
      {1, 1, 1, 64, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, false},    // 1x1
      {1, 1, 2, 64, 1, 8, 8, 1, 1, 4, 4, 1, 1, 1, false},    // windows mostly in the padding
      {2, 3, 12, 9, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},    // rows of 9
      {1, 2, 16, 33, 3, 3, 5, 2, 2, 1, 2, 1, 1, 1, false},   // stride 2, rows of 17
      {2, 20, 9, 9, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},    // depth 180
      {2, 6, 16, 16, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},   // rows of 16: two rows a panel
      {1, 4, 8, 8, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},     // rows of 8
      {1, 3, 6, 24, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},    // rows of 24
      {1, 5, 16, 16, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1, false},   // 1x1 in place, rows of 16
      {2, 4, 10, 12, 6, 3, 3, 1, 1, 0, 0, 1, 1, 2, false},   // unpadded, in x, rows of 10
      {1, 3, 32, 32, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, false},   // stride 2: four phases
      {1, 3, 31, 33, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, false},   // stride 2, odd sizes
      {1, 2, 30, 50, 3, 3, 3, 3, 2, 1, 0, 1, 2, 1, false},   // strides (3, 2), column dilation
      {1, 2, 20, 40, 3, 5, 3, 2, 1, 2, 1, 2, 1, 1, false},   // stride 2 rows, dilation 2
      {1, 2, 18, 36, 3, 2, 2, 2, 2, 0, 0, 1, 1, 1, false},   // stride 2, unpadded
      {1, 2, 17, 40, 3, 4, 4, 3, 3, 2, 2, 1, 1, 1, true},    // stride 3, channels-last
      {1, 6, 17, 17, 6, 3, 3, 1, 1, 1, 1, 1, 1, 3, false},   // last panel not full (289)
      // input rows of 9-16 and output rows of up to 8 (each input row permuted into its taps)
      {1, 3, 16, 16, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, false},  // stride 2: rows of 8 from 16
      {1, 2, 20, 15, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, false},  // rows of 8 from 15
      {1, 2, 24, 12, 3, 3, 3, 1, 3, 0, 2, 1, 1, 1, false},  // stride (1, 3): rows of 5 from 12
      {1, 2, 18, 14, 3, 3, 3, 2, 2, 2, 2, 1, 2, 1, false},  // column dilation: rows of 7
  };
  for (const Case& k : cases) {
    CAPTURE(k.c);
    CAPTURE(k.w);
    Tensor x = k.channels_last ? seq({k.n, k.h, k.w, k.c}, kFloat32, 0.31).permute({0, 3, 1, 2})
                               : seq({k.n, k.c, k.h, k.w}, kFloat32, 0.31);
    Tensor w = seq({k.o, k.c / k.g, k.kh, k.kw}, kFloat32, 0.57);
    Tensor b = seq({k.o}, kFloat32, 1.1);
    Tensor y = conv2d(x, w, b, {k.s0, k.s1}, {k.p0, k.p1}, {k.d0, k.d1}, k.g);
    int64_t oh = 0, ow = 0;
    auto ref = ref_conv(x.contiguous().to_vector<double>(), w.to_vector<double>(),
                        b.to_vector<double>(), k.n, k.c, k.h, k.w, k.o, k.kh, k.kw, k.s0, k.s1,
                        k.p0, k.p1, k.d0, k.d1, k.g, oh, ow);
    REQUIRE(oh * ow >= 64);
    REQUIRE(y.shape() == Shape{k.n, k.o, oh, ow});
    check_close(y, ref, 1e-4);
  }
  // in place from a narrowed input: rows longer than the image
  Tensor wide = seq({2, 3, 10, 100}, kFloat32, 0.31);
  Tensor x = wide.narrow(3, 7, 80);
  Tensor w = seq({4, 3, 3, 5}, kFloat32, 0.57);
  Tensor y = conv2d(x, w, Tensor(), {1, 1}, {1, 2});
  int64_t oh = 0, ow = 0;
  auto ref = ref_conv(x.contiguous().to_vector<double>(), w.to_vector<double>(), {}, 2, 3, 10, 80,
                      4, 3, 5, 1, 1, 1, 2, 1, 1, 1, oh, ow);
  REQUIRE(y.shape() == Shape{2, 4, oh, ow});
  check_close(y, ref, 1e-4);
}

// A convolution on each of conv2d's paths, for the fused variants' tests.
struct FusedCase {
  int64_t n, c, h, w, o, k, s, p, g;
  DType dt;
};
const FusedCase kFusedCases[] = {
    {2, 4, 16, 16, 6, 3, 1, 1, 1, kFloat32},    // the register-blocked path, in place
    {2, 4, 17, 17, 6, 3, 2, 1, 2, kFloat32},    // stride 2, groups, a short last panel
    {1, 3, 5, 5, 4, 3, 1, 1, 1, kFloat32},      // planes under 64 pixels: im2col and a GEMM
    {2, 4, 12, 12, 6, 3, 1, 1, 1, kFloat64},    // float64: im2col and a GEMM
    {1, 2, 9, 9, 4, 1, 1, 0, 1, kFloat32},      // 1x1, read from x
    {2, 4, 11, 11, 4, 3, 1, 1, 4, kFloat32},    // depthwise: the direct kernel
    {2, 4, 12, 12, 8, 3, 2, 1, 4, kFloat32},    // depthwise, multiplier 2, stride 2
    {1, 64, 16, 16, 64, 3, 1, 1, 1, kFloat32},  // Winograd at every level
};

// The case's input (a NaN in it, which the fused passes must keep), filters and bias.
std::tuple<Tensor, Tensor, Tensor> fused_operands(const FusedCase& k) {
  Tensor x = seq({k.n, k.c, k.h, k.w}, k.dt, 0.31);
  std::vector<double> xv = x.to_vector<double>();
  xv[5] = std::numeric_limits<double>::quiet_NaN();
  return {tensor<double>(xv, x.shape()).to(k.dt),
          sub(seq({k.o, k.c / k.g, k.k, k.k}, k.dt, 0.57), 0.2), sub(seq({k.o}, k.dt, 1.1), 0.3)};
}

TEST_CASE("conv2d_relu is relu(conv2d) bit for bit, on every path and under vmap") {
  for (const FusedCase& k : kFusedCases) {
    CAPTURE(k.c);
    CAPTURE(k.h);
    CAPTURE(k.dt);
    const auto [x, w, b] = fused_operands(k);
    Tensor fused = conv2d_relu(x, w, b, k.s, k.p, 1, k.g);
    Tensor ref = relu(conv2d(x, w, b, k.s, k.p, 1, k.g));
    REQUIRE(fused.shape() == ref.shape());
    const std::vector<double> fv = fused.to_vector<double>(), rv = ref.to_vector<double>();
    int64_t negative = 0, nan = 0, zero = 0;
    for (size_t i = 0; i < fv.size(); ++i) {
      negative += fv[i] < 0;
      nan += std::isnan(fv[i]);
      zero += fv[i] == 0;
    }
    CHECK(negative == 0);
    CHECK(nan > 0);
    CHECK(zero > 0);  // the ReLU had something to do
    CHECK(tensor_bits_equal(fused, ref));
    CHECK(tensor_bits_equal(conv2d_relu(x[0], w, b, k.s, k.p, 1, k.g), ref[0]));

    // under vmap: per-set filters over the shared input, a per-set input, a per-set bias alone
    const int64_t sets = 3;
    Tensor ws = stack({w, mul(w, -1.0), add(w, 0.1)});
    Tensor bs = stack({b, mul(b, -1.0), add(b, 0.2)});
    Tensor xs = stack({x, mul(x, 0.5), sub(x, 0.1)});
    auto f = [&](Tensor xi, Tensor wi, Tensor bi) {
      return conv2d_relu(xi, wi, bi, k.s, k.p, 1, k.g);
    };
    auto loop = [&](auto pick_x, auto pick_w, auto pick_b) {
      std::vector<Tensor> outs;
      for (int64_t i = 0; i < sets; ++i)
        outs.push_back(relu(conv2d(pick_x(i), pick_w(i), pick_b(i), k.s, k.p, 1, k.g)));
      return stack(outs);
    };
    auto shared = [](const Tensor& t) { return [t](int64_t) { return t; }; };
    auto per_set = [](const Tensor& t) { return [t](int64_t i) { return t[i]; }; };
    CHECK(tensor_bits_equal(vmap(f, {.in_dims = {std::nullopt, 0, 0}})(x, ws, bs),
                            loop(shared(x), per_set(ws), per_set(bs))));
    CHECK(tensor_bits_equal(vmap(f, {.in_dims = {0, std::nullopt, std::nullopt}})(xs, w, b),
                            loop(per_set(xs), shared(w), shared(b))));
    CHECK(tensor_bits_equal(vmap(f, {.in_dims = {0, 0, 0}})(xs, ws, bs),
                            loop(per_set(xs), per_set(ws), per_set(bs))));
    CHECK(tensor_bits_equal(vmap(f, {.in_dims = {std::nullopt, std::nullopt, 0}})(x, w, bs),
                            loop(shared(x), shared(w), per_set(bs))));
    CHECK(tensor_bits_equal(vmap(f, {.in_dims = {0, std::nullopt, 0}})(xs, w, bs),
                            loop(per_set(xs), shared(w), per_set(bs))));
  }
}

// The folded BatchNorm applies batch_norm's own factors and pass, so the bits are those of the two
// ops on every path (the register-blocked kernel applies it per plane as it writes, the others
// after), and under vmap whichever of x, the filters and the BatchNorm's tensors are per set.
TEST_CASE("conv2d_batch_norm is batch_norm(conv2d) bit for bit, on every path and under vmap") {
  const double eps = 1e-3;
  for (const FusedCase& k : kFusedCases) {
    CAPTURE(k.c);
    CAPTURE(k.h);
    CAPTURE(k.dt);
    const auto [x, w, b] = fused_operands(k);
    Tensor rm = sub(seq({k.o}, k.dt, 0.7), 0.4), rv = add(seq({k.o}, k.dt, 0.9), 0.2);
    Tensor bw = sub(seq({k.o}, k.dt, 1.3), 0.5), bb = sub(seq({k.o}, k.dt, 0.4), 0.1);
    auto unfused = [&](const Tensor& xi, const Tensor& wi, const Tensor& bi, const Tensor& mi,
                       const Tensor& vi, const Tensor& gi, const Tensor& ci, bool relu) {
      Tensor y = batch_norm(conv2d(xi, wi, bi, k.s, k.p, 1, k.g), mi, vi, gi, ci, false, 0.1, eps);
      return relu ? td::relu(y) : y;
    };
    for (bool relu : {false, true}) {
      CAPTURE(relu);
      Tensor fused = conv2d_batch_norm(x, w, b, k.s, k.p, 1, k.g, rm, rv, bw, bb, eps, relu);
      Tensor ref = unfused(x, w, b, rm, rv, bw, bb, relu);
      CHECK(tensor_bits_equal(fused, ref));
      // the BatchNorm did something: its output is not the convolution's
      CHECK_FALSE(allclose(ref, conv2d(x, w, b, k.s, k.p, 1, k.g), 1e-3, 1e-3));
      CHECK(tensor_bits_equal(conv2d_batch_norm(x, w, Tensor(), k.s, k.p, 1, k.g, rm, rv, Tensor(),
                                                Tensor(), eps, relu),
                              unfused(x, w, Tensor(), rm, rv, Tensor(), Tensor(), relu)));
      CHECK(tensor_bits_equal(
          conv2d_batch_norm(x[0], w, b, k.s, k.p, 1, k.g, rm, rv, bw, bb, eps, relu),
          unfused(x, w, b, rm, rv, bw, bb, relu)[0]));
    }

    // under vmap, the BatchNorm's tensors per set with the filters, or alone
    const int64_t sets = 3;
    auto three = [](const Tensor& t, double a) { return stack({t, mul(t, a), add(t, 0.1)}); };
    Tensor ws = three(w, -1.0), bs = three(b, -1.0), xs = three(x, 0.5);
    Tensor rms = three(rm, 2.0), rvs = three(rv, 3.0), bws = three(bw, -1.0), bbs = three(bb, 2.0);
    auto f = [&](Tensor xi, Tensor wi, Tensor bi, Tensor mi, Tensor vi, Tensor gi, Tensor ci) {
      return conv2d_batch_norm(xi, wi, bi, k.s, k.p, 1, k.g, mi, vi, gi, ci, eps, true);
    };
    auto check_vmap = [&](std::vector<std::optional<int64_t>> dims, std::vector<Tensor> args) {
      const Tensor got =
          vmap(f, {.in_dims = dims})(args[0], args[1], args[2], args[3], args[4], args[5], args[6]);
      std::vector<Tensor> outs;
      for (int64_t i = 0; i < sets; ++i) {
        std::vector<Tensor> a;
        for (size_t j = 0; j < args.size(); ++j) a.push_back(dims[j] ? args[j][i] : args[j]);
        outs.push_back(unfused(a[0], a[1], a[2], a[3], a[4], a[5], a[6], true));
      }
      CHECK(tensor_bits_equal(got, stack(outs)));
    };
    const std::optional<int64_t> s0 = 0, no = std::nullopt;
    check_vmap({no, s0, s0, s0, s0, s0, s0}, {x, ws, bs, rms, rvs, bws, bbs});
    check_vmap({s0, no, no, no, no, no, no}, {xs, w, b, rm, rv, bw, bb});
    check_vmap({s0, s0, s0, s0, s0, s0, s0}, {xs, ws, bs, rms, rvs, bws, bbs});
    check_vmap({no, no, no, s0, s0, no, s0}, {x, w, b, rms, rvs, bw, bbs});
    check_vmap({s0, no, s0, no, s0, s0, no}, {xs, w, bs, rm, rvs, bws, bb});
  }
  // a BatchNorm of other channels than the output's is refused, naming it and the shapes
  Tensor x = seq({1, 2, 8, 8}, kFloat32, 0.3), w = seq({4, 2, 3, 3}, kFloat32, 0.5);
  Tensor four = ones({4}), five = ones({5});
  CHECK_THROWS_WITH_AS(
      conv2d_batch_norm(x, w, Tensor(), 1, 1, 1, 1, five, four, Tensor(), Tensor(), 1e-5),
      doctest::Contains("running_mean of shape [5] does not match the output's "
                        "4 channels"),
      ValueError);
  CHECK_THROWS_WITH_AS(
      conv2d_batch_norm(x, w, Tensor(), 1, 1, 1, 1, four, four, ones({4, 1}), Tensor(), 1e-5),
      doctest::Contains("batch_norm weight"), ValueError);
  CHECK_THROWS_WITH_AS(
      conv2d_batch_norm(x, w, Tensor(), 1, 1, 1, 1, four, Tensor(), Tensor(), Tensor(), 1e-5),
      doctest::Contains("running_var"), ValueError);
  auto g = [&](const Tensor& ws, const Tensor& m) {
    return conv2d_batch_norm(x, ws, Tensor(), 1, 1, 1, 1, m, four, Tensor(), Tensor(), 1e-5);
  };
  CHECK_THROWS_WITH_AS(vmap(g, {.in_dims = {0, 0}})(stack({w, w}), ones({2, 5})),
                       doctest::Contains("per-set shape [5]"), ValueError);
}

TEST_CASE("conv2d with groups whose columns fill the cache runs them in blocks, same values") {
  // 5 groups of 2 channels, 3x3, on [2, 10, 60, 60]: each group's columns are 18 x 7200 floats
  // (518 KB), so the kernel makes them two groups at a time (blocks of 2, 2, 1)
  Tensor x = seq({2, 10, 60, 60}, kFloat32, 0.31);
  Tensor w = seq({15, 2, 3, 3}, kFloat32, 0.57), b = seq({15}, kFloat32, 1.1);
  Tensor y = conv2d(x, w, b, {1, 1}, {1, 1}, {1, 1}, 5);
  int64_t oh = 0, ow = 0;
  auto ref = ref_conv(x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>(), 2, 10,
                      60, 60, 15, 3, 3, 1, 1, 1, 1, 1, 1, 5, oh, ow);
  REQUIRE(y.shape() == Shape{2, 15, oh, ow});
  check_close(y, ref, 1e-4);
}

TEST_CASE("conv2d gives the same bits on one thread and on two") {
  // enough work per call that two threads share its output planes
  Tensor x = seq({8, 16, 16, 16}, kFloat32, 0.31);
  Tensor w = seq({32, 16, 3, 3}, kFloat32, 0.57), b = seq({32}, kFloat32, 1.1);
  const int before = configured_threads();
  set_num_threads(1);
  Tensor one = conv2d(x, w, b, {1, 1}, {1, 1});
  set_num_threads(2);
  Tensor two = conv2d(x, w, b, {1, 1}, {1, 1});
  set_num_threads(before);
  CHECK(one.to_vector<float>() == two.to_vector<float>());
  int64_t oh = 0, ow = 0;
  auto ref = ref_conv(x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>(), 8, 16,
                      16, 16, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, oh, ow);
  check_close(two, ref, 1e-4);
}

TEST_CASE("conv2d with non-contiguous inputs, single-value params and empty batch") {
  Tensor x = seq({2, 6, 5, 3}).permute({0, 3, 1, 2});           // [2, 3, 6, 5] channels-last
  Tensor w = seq({3, 3, 2, 4}, kFloat64, 0.8).transpose(2, 3);  // [3, 3, 4, 2]
  Tensor b = seq({6}).slice(0, 0, std::nullopt, 2);
  Tensor y = conv2d(x, w, b, {2}, {1}, {1}, 1);
  int64_t oh = 0, ow = 0;
  auto ref = ref_conv(x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>(), 2, 3, 6,
                      5, 3, 4, 2, 2, 2, 1, 1, 1, 1, 1, oh, ow);
  CHECK(y.shape() == Shape{2, 3, oh, ow});
  check_close(y, ref, 1e-12);
  Tensor e = conv2d(ones({0, 1, 3, 3}), ones({2, 1, 3, 3}));
  CHECK(e.shape() == Shape{0, 2, 1, 1});
}

TEST_CASE("conv2d with an expanded weight (stride 0) against the loop") {
  // A one-row weight matrix with stride 0 reached BLAS's gemv as a vector with increment 0,
  // which it refused ("parameter number 8 had an illegal value"), leaving the output zeros.
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = seq({2, 1, 1, 5}, dt, 0.31);
    Tensor w = full({1, 1, 1, 1}, 0.5, dt).expand({1, 1, 1, 2});
    Tensor y = conv2d(x, w, {}, {2}, {1, 0}, {1});
    int64_t oh = 0, ow = 0;
    auto ref = ref_conv(x.to_vector<double>(), w.to_vector<double>(), {}, 2, 1, 1, 5, 1, 1, 2, 2, 2,
                        1, 0, 1, 1, 1, oh, ow);
    CHECK(y.shape() == Shape{2, 1, oh, ow});
    check_close(y, ref, dt == kFloat32 ? 1e-5 : 1e-12);
    // every output channel from one expanded filter
    Tensor w3 = seq({1, 2, 2, 1}, dt, 0.7).expand({3, 2, 2, 3});
    Tensor x3 = seq({1, 2, 4, 4}, dt, 0.2);
    Tensor y3 = conv2d(x3, w3);
    auto ref3 = ref_conv(x3.to_vector<double>(), w3.to_vector<double>(), {}, 1, 2, 4, 4, 3, 2, 3, 1,
                         1, 0, 0, 1, 1, 1, oh, ow);
    check_close(y3, ref3, dt == kFloat32 ? 1e-4 : 1e-12);
  }
}

TEST_CASE("conv2d errors") {
  check_throws_mentioning<ValueError>(
      [] {
        conv2d(ones({1, 1, 2, 2}), ones({1, 1, 3, 3}));
      },
      "[conv2d]");
  check_throws_mentioning<ValueError>(
      [] {
        conv2d(ones({1, 3, 4, 4}), ones({2, 2, 1, 1}));
      },
      "[1, 3, 4, 4]");
  CHECK_THROWS_AS(conv2d(ones({1, 4, 4, 4}), ones({3, 2, 1, 1}), {}, {1}, {0}, {1}, 2),
                  ValueError);  // out channels not divisible by groups
  CHECK_THROWS_AS(conv2d(ones({1, 4, 4, 4}), ones({4, 4, 1, 1}), {}, {1}, {0}, {1}, 0), ValueError);
  CHECK_THROWS_AS(conv2d(ones({4, 4}), ones({1, 1, 1, 1})), ValueError);
  CHECK_THROWS_AS(conv2d(ones({1, 1, 4, 4}), ones({1, 1, 1})), ValueError);
  CHECK_THROWS_AS(conv2d(ones({1, 1, 4, 4}), ones({1, 1, 1, 1}), {}, {0, 1}), ValueError);
  CHECK_THROWS_AS(conv2d(ones({1, 1, 4, 4}), ones({1, 1, 1, 1}), {}, {1}, {-1}), ValueError);
  CHECK_THROWS_AS(conv2d(ones({1, 1, 4, 4}), ones({1, 1, 1, 1}), {}, {1}, {0}, {0}), ValueError);
  CHECK_THROWS_AS(conv2d(ones({1, 1, 4, 4}), ones({1, 1, 1, 1}), {}, {1, 1, 1}), ValueError);
  CHECK_THROWS_AS(conv2d(ones({1, 1, 4, 4}), ones({1, 1, 1, 1}), ones({2})), ValueError);
  check_throws_mentioning<TypeError>(
      [] {
        conv2d(ones({1, 1, 4, 4}, kInt64), ones({1, 1, 1, 1}, kInt64));
      },
      "[conv2d]");
  CHECK_THROWS_AS(conv2d(ones({1, 1, 4, 4}), ones({1, 1, 1, 1}, kFloat64)), TypeError);
  // an empty list is not the default (torch: "expected stride to be a single integer value or a
  // list of 2 values")
  check_throws_mentioning<ValueError>(
      [] {
        conv2d(ones({1, 1, 4, 4}), ones({1, 1, 2, 2}), {}, IntList{});
      },
      "[conv2d] stride must have 1 or 2 values, got []");
  check_throws_mentioning<ValueError>(
      [] {
        conv2d(ones({1, 1, 4, 4}), ones({1, 1, 2, 2}), {}, 1, IntList{});
      },
      "[conv2d] padding must have 1 or 2 values");
  check_throws_mentioning<ValueError>(
      [] {
        conv2d(ones({1, 1, 4, 4}), ones({1, 1, 2, 2}), {}, 1, 0, IntList{});
      },
      "[conv2d] dilation must have 1 or 2 values");
}

TEST_CASE("max_pool2d and avg_pool2d: hand values") {
  Tensor x = tensor({1.f, 2.f, 3.f, 4.f}, {1, 1, 2, 2});
  CHECK(max_pool2d(x, {2}).to_vector<float>() == std::vector<float>{4.f});
  CHECK(avg_pool2d(x, {2}).to_vector<float>() == std::vector<float>{2.5f});
  CHECK(avg_pool2d(x, {2}, {}, {0, 0}, false, true, 3).item<float>() == doctest::Approx(10.0 / 3));
  // Padding 1, stride 1, 2x2 kernel on 2x2: count_include_pad divides by 4.
  Tensor a = avg_pool2d(x, {2, 2}, {1, 1}, {1, 1});
  CHECK(a.shape() == Shape{1, 1, 3, 3});
  CHECK(a.to_vector<float>() ==
        std::vector<float>{0.25f, 0.75f, 0.5f, 1.f, 2.5f, 1.5f, 0.75f, 1.75f, 1.f});
  Tensor m = max_pool2d(tensor({-1.f, -2.f, -3.f, -4.f}, {1, 2, 2}), {2, 2}, {1, 1}, {1, 1});
  CHECK(m.shape() == Shape{1, 3, 3});  // unbatched input; padding never wins over negatives
  CHECK(m.to_vector<float>() ==
        std::vector<float>{-1.f, -1.f, -2.f, -1.f, -1.f, -2.f, -3.f, -3.f, -4.f});
}

TEST_CASE("pooling against a direct loop") {
  struct Case {
    int64_t n, c, h, w, k0, k1, s0, s1, p0, p1, d0, d1;
  };
  const Case cases[] = {
      {2, 3, 6, 6, 2, 2, 2, 2, 0, 0, 1, 1},  {1, 2, 7, 5, 3, 2, 2, 1, 1, 1, 1, 1},
      {2, 1, 9, 8, 3, 3, 1, 2, 1, 0, 2, 3},  {1, 1, 5, 5, 5, 5, 1, 1, 2, 2, 1, 1},
      {2, 2, 9, 10, 3, 3, 3, 3, 0, 0, 1, 1},  // windows that tile, a column left over
      {1, 3, 8, 6, 2, 2, 2, 2, 0, 0, 1, 1},
  };
  for (DType dt : {kFloat32, kFloat64}) {
    for (const Case& k : cases) {
      Tensor x = seq({k.n, k.c, k.h, k.w}, dt, 0.43);
      Tensor mx = max_pool2d(x, {k.k0, k.k1}, {k.s0, k.s1}, {k.p0, k.p1}, {k.d0, k.d1});
      auto xv = x.to_vector<double>();
      auto ref_max =
          ref_pool(xv, k.n * k.c, k.h, k.w, k.k0, k.k1, k.s0, k.s1, k.p0, k.p1, k.d0, k.d1, true);
      check_close(mx, ref_max, 1e-6);
      CHECK(mx.dtype() == dt);
      if (k.d0 == 1 && k.d1 == 1) {
        Tensor av = avg_pool2d(x, {k.k0, k.k1}, {k.s0, k.s1}, {k.p0, k.p1});
        auto ref_avg =
            ref_pool(xv, k.n * k.c, k.h, k.w, k.k0, k.k1, k.s0, k.s1, k.p0, k.p1, 1, 1, false);
        check_close(av, ref_avg, dt == kFloat32 ? 1e-5 : 1e-12);
      }
    }
  }
  // Stride defaults to the kernel; a non-contiguous input gives the same as its copy.
  Tensor xt = seq({1, 2, 6, 4}).transpose(2, 3);
  check_close(max_pool2d(xt, {2}), max_pool2d(xt.contiguous(), {2}, {2}).to_vector<double>(),
              1e-12);
  check_close(avg_pool2d(xt, {3, 2}), avg_pool2d(xt.contiguous(), {3, 2}).to_vector<double>(),
              1e-12);
  CHECK(max_pool2d(ones({0, 2, 4, 4}), {2}).shape() == Shape{0, 2, 2, 2});
  // NaN propagates through max.
  Tensor nanx = tensor({1.f, std::nanf(""), 3.f, 4.f}, {1, 1, 2, 2});
  CHECK(std::isnan(max_pool2d(nanx, {2}).item<float>()));
}

TEST_CASE("max_pool2d: a NaN wins its windows and -inf windows stay -inf, on every path") {
  // Rows of 40 reach the vector loops (stride 1 and 2) and their scalar tails; the transposed
  // input the strided one; checked window by window against a loop that looks for the NaN.
  const int64_t h = 6, w = 40;
  std::vector<float> v(h * w);
  for (int64_t i = 0; i < h * w; ++i) v[i] = static_cast<float>((i * 37) % 101) - 50.f;
  for (int64_t i : {3, 45, 46, 90, 133, 200, 239}) v[i] = std::nanf("");
  for (int64_t i = 160; i < 200; ++i) v[i] = -std::numeric_limits<float>::infinity();
  struct Case {
    int64_t k, s, p;
  };
  for (bool transposed : {false, true})
    for (Case c : {Case{2, 2, 0}, Case{3, 3, 0}, Case{3, 1, 1}, Case{3, 2, 1}, Case{1, 1, 0}}) {
      CAPTURE(transposed);
      CAPTURE(c.k);
      CAPTURE(c.s);
      Tensor x = tensor(v, {1, 1, h, w});
      const int64_t H = transposed ? w : h, W = transposed ? h : w;
      auto at = [&](int64_t iy, int64_t ix) {
        return transposed ? v[ix * w + iy] : v[iy * w + ix];
      };
      if (transposed) x = x.transpose(2, 3);
      auto [out, idx] = max_pool2d_with_indices(x, {c.k}, {c.s}, {c.p});
      Tensor plain = max_pool2d(x, {c.k}, {c.s}, {c.p});
      const int64_t oh = out.size(2), ow = out.size(3);
      REQUIRE(oh == (H + 2 * c.p - c.k) / c.s + 1);
      REQUIRE(ow == (W + 2 * c.p - c.k) / c.s + 1);
      auto o = out.to_vector<float>(), pl = plain.to_vector<float>();
      auto ix = idx.to_vector<int64_t>();
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          bool any_nan = false;
          float mx = -std::numeric_limits<float>::infinity();
          for (int64_t i = 0; i < c.k; ++i)
            for (int64_t j = 0; j < c.k; ++j) {
              const int64_t iy = oy * c.s - c.p + i, jx = ox * c.s - c.p + j;
              if (iy < 0 || iy >= H || jx < 0 || jx >= W) continue;
              any_nan |= std::isnan(at(iy, jx));
              if (!std::isnan(at(iy, jx))) mx = std::max(mx, at(iy, jx));
            }
          const int64_t k = oy * ow + ox;
          CAPTURE(k);
          if (any_nan) {
            CHECK(std::isnan(o[k]));
            CHECK(std::isnan(pl[k]));
            CHECK(std::isnan(at(ix[k] / W, ix[k] % W)));
          } else {
            CHECK(o[k] == mx);
            CHECK(pl[k] == mx);
            CHECK(at(ix[k] / W, ix[k] % W) == mx);
          }
        }
    }
}

TEST_CASE("pooling on many geometries against a window-at-a-time loop, bit for bit") {
  // Rows of 5 to 37 outputs reach the vectors of 8 outputs, whole and overlapping at the row's
  // end, and rows shorter than a vector; ties, signed zeros, NaN payloads and -inf runs check
  // the max's rule and indices, sums of far-apart magnitudes the avg's tap order.
  struct Size {
    int64_t h, w;
    int layout;
  };
  const Size sizes[] = {{7, 5, 0}, {5, 13, 1}, {6, 21, 2}, {3, 37, 0}};
  int64_t cases = 0;
  for (const Size& sz : sizes)
    for (int64_t k0 = 1; k0 <= 5; ++k0)
      for (int64_t k1 = 1; k1 <= 5; ++k1)
        for (auto [s0, s1] : {std::pair{1, 1}, {2, 2}, {3, 3}, {1, 2}, {2, 1}, {3, 1}})
          for (auto [p0, p1] : {std::pair{0, 0}, {k0 / 2, k1 / 2}, {k0 / 2, 0}, {0, k1 / 2}})
            for (int64_t d = 1; d <= 2; ++d)
              for (bool ceil : {false, true}) {
                if ((p0 == 0 && p1 == 0 && (k0 > 1 || k1 > 1) && d == 2 && ceil) ||
                    (p0 == k0 / 2 && p1 == k1 / 2 && (k0 < 2 || k1 < 2) && (p0 || p1)))
                  continue;  // repeats of another case
                const PoolCase g{k0, k1, s0, s1, p0, p1, d, k0 == k1 ? d : 1, ceil};
                check_pools<float>(1, 2, sz.h, sz.w, g, sz.layout);
                if ((k0 + k1 + s0) % 3 == 0) check_pools<double>(2, 1, sz.h, sz.w, g, sz.layout);
                ++cases;
              }
  CHECK(cases > 4000);
  // kernels, strides and dilations too wide for the padded rows go a window at a time
  for (const PoolCase& g :
       {PoolCase{2, 65, 1, 1, 1, 32, 1, 1, false}, PoolCase{3, 3, 2, 70, 1, 1, 1, 1, true},
        PoolCase{1, 2, 1, 1, 0, 1, 1, 65, false}}) {
    check_pools<float>(1, 2, 4, 100, g, 0);
    check_pools<double>(1, 1, 4, 100, g, 2);
  }
}

TEST_CASE("pooling errors") {
  check_throws_mentioning<ValueError>(
      [] {
        max_pool2d(ones({1, 1, 4, 4}), {2}, {}, {2});
      },
      "[max_pool2d]");
  check_throws_mentioning<ValueError>(
      [] {
        avg_pool2d(ones({1, 1, 4, 4}), {2}, {}, {2});
      },
      "[avg_pool2d]");
  CHECK_THROWS_AS(max_pool2d(ones({1, 1, 2, 2}), {3}), ValueError);
  CHECK_THROWS_AS(avg_pool2d(ones({1, 1, 2, 2}), {3}), ValueError);
  CHECK_THROWS_AS(max_pool2d(ones({2, 2}), {1}), ValueError);
  CHECK_THROWS_AS(max_pool2d(ones({1, 1, 4, 4}), {}), ValueError);
  CHECK_THROWS_AS(max_pool2d(ones({1, 1, 4, 4}), {0}), ValueError);
  CHECK_THROWS_AS(max_pool2d(ones({1, 1, 4, 4}), {2}, {0}), ValueError);
  CHECK_THROWS_AS(max_pool2d(ones({1, 1, 4, 4}), {2}, {}, {0}, {0}), ValueError);
  check_throws_mentioning<TypeError>(
      [] {
        max_pool2d(ones({1, 1, 4, 4}, kInt64), {2});
      },
      "[max_pool2d]");
  CHECK_THROWS_AS(avg_pool2d(ones({1, 1, 4, 4}, kInt64), {2}), TypeError);
}

TEST_CASE("conv and pool size parameters accept one integer for both dims") {
  // ones [1,1,4,4] * ones [1,1,3,3], stride 2, padding 1: the windows see 2x2, 2x3, 3x2, 3x3
  // valid cells
  Tensor y = conv2d(ones({1, 1, 4, 4}), ones({1, 1, 3, 3}), {}, 2, 1);
  CHECK(y.shape() == Shape{1, 1, 2, 2});
  CHECK(y.to_vector<float>() == std::vector<float>{4, 6, 6, 9});
  Tensor y2 = conv2d(ones({1, 1, 4, 4}), ones({1, 1, 3, 3}), {}, {2}, {1, 1}, 1);
  CHECK(y2.to_vector<float>() == std::vector<float>{4, 6, 6, 9});
  // dilation 2 with a 2x2 kernel spans 3x3: 4 outputs of 4 ones each on a 4x4 input
  CHECK(conv2d(ones({1, 1, 4, 4}), ones({1, 1, 2, 2}), {}, 1, 0, 2).to_vector<float>() ==
        std::vector<float>{4, 4, 4, 4});
  Tensor x = arange(16).to(kFloat32).view({1, 1, 4, 4});
  CHECK(max_pool2d(x, 2).to_vector<float>() == std::vector<float>{5, 7, 13, 15});
  CHECK(max_pool2d(x, 2, 2, 0, 1).to_vector<float>() == std::vector<float>{5, 7, 13, 15});
  CHECK(avg_pool2d(x, 2).to_vector<float>() == std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f});
  CHECK(max_pool2d(x, 3, 1).shape() == Shape{1, 1, 2, 2});
  check_throws_naming_op<ValueError>([&] { max_pool2d(x, 0); }, "max_pool2d");
}

TEST_CASE("max_pool2d and avg_pool2d ceil_mode: values from PyTorch") {
  const auto a = [](int64_t h, int64_t w) {
    return arange(h * w).to(kFloat32).reshape({1, 1, h, w});
  };
  // F.max_pool2d(arange(25.).view(1, 1, 5, 5), 2, 2, ceil_mode=True): the last row and column
  // of windows hold only the elements that exist
  Tensor y = max_pool2d(a(5, 5), 2, 2, 0, 1, true);
  CHECK(y.shape() == Shape{1, 1, 3, 3});
  CHECK(y.to_vector<float>() == std::vector<float>{6, 8, 9, 16, 18, 19, 21, 23, 24});
  CHECK(max_pool2d(a(5, 5), 2, 2).shape() == Shape{1, 1, 2, 2});  // ceil_mode defaults to false
  // F.max_pool2d(arange(36.).view(1, 1, 6, 6), 3, 2, 1, ceil_mode=True): with padding
  y = max_pool2d(a(6, 6), 3, 2, 1, 1, true);
  CHECK(y.shape() == Shape{1, 1, 4, 4});
  CHECK(y.to_vector<float>() ==
        std::vector<float>{7, 9, 11, 11, 19, 21, 23, 23, 31, 33, 35, 35, 31, 33, 35, 35});
  // F.max_pool2d(arange(64.).view(1, 1, 8, 8), 2, 2, 0, 2, ceil_mode=True): dilation 2, the
  // last window [6, 8) has one tap inside
  y = max_pool2d(a(8, 8), 2, 2, 0, 2, true);
  CHECK(y.shape() == Shape{1, 1, 4, 4});
  CHECK(y.to_vector<float>() ==
        std::vector<float>{18, 20, 22, 22, 34, 36, 38, 38, 50, 52, 54, 54, 50, 52, 54, 54});
  // F.max_pool2d(arange(30.).view(1, 1, 5, 6), (2, 3), 2, (1, 0), ceil_mode=True): along H,
  // ceil(5 / 2) + 1 = 4 windows, but the 4th would start at 6 >= 5 + 1 (right padding only), so
  // 3; along W, ceil(3 / 2) + 1 = 3 (floor mode: 2)
  y = max_pool2d(a(5, 6), {2, 3}, 2, {1, 0}, 1, true);
  CHECK(y.shape() == Shape{1, 1, 3, 3});
  CHECK(y.to_vector<float>() == std::vector<float>{2, 4, 5, 14, 16, 17, 26, 28, 29});
  CHECK(max_pool2d(a(5, 6), {2, 3}, 2, {1, 0}).shape() == Shape{1, 1, 3, 2});
  // output lengths against the formula (checked against PyTorch 1.13 for L < 12, k, s < 5,
  // p <= k/2, d < 3, all 704 cases): floor((L + 2p - d(k-1) - 1 + s - 1) / s) + 1, less one if
  // the last window starts at >= L + p; fewer than 1 is an error. A window longer than the
  // padded input (a negative room) still gives one output when it is short by less than s.
  const auto floor_div = [](int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0); };
  for (int64_t L = 1; L < 12; ++L)
    for (int64_t k = 1; k < 5; ++k)
      for (int64_t s = 1; s < 5; ++s)
        for (int64_t p = 0; p <= k / 2; ++p)
          for (int64_t d = 1; d < 3; ++d) {
            const int64_t room = L + 2 * p - d * (k - 1) - 1;
            int64_t out = floor_div(room + s - 1, s) + 1;
            if ((out - 1) * s >= L + p) --out;
            CAPTURE(L);
            CAPTURE(k);
            CAPTURE(s);
            CAPTURE(p);
            CAPTURE(d);
            auto pool = [&] {
              return max_pool2d(ones({1, L, 1}), {k, 1}, {s, 1}, {p, 0}, {d, 1}, true);
            };
            if (out < 1)
              CHECK_THROWS_AS(pool(), ValueError);
            else
              CHECK(pool().shape() == Shape{1, out, 1});
          }
  // F.max_pool2d / F.avg_pool2d with ceil_mode on inputs smaller than the kernel (torch 1.13):
  const Tensor x = a(2, 2);
  CHECK(max_pool2d(x, 3, 2, 0, 1, true).to_vector<float>() == std::vector<float>{3});
  CHECK(avg_pool2d(x, 3, 2, 0, true, false).to_vector<float>() == std::vector<float>{1.5f});
  CHECK(max_pool2d(x, 3, 2, 1, 1, true).to_vector<float>() == std::vector<float>{3, 3, 3, 3});
  CHECK(allclose(avg_pool2d(x, 3, 2, 1, true, true),
                 tensor({6 / 9.f, 4 / 6.f, 5 / 6.f, 3 / 4.f}, {1, 1, 2, 2})));
  CHECK(max_pool2d(a(3, 3), 2, 3, 0, 3, true).to_vector<float>() == std::vector<float>{0});
  // without ceil_mode, or short by s or more, it is too small, naming the dilation too
  check_throws_mentioning<ValueError>(
      [&] { max_pool2d(x, 3, 2, 0, 1, false); },
      "is too small for kernel [3] with padding 0x0 and dilation 1x1");
  check_throws_mentioning<ValueError>([&] { max_pool2d(x, 4, 1, 0, 1, true); }, "(ceil_mode)");
  check_throws_mentioning<ValueError>([&] { max_pool2d(a(4, 4), 2, 1, 0, 5, false); },
                                      "and dilation 5x5");
  // the existing checks still hold: padding at most half the kernel
  check_throws_naming_op<ValueError>([&] { max_pool2d(a(5, 5), 2, 2, 2, 1, true); }, "max_pool2d");
}

TEST_CASE("conv2d and pools: empty kernels and overflowing geometry are errors") {
  const int64_t big = int64_t{1} << 62, huge = int64_t{1} << 40;
  check_throws_mentioning<ValueError>(
      [] {
        conv2d(ones({1, 1, 3, 3}), ones({1, 1, 0, 0}), ones({1}));
      },
      "[conv2d] kernel size");
  check_throws_naming_op<ValueError>(
      [&] {
        conv2d(ones({1, 1, 3, 3}), ones({1, 1, 1, 1}), {}, 1, big);
      },
      "conv2d");
  check_throws_naming_op<ValueError>(
      [&] {
        max_pool2d(ones({1, 1, 4, 4}), 3, {}, 0, big);
      },
      "max_pool2d");
  // a kernel of 2^40 x 2^40 padded by 2^39: only the input's taps are visited; avg divides by
  // the whole window (count_include_pad), 4 / 2^80
  CHECK(max_pool2d(ones({1, 1, 2, 2}), huge, 1, huge / 2).to_vector<float>() ==
        std::vector<float>(9, 1.0f));
  const Tensor avg = avg_pool2d(ones({1, 1, 2, 2}, kFloat64), huge, 1, huge / 2);
  CHECK(avg.shape() == Shape{1, 1, 3, 3});
  CHECK(avg.to_vector<double>()[4] == std::ldexp(1.0, -78));
  // windows that start in the padding see the same taps as before (values from PyTorch)
  const Tensor x = arange(36).to(kFloat32).reshape({1, 1, 6, 6});
  CHECK(max_pool2d(x, 3, 1, 1, 2).to_vector<float>() ==
        std::vector<float>{21, 22, 23, 22, 27, 28, 29, 28, 33, 34, 35, 34, 27, 28, 29, 28});
  CHECK(allclose(
      avg_pool2d(x, 3, 2, 1),
      tensor(std::vector<float>{14 / 9.f, 30 / 9.f, 42 / 9.f, 75 / 9.f, 14, 16, 147 / 9.f, 26, 28},
             {1, 1, 3, 3})));
}
