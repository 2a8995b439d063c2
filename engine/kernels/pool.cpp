// max_pool2d's and avg_pool2d's loops over [N, C, H, W] planes: the windows that tile the input
// (2x2 and 3x3, stride = kernel) in one pass each, any other geometry a tap at a time.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/kernels/windows.h"

// The rows are short (a pool's output row): with AVX-512's 16 floats a row of 15 ran its
// scalar tail only, slower than the baseline's SSE; 256-bit vectors leave less to the tail.
#ifdef __AVX512F__
#pragma GCC target("prefer-vector-width=256")
#endif

namespace td::kernels::TD_ISA {
namespace {

// max(m, v) with a NaN winning, as torch's max pool: a max instruction's pattern and a select,
// so that loops of it, vector and scalar tail alike, do not branch on the data (random data
// mispredicted every other element).
template <class T>
T nan_max(T m, T v) {
  const T bigger = v > m ? v : m;
  return v != v ? v : bigger;
}

// o[k] = nan_max(o[k], src[k * step]) for k in [0, n); S is the step when known at compile time
// (0: use `step`).
template <int64_t S, class T>
void max_into(T* __restrict o, const T* __restrict src, int64_t n, int64_t step) {
  const int64_t s = S ? S : step;
  for (int64_t k = 0; k < n; ++k) o[k] = nan_max(o[k], src[k * s]);
}

// The usual case, windows that tile the input (kernel = stride = K, no padding or dilation, rows
// contiguous): each output from its K x K taps in one branch-free pass, which vectorises along
// the row (the general loop below makes a pass per tap). The taps come in the same order, so
// an avg sums as there, and a NaN wins a max as there.
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

// Pools an output row at a time, tap by tap, so the inner loops run along the row; every window
// still meets its taps in order (rows, then columns), as a window-at-a-time loop would.
// idx (max only, or null): each window's argmax as iy * W + ix in its input plane, the first
// maximum, the last NaN, or the first tap when all are -inf, as torch's.
template <class T>
void pool_loop(const Tensor& x, T* out, int64_t* idx, const PoolGeom& g, bool is_max,
               int64_t divisor_override, bool count_include_pad) {
  const T* xp = x.data<T>();
  const Strides& st = x.strides();
  // avg's divisor, torch's: the window clipped to the padded input (count_include_pad), or to
  // the input, or divisor_override. In doubles: a huge kernel's size does not overflow.
  auto divisor = [&](int64_t y0, int64_t x0, int64_t ny, int64_t nx) {
    if (divisor_override != 0) return static_cast<double>(divisor_override);
    if (!count_include_pad) return static_cast<double>(ny) * static_cast<double>(nx);
    auto len = [](int64_t start, int64_t k, int64_t n, int64_t p) {
      return static_cast<double>(std::min(k, n + p - start));
    };
    return len(y0, g.k[0], g.h, g.pad[0]) * len(x0, g.k[1], g.w, g.pad[1]);
  };
  // Taps [lo, hi) of a window from `start`, dil apart, inside [0, n): a huge kernel's padding
  // taps are never visited.
  auto taps = [](int64_t start, int64_t dil, int64_t k, int64_t n) {
    const int64_t lo = start >= 0 ? 0 : (dil - 1 - start) / dil;
    const int64_t hi = start >= n ? 0 : std::min(k, (n - 1 - start) / dil + 1);
    return std::array<int64_t, 2>{lo, std::max(lo, hi)};
  };
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
  // each output column's taps; for each tap column any window reaches, the output columns
  // [lo, hi) whose windows reach it and the input column of the first
  std::vector<std::array<int64_t, 2>> col_taps(g.ow);
  int64_t jmin = g.k[1], jmax = 0;
  for (int64_t ox = 0; ox < g.ow; ++ox) {
    col_taps[ox] = taps(ox * g.stride[1] - g.pad[1], g.dil[1], g.k[1], g.w);
    if (col_taps[ox][0] < col_taps[ox][1]) {
      jmin = std::min(jmin, col_taps[ox][0]);
      jmax = std::max(jmax, col_taps[ox][1]);
    }
  }
  struct TapCol {
    int64_t lo, hi, ix0;
  };
  std::vector<TapCol> tap_cols;
  for (int64_t j = jmin; j < jmax; ++j) {
    const auto [lo, hi] = valid_range(g.ow, g.stride[1], g.pad[1], j * g.dil[1], g.w);
    if (lo < hi) tap_cols.push_back({lo, hi, lo * g.stride[1] - g.pad[1] + j * g.dil[1]});
  }
  std::vector<double> sum(is_max ? 0 : g.ow);
  const int64_t step = g.stride[1] * st[3];
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t c = 0; c < g.c; ++c) {
      const T* plane = xp + b * st[0] + c * st[1];
      for (int64_t oy = 0; oy < g.oh; ++oy, out += g.ow) {
        const int64_t y0 = oy * g.stride[0] - g.pad[0];
        const auto [ilo, ihi] = taps(y0, g.dil[0], g.k[0], g.h);
        if (is_max) {
          std::fill(out, out + g.ow, -std::numeric_limits<T>::infinity());
          if (idx)
            for (int64_t ox = 0; ox < g.ow; ++ox)
              idx[ox] = (y0 + ilo * g.dil[0]) * g.w + ox * g.stride[1] - g.pad[1] +
                        col_taps[ox][0] * g.dil[1];
        } else {
          std::fill(sum.begin(), sum.end(), 0.0);
        }
        for (int64_t i = ilo; i < ihi; ++i) {
          const int64_t iy = y0 + i * g.dil[0];
          for (const TapCol& tc : tap_cols) {
            const T* src = plane + iy * st[2] + tc.ix0 * st[3];
            const int64_t lo = tc.lo, n = tc.hi - tc.lo;
            if (!is_max) {
              for (int64_t k = 0; k < n; ++k) sum[lo + k] += src[k * step];
            } else if (idx) {
              for (int64_t k = 0; k < n; ++k) {
                const T v = src[k * step];
                if (v > out[lo + k] || std::isnan(v)) {  // torch's index: the last NaN
                  out[lo + k] = v;
                  idx[lo + k] = iy * g.w + tc.ix0 + k * g.stride[1];
                }
              }
            } else if (step == 1) {
              max_into<1>(out + lo, src, n, step);
            } else if (step == 2) {
              max_into<2>(out + lo, src, n, step);
            } else {
              max_into<0>(out + lo, src, n, step);
            }
          }
        }
        if (idx) idx += g.ow;
        if (!is_max)
          for (int64_t ox = 0; ox < g.ow; ++ox)
            out[ox] = static_cast<T>(sum[ox] / divisor(y0, ox * g.stride[1] - g.pad[1], ihi - ilo,
                                                       col_taps[ox][1] - col_taps[ox][0]));
      }
    }
}

}  // namespace

void pool2d(const Tensor& x, const Tensor& out, int64_t* idx, const PoolGeom& g, bool is_max,
            int64_t divisor_override, bool count_include_pad) {
  if (x.dtype() == DType::Float32)
    pool_loop<float>(x, out.data<float>(), idx, g, is_max, divisor_override, count_include_pad);
  else
    pool_loop<double>(x, out.data<double>(), idx, g, is_max, divisor_override, count_include_pad);
}

}  // namespace td::kernels::TD_ISA
