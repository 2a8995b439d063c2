// max_pool2d's and avg_pool2d's loops over [N, C, H, W] planes, a window per output: the windows
// that tile the input (2x2 and 3x3, stride = kernel) in one pass, any other geometry vectors of
// outputs along a row from the plane's rows padded on both sides (Pooler below).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#ifdef __AVX__
#include <immintrin.h>
#endif

#include "engine/kernels/kernels.h"

// The rows are short (a pool's output row): with AVX-512's 16 floats a row of 15 ran its
// scalar tail only, slower than the baseline's SSE; 256-bit vectors leave less to the tail.
#ifdef __AVX512F__
#pragma GCC target("prefer-vector-width=256")
#endif

// The vectors below stay inside this file: no call passes them across an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace td::kernels::TD_ISA {
namespace {

// kLanes outputs of a row at once, in GCC's generic vectors, which each level lowers to its own
// registers (a vector of 8 doubles is two AVX2 registers).
constexpr int kLanes = 8;
template <class T>
struct Vec;
template <>
struct Vec<float> {
  using V = float __attribute__((vector_size(32)));
  using Mask = int32_t __attribute__((vector_size(32)));
};
template <>
struct Vec<double> {
  using V = double __attribute__((vector_size(64)));
  using Mask = int64_t __attribute__((vector_size(64)));
};
using Doubles = Vec<double>::V;
using Int64s = Vec<double>::Mask;

// A vector of floats or doubles as doubles, in one instruction with AVX-512.
inline Doubles widen(const Doubles& v) { return v; }
inline Doubles widen(const Vec<float>::V& v) {
#ifdef __AVX512F__
  return reinterpret_cast<Doubles>(_mm512_cvtps_pd(reinterpret_cast<__m256>(v)));
#else
  return __builtin_convertvector(v, Doubles);
#endif
}

// max(m, v) with a NaN winning, as torch's max pool: a max instruction's pattern and a select,
// so that loops of it do not branch on the data (random data mispredicted every other element).
template <class T>
T nan_max(T m, T v) {
  const T bigger = v > m ? v : m;
  return v != v ? v : bigger;
}
// The same for kLanes at once, with maxps(v, m), which is v > m ? v : m, where there is one:
// left to the compiler, the two selects became two compares and a blend, a longer chain from m
// to the result.
template <class V>
V nan_max_v(const V& m, const V& v) {
  V bigger = v > m ? v : m;
#ifdef __AVX__
  if constexpr (std::is_same_v<V, Vec<float>::V>)
    bigger = reinterpret_cast<V>(
        _mm256_max_ps(reinterpret_cast<__m256>(v), reinterpret_cast<__m256>(m)));
#endif
#ifdef __AVX512F__
  if constexpr (std::is_same_v<V, Vec<double>::V>)
    bigger = reinterpret_cast<V>(
        _mm512_max_pd(reinterpret_cast<__m512d>(v), reinterpret_cast<__m512d>(m)));
#endif
  return v != v ? v : bigger;
}

// The usual case, windows that tile the input (kernel = stride = K, no padding or dilation, rows
// contiguous): each output from its K x K taps in one branch-free pass, which vectorises along
// the row. The taps come in the same order as everywhere else, so an avg sums the same way.
template <int K, bool Max, class T>
void pool_tiles(const T* plane, int64_t row_stride, T* out, int64_t oh, int64_t ow,
                double divisor) {
  for (int64_t oy = 0; oy < oh; ++oy, out += ow) {
    const T* r = plane + oy * K * row_stride;
    for (int64_t ox = 0; ox < ow; ++ox) {
      if constexpr (Max) {
        T m = -std::numeric_limits<T>::infinity();
        for (int i = 0; i < K; ++i)
          for (int j = 0; j < K; ++j) m = nan_max(m, r[i * row_stride + ox * K + j]);
        out[ox] = m;
      } else {
        double sum = 0;
        for (int i = 0; i < K; ++i)
          for (int j = 0; j < K; ++j) sum += r[i * row_stride + ox * K + j];
        out[ox] = static_cast<T>(sum / divisor);
      }
    }
  }
}

// Lanes p[0], p[step], ..., p[(kLanes - 1) * step]; Step: the step when known at compile time
// (1 or 2; 0: use `step`). Reads nothing past the last lane.
template <int Step, class T>
typename Vec<T>::V load(const T* p, int64_t step) {
  using V = typename Vec<T>::V;
  using Mask = typename Vec<T>::Mask;
  V v;
  if constexpr (Step == 1) {
    std::memcpy(&v, p, sizeof v);
  } else if constexpr (Step == 2) {
    // p[0 .. 7] and p[7 .. 14]: the even elements are lanes 0, 2, 4, 6 of the one and 1, 3, 5, 7
    // of the other
    V hi;
    std::memcpy(&v, p, sizeof v);
    std::memcpy(&hi, p + kLanes - 1, sizeof hi);
    v = __builtin_shuffle(v, hi, Mask{0, 2, 4, 6, 9, 11, 13, 15});
  } else {
    for (int l = 0; l < kLanes; ++l) v[l] = p[l * step];
  }
  return v;
}

template <class T>
void store(T* p, const typename Vec<T>::V& v) {
  std::memcpy(p, &v, sizeof v);
}

// f(0), ..., f(U - 1) written out: loops over a group's vectors were vectorised across them
// (their offsets in vector registers, their accumulators in memory).
template <int U, class F>
[[gnu::always_inline]] inline void each(F&& f) {
  [&]<int... u>(std::integer_sequence<int, u...>) { (f(u), ...); }
  (std::make_integer_sequence<int, U>{});
}

// The taps [lo, hi) of a window from `start`, dil apart, that lie inside [0, n): a huge kernel's
// padding taps are never visited.
std::array<int64_t, 2> taps(int64_t start, int64_t dil, int64_t k, int64_t n) {
  const int64_t lo = start >= 0 ? 0 : (dil - 1 - start) / dil;
  const int64_t hi = start >= n ? 0 : std::min(k, (n - 1 - start) / dil + 1);
  return {lo, std::max(lo, hi)};
}

// One pool over x's planes. Every window meets its taps in one order (rows, then columns), so an
// avg's sum rounds the same whichever loop computes it, and a max keeps its rule: the last NaN
// wins, else the first maximum. idx (max only, or null): each window's argmax as iy * W + ix in
// its input plane, the first maximum, the last NaN, or the first tap when all are -inf, as
// torch's.
//
// Each plane is copied into rows padded on both sides with a value no tap changes a window by
// (-inf for a max; 0 for a sum, which starts at +0 and so never is -0), wide enough for every
// window and for kLanes outputs: then every output row is pooled kLanes outputs at a time, with
// only its rows clipped (the same for the whole row), kGroup vectors at once (a max's or a sum's
// taps are a chain of dependent steps). Kernels too wide for that go a window at a time.
template <class T>
class Pooler {
 public:
  Pooler(const PoolGeom& g, bool is_max, int64_t divisor_override, bool count_include_pad)
      : g_(g),
        is_max_(is_max),
        divisor_override_(divisor_override),
        count_include_pad_(count_include_pad) {}

