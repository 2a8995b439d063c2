// The norms' loops over contiguous inputs: layer_norm_rows and batch_norm_channels, their
// statistics in double from the row sums (one order of summation whatever the layout).
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/kernels/kernels.h"

namespace td::kernels::TD_ISA {
namespace {

template <class T>
void layer_norm_loop(const T* x, T* y, int64_t rows, int64_t d, const double* wv, const double* bv,
                     double eps, int64_t rows_per_set) {
  const double dd = static_cast<double>(d);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    const double* w = wv + r / rows_per_set * d;
    const double* b = bv + r / rows_per_set * d;
    const double mean = row_sum(xr, d) / dd;
    const double var = row_sum_squares(xr, d, mean) / dd;
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < d; ++i) yr[i] = static_cast<T>((xr[i] - mean) * inv * w[i] + b[i]);
  }
}

// y = x * scale + shift per channel, then relu's (NaN and -0 kept, as the unary's) if Relu. In
// x's type, as PyTorch's kernel, the factors rounded to it once: in double, each element's two
// conversions made this the cost of a convolution's output pass even in cache.
template <bool Relu, class T>
void scale_shift(const T* x, T* y, int64_t n, int64_t c, int64_t s, const double* scale64,
                 const double* shift64) {
  auto out = [](T t) {
    if constexpr (Relu) return t < T(0) ? T(0) : t;
    return t;
  };
  for (int64_t i = 0; i < n; ++i) {
    const T* row = x + i * c * s;
    T* dst = y + i * c * s;
    if (s == 1) {
      for (int64_t ch = 0; ch < c; ++ch)
        dst[ch] = out(row[ch] * static_cast<T>(scale64[ch]) + static_cast<T>(shift64[ch]));
    } else {
      for (int64_t ch = 0; ch < c; ++ch) {
        const T a = static_cast<T>(scale64[ch]), b = static_cast<T>(shift64[ch]);
        for (int64_t j = 0; j < s; ++j) dst[ch * s + j] = out(row[ch * s + j] * a + b);
      }
    }
  }
}

// The loops run in memory order (with s == 1 a row of c channels at a time, which vectorises):
// channel by channel, an [N, C] input strided by C through memory that a vmapped call, with
// every set's channels side by side, made larger than the cache.
template <class T>
void batch_norm_loop(const T* x, T* y, int64_t n, int64_t c, int64_t s, bool compute, double* mean,
                     double* var, const double* w, const double* b, double eps, bool relu) {
  const double cnt = static_cast<double>(n * s);
  // acc[ch] = the mean over rows of channel ch's term: one value's (s == 1, a row of channels at
  // a time) or the sum over its s values
  auto per_channel = [&](double* acc, auto value_term, auto run_sum) {
    std::fill_n(acc, c, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const T* row = x + i * c * s;
      for (int64_t ch = 0; ch < c; ++ch)
        acc[ch] += s == 1 ? value_term(row[ch], ch) : run_sum(row + ch * s, ch);
    }
    for (int64_t ch = 0; ch < c; ++ch) acc[ch] /= cnt;
  };
  if (compute) {
    per_channel(
        mean, [](T v, int64_t) { return static_cast<double>(v); },
        [&](const T* p, int64_t) { return row_sum(p, s); });
    per_channel(
        var,
        [&](T v, int64_t ch) {
          const double t = v - mean[ch];
          return t * t;
        },
        [&](const T* p, int64_t ch) { return row_sum_squares(p, s, mean[ch]); });
  }
  std::vector<double> scale(c), shift(c);
  batch_norm_factors(c, mean, var, w, b, eps, scale.data(), shift.data());
  batch_norm_scale_shift(x, y, n, c, s, scale.data(), shift.data(), relu);
}

}  // namespace

void batch_norm_factors(int64_t c, const double* mean, const double* var, const double* w,
                        const double* b, double eps, double* scale, double* shift) {
  for (int64_t ch = 0; ch < c; ++ch) {
    scale[ch] = w[ch] / std::sqrt(var[ch] + eps);
    shift[ch] = b[ch] - mean[ch] * scale[ch];
  }
}
void batch_norm_scale_shift(const float* x, float* y, int64_t n, int64_t c, int64_t s,
                            const double* scale, const double* shift, bool relu) {
  (relu ? scale_shift<true, float> : scale_shift<false, float>)(x, y, n, c, s, scale, shift);
}
void batch_norm_scale_shift(const double* x, double* y, int64_t n, int64_t c, int64_t s,
                            const double* scale, const double* shift, bool relu) {
  (relu ? scale_shift<true, double> : scale_shift<false, double>)(x, y, n, c, s, scale, shift);
}

void layer_norm_rows(const float* x, float* y, int64_t rows, int64_t d, const double* w,
                     const double* b, double eps, int64_t rows_per_set) {
  layer_norm_loop(x, y, rows, d, w, b, eps, rows_per_set);
}
void layer_norm_rows(const double* x, double* y, int64_t rows, int64_t d, const double* w,
                     const double* b, double eps, int64_t rows_per_set) {
  layer_norm_loop(x, y, rows, d, w, b, eps, rows_per_set);
}
void batch_norm_channels(const float* x, float* y, int64_t n, int64_t c, int64_t s, bool compute,
                         double* mean, double* var, const double* w, const double* b, double eps,
                         bool relu) {
  batch_norm_loop(x, y, n, c, s, compute, mean, var, w, b, eps, relu);
}
void batch_norm_channels(const double* x, double* y, int64_t n, int64_t c, int64_t s, bool compute,
                         double* mean, double* var, const double* w, const double* b, double eps,
                         bool relu) {
  batch_norm_loop(x, y, n, c, s, compute, mean, var, w, b, eps, relu);
}

}  // namespace td::kernels::TD_ISA