  void run(const Tensor& x, T* out, int64_t* idx) {
    const T* xp = x.data<T>();
    const Strides& st = x.strides();
    rs_ = st[2];
    cs_ = st[3];
    const bool by_rows = g_.k[1] <= 64 && g_.dil[1] <= 64 && g_.stride[1] <= 64;
    if (by_rows) prepare();
    for (int64_t b = 0; b < g_.n; ++b)
      for (int64_t c = 0; c < g_.c; ++c) {
        const T* plane = xp + b * st[0] + c * st[1];
        if (by_rows)
          pool_rows(plane, out, idx);
        else
          for (int64_t oy = 0; oy < g_.oh; ++oy)
            for (int64_t ox = 0; ox < g_.ow; ++ox)
              window(plane, oy, ox, out + oy * g_.ow + ox, idx ? idx + oy * g_.ow + ox : nullptr);
        out += g_.oh * g_.ow;
        if (idx) idx += g_.oh * g_.ow;
      }
  }

 private:
  static constexpr int kGroup = 4;

  // avg's divisor, torch's: the window clipped to the padded input (count_include_pad), or to
  // the input, or divisor_override; a factor for the rows times one for the columns. In doubles:
  // a huge kernel's size does not overflow.
  double divisor_factor(int d, int64_t start, int64_t ntaps) const {
    if (divisor_override_ != 0) return d == 0 ? static_cast<double>(divisor_override_) : 1.0;
    if (!count_include_pad_) return static_cast<double>(ntaps);
    const int64_t n = d == 0 ? g_.h : g_.w;
    return static_cast<double>(std::min(g_.k[d], n + g_.pad[d] - start));
  }

  // One output, its taps clipped to the input.
  void window(const T* plane, int64_t oy, int64_t ox, T* out, int64_t* idx) const {
    const int64_t y0 = oy * g_.stride[0] - g_.pad[0], x0 = ox * g_.stride[1] - g_.pad[1];
    const int64_t d0 = g_.dil[0], d1 = g_.dil[1];
    const auto [i0, i1] = taps(y0, d0, g_.k[0], g_.h);
    const auto [j0, j1] = taps(x0, d1, g_.k[1], g_.w);
    if (!is_max_) {
      double sum = 0;
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) sum += plane[(y0 + i * d0) * rs_ + (x0 + j * d1) * cs_];
      *out =
          static_cast<T>(sum / (divisor_factor(0, y0, i1 - i0) * divisor_factor(1, x0, j1 - j0)));
      return;
    }
    T m = -std::numeric_limits<T>::infinity();
    int64_t arg = (y0 + i0 * d0) * g_.w + x0 + j0 * d1;
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t iy = y0 + i * d0, ix = x0 + j * d1;
        const T v = plane[iy * rs_ + ix * cs_];
        if (v > m || v != v) arg = iy * g_.w + ix;  // torch's: the last NaN
        m = nan_max(m, v);
      }
    *out = m;
    if (idx) *idx = arg;
  }

  // The padded rows' geometry and the per-column values of the output rows.
  void prepare() {
    const int64_t lanes = std::max<int64_t>(g_.ow, kLanes);
    // padded column c is input column c - pad
    width_ = (lanes - 1) * g_.stride[1] + (g_.k[1] - 1) * g_.dil[1] + 1;
    // read the input itself when its rows hold every tap of every lane
    direct_ = g_.pad[1] == 0 && cs_ == 1 && width_ <= g_.w;
    if (!direct_) rows_.resize(g_.h * width_);
    col_div_.assign(lanes, 1.0);
    first_tap_.assign(lanes, 0);
    const int64_t row_stride = direct_ ? rs_ : width_;
    const int64_t rows = std::min(g_.k[0], g_.h), kw = g_.k[1];
    tap_off_.resize(rows * kw);
    tap_at_.resize(rows * kw);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        tap_off_[i * kw + j] = i * g_.dil[0] * row_stride + j * g_.dil[1];
        tap_at_[i * kw + j] = i * g_.dil[0] * g_.w + j * g_.dil[1];
      }
    for (int64_t ox = 0; ox < g_.ow; ++ox) {
      const int64_t x0 = ox * g_.stride[1] - g_.pad[1];
      const auto [j0, j1] = taps(x0, g_.dil[1], g_.k[1], g_.w);
      col_div_[ox] = divisor_factor(1, x0, j1 - j0);
      first_tap_[ox] = x0 + j0 * g_.dil[1];
    }
  }

  // One output row's windows: their first tap row in the padded rows, how many rows they keep,
  // avg's divisor factor for the rows, argmax's index of the row of the first tap.
  struct Row {
    const T* src;
    int64_t nrows;
    double row_div;
    int64_t at0;
  };

  void pool_rows(const T* plane, T* out, int64_t* idx) {
    const T* src = plane;
    int64_t row_stride = rs_;
    if (!direct_) {
      const T pad = is_max_ ? -std::numeric_limits<T>::infinity() : T(0);
      const int64_t left = std::min(g_.pad[1], width_), n = std::min(g_.w, width_ - left);
      for (int64_t y = 0; y < g_.h; ++y) {
        T* r = rows_.data() + y * width_;
        const T* in = plane + y * rs_;
        std::fill(r, r + left, pad);
        if (cs_ == 1)
          std::copy(in, in + n, r + left);
        else
          for (int64_t x = 0; x < n; ++x) r[left + x] = in[x * cs_];
        std::fill(r + left + n, r + width_, pad);
      }
      src = rows_.data();
      row_stride = width_;
    }
    const int64_t s = g_.stride[1];
    for (int64_t oy = 0; oy < g_.oh; ++oy, out += g_.ow, idx += idx ? g_.ow : 0) {
      const int64_t y0 = oy * g_.stride[0] - g_.pad[0];
      const auto [i0, i1] = taps(y0, g_.dil[0], g_.k[0], g_.h);
      const int64_t first_row = y0 + i0 * g_.dil[0];
      const Row r{src + (i1 > i0 ? first_row * row_stride : 0), i1 - i0,
                  divisor_factor(0, y0, i1 - i0), first_row * g_.w};
      if (s == 1)
        row<1>(r, out, idx);
      else if (s == 2)
        row<2>(r, out, idx);
      else
        row<0>(r, out, idx);
    }
  }

  // An output row, kGroup vectors at a time: when ow is not a multiple of kLanes, the last
  // vector starts at ow - kLanes (its overlap computed twice, to the same values); a row shorter
  // than kLanes goes through a scratch row.
  template <int Step>
  void row(const Row& r, T* out, int64_t* idx) const {
    const int64_t ow = g_.ow;
    if (ow < kLanes) {
      T o[kLanes];
      int64_t ix[kLanes];
      group<Step, 1>(r, 0, 0, o, idx ? ix : nullptr);
      std::copy(o, o + ow, out);
      if (idx) std::copy(ix, ix + ow, idx);
      return;
    }
    const int64_t nb = (ow + kLanes - 1) / kLanes, last = ow - kLanes;
    int64_t b = 0;
    for (; b + kGroup <= nb; b += kGroup) group<Step, kGroup>(r, b * kLanes, last, out, idx);
    if (nb - b == 3)
      group<Step, 3>(r, b * kLanes, last, out, idx);
    else if (nb - b == 2)
      group<Step, 2>(r, b * kLanes, last, out, idx);
    else if (nb - b == 1)
      group<Step, 1>(r, b * kLanes, last, out, idx);
  }

  // U vectors of outputs from o0, kLanes apart, none past `last`.
  template <int Step, int U>
  void group(const Row& r, int64_t o0, int64_t last, T* out, int64_t* idx) const {
    using V = typename Vec<T>::V;
    const int64_t s = g_.stride[1], nt = r.nrows * g_.k[1];
    const int64_t* off = tap_off_.data();
    int64_t o[U];
    const T* q[U];
    each<U>([&](int u) {
      o[u] = std::min(o0 + u * kLanes, last);
      q[u] = r.src + o[u] * s;
    });
    if (!is_max_) {
      Doubles sum[U] = {};
      for (int64_t t = 0; t < nt; ++t)
        each<U>([&](int u) { sum[u] += widen(load<Step>(q[u] + off[t], s)); });
      each<U>([&](int u) {
        Doubles div;
        std::memcpy(&div, col_div_.data() + o[u], sizeof div);
        store(out + o[u], __builtin_convertvector(sum[u] / (r.row_div * div), V));
      });
      return;
    }
    V m[U];
    each<U>([&](int u) { m[u] = V{} - std::numeric_limits<T>::infinity(); });
    if (!idx) {
      // nan_max(nan_max(m, a), b) == nan_max(m, nan_max(a, b)) (the last NaN, else the first
      // maximum either way): pairs of taps halve the chain of dependent steps
      int64_t t = 0;
      for (; t + 1 < nt; t += 2)
        each<U>([&](int u) {
          m[u] = nan_max_v(
              m[u], nan_max_v(load<Step>(q[u] + off[t], s), load<Step>(q[u] + off[t + 1], s)));
        });
      if (t < nt) each<U>([&](int u) { m[u] = nan_max_v(m[u], load<Step>(q[u] + off[t], s)); });
      each<U>([&](int u) { store(out + o[u], m[u]); });
      return;
    }
    // lane l's tap t is input (first row + i * d0, (o + l) * s - pad + j * d1), t = i * kw + j
    Int64s arg[U], col[U];
    each<U>([&](int u) {
      std::memcpy(&arg[u], first_tap_.data() + o[u], sizeof arg[u]);
      arg[u] += r.at0;
      col[u] = Int64s{0, 1, 2, 3, 4, 5, 6, 7} * s + (r.at0 + o[u] * s - g_.pad[1]);
    });
    for (int64_t t = 0; t < nt; ++t)
      each<U>([&](int u) {
        const V v = load<Step>(q[u] + off[t], s);
        const Int64s take = __builtin_convertvector((v > m[u]) | (v != v), Int64s);
        m[u] = nan_max_v(m[u], v);
        arg[u] = take ? col[u] + tap_at_[t] : arg[u];
      });
    each<U>([&](int u) {
      store(out + o[u], m[u]);
      std::memcpy(idx + o[u], &arg[u], sizeof arg[u]);
    });
  }

  const PoolGeom& g_;
  bool is_max_;
  int64_t divisor_override_;
  bool count_include_pad_;
  int64_t rs_ = 0, cs_ = 0;         // x's row and column strides
  int64_t width_ = 0;               // of a padded row
  bool direct_ = false;             // the input's rows serve as the padded rows
  std::vector<T> rows_;             // a plane's padded rows
  std::vector<double> col_div_;     // per output column: avg's divisor factor
  std::vector<int64_t> first_tap_;  // per output column: the input column of its first tap
  // per tap of the rows a window keeps (rows, then columns): its place in the padded rows and
  // its index in the input plane, from the window's first
  std::vector<int64_t> tap_off_, tap_at_;
};

template <class T>
void pool_planes(const Tensor& x, T* out, int64_t* idx, const PoolGeom& g, bool is_max,
                 int64_t divisor_override, bool count_include_pad) {
  const T* xp = x.data<T>();
  const Strides& st = x.strides();
  const int64_t K = g.k[0];
  if (!idx && g.k[1] == K && g.stride[0] == K && g.stride[1] == K && g.pad[0] == 0 &&
      g.pad[1] == 0 && g.dil[0] == 1 && g.dil[1] == 1 && st[3] == 1 && g.oh * K <= g.h &&
      g.ow * K <= g.w && (K == 2 || K == 3)) {
    const double div =
        divisor_override != 0 ? static_cast<double>(divisor_override) : static_cast<double>(K * K);
    for (int64_t b = 0; b < g.n; ++b)
      for (int64_t c = 0; c < g.c; ++c, out += g.oh * g.ow) {
        const T* plane = xp + b * st[0] + c * st[1];
        if (K == 2 && is_max)
          pool_tiles<2, true>(plane, st[2], out, g.oh, g.ow, div);
        else if (K == 2)
          pool_tiles<2, false>(plane, st[2], out, g.oh, g.ow, div);
        else if (is_max)
          pool_tiles<3, true>(plane, st[2], out, g.oh, g.ow, div);
        else
          pool_tiles<3, false>(plane, st[2], out, g.oh, g.ow, div);
      }
    return;
  }
  Pooler<T>(g, is_max, divisor_override, count_include_pad).run(x, out, idx);
}

}  // namespace

void pool2d(const Tensor& x, const Tensor& out, int64_t* idx, const PoolGeom& g, bool is_max,
            int64_t divisor_override, bool count_include_pad) {
  if (x.dtype() == DType::Float32)
    pool_planes<float>(x, out.data<float>(), idx, g, is_max, divisor_override, count_include_pad);
  else
    pool_planes<double>(x, out.data<double>(), idx, g, is_max, divisor_override, count_include_pad);
}

}  // namespace td::kernels::TD_ISA
