// nn functionals: layer_norm, batch_norm, conv2d (im2col + one GEMM), max/avg pooling,
// embedding. Norms and pools are direct loops over contiguous inputs, accumulating in double.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/kernels/kernels.h"
#include "engine/ops.h"
#include "engine/ops/impls.h"

namespace td {
namespace {

Tensor opt_input(std::span<const Tensor> in, size_t i) { return i < in.size() ? in[i] : Tensor(); }

}  // namespace

void impl::check_floating(const char* op, const Shape& x, DType t, const char* what) {
  if (!is_floating(t))
    throw_error<TypeError>("[", op, "] expects a floating point input, got ", t, " of ", what, " ",
                           x);
}

void impl::check_floating(const char* op, const Tensor& x) {
  check_floating(op, x.shape(), x.dtype(), shape_word());
}

void impl::check_same_dtype(const char* op, const Tensor& x, const Tensor& t, const char* what) {
  if (t.defined() && t.dtype() != x.dtype())
    throw_error<TypeError>("[", op, "] ", what, " has dtype ", t.dtype(), " but input has ",
                           x.dtype());
}

namespace {
using impl::check_floating;
using impl::check_same_dtype;

// An optional input's shape for the shared shape checks (null when absent).
const Shape* shape_or_null(const Tensor& t) { return t.defined() ? &t.shape() : nullptr; }

// Values of a 1-D tensor as doubles (fill when undefined).
std::vector<double> values_or(const Tensor& t, int64_t n, double fill) {
  if (!t.defined()) return std::vector<double>(n, fill);
  return t.to_vector<double>();
}

// A 2-int parameter given as one or two values.
std::array<int64_t, 2> pair_param(const char* op, const char* what, const IntList& v, int64_t min) {
  if (v.size() != 1 && v.size() != 2)
    throw_error<ValueError>("[", op, "] ", what, " must have 1 or 2 values, got ", v);
  std::array<int64_t, 2> p{v[0], v.size() == 2 ? v[1] : v[0]};
  if (p[0] < min || p[1] < min)
    throw_error<ValueError>("[", op, "] ", what, " must be >= ", min, ", got ", v);
  return p;
}

// h + 2 pad - dil (k - 1) - 1 for a window of k >= 1 taps dil apart over an extent h padded on
// both sides: the room its last start has (negative: it does not fit); ValueError naming op and
// the input shape x when the sizes overflow int64.
int64_t window_room(const char* op, const Shape& x, int64_t h, int64_t pad, int64_t k,
                    int64_t dil) {
  int64_t padded, span;
  if (__builtin_mul_overflow(pad, 2, &padded) || __builtin_add_overflow(padded, h, &padded) ||
      __builtin_mul_overflow(dil, k - 1, &span))
    throw_error<ValueError>("[", op, "] padding ", pad, ", kernel size ", k, " and dilation ", dil,
                            " overflow int64 for input of shape ", x);
  return padded - span - 1;
}

// conv and pool accept [N, C, H, W] and unbatched [C, H, W].
Tensor as_4d(const char* op, const Tensor& x) {
  if (x.dim() == 4) return x;
  if (x.dim() == 3) return x.unsqueeze(0);
  throw_error<ValueError>("[", op, "] expects a 3-D or 4-D input, got shape ", x.shape());
}

// w and b hold one [d] row per set of rows_per_set rows.
template <class T>
void layer_norm_loop(const T* x, T* y, int64_t rows, int64_t d, const std::vector<double>& wv,
                     const std::vector<double>& bv, double eps, int64_t rows_per_set) {
  const double dd = static_cast<double>(d);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    const double* w = wv.data() + r / rows_per_set * d;
    const double* b = bv.data() + r / rows_per_set * d;
    const double mean = kernels::row_sum(xr, d) / dd;
    const double var = kernels::row_sum_squares(xr, d, mean) / dd;
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < d; ++i) yr[i] = static_cast<T>((xr[i] - mean) * inv * w[i] + b[i]);
  }
}

// x viewed as [n, c, s] contiguous; per-channel scale/shift applied, optionally stats computed.
// The loops run in memory order (with s == 1 a row of c channels at a time, which vectorises):
// channel by channel, an [N, C] input strided by C through memory that a vmapped call, with
// every set's channels side by side, made larger than the cache.
template <class T>
void batch_norm_loop(const T* x, T* y, int64_t n, int64_t c, int64_t s, bool compute,
                     std::vector<double>& mean, std::vector<double>& var,
                     const std::vector<double>& w, const std::vector<double>& b, double eps) {
  const double cnt = static_cast<double>(n * s);
  // acc[ch] = the mean over rows of channel ch's term: one value's (s == 1, a row of channels at
  // a time) or the sum over its s values
  auto per_channel = [&](std::vector<double>& acc, auto value_term, auto run_sum) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const T* row = x + i * c * s;
      for (int64_t ch = 0; ch < c; ++ch)
        acc[ch] += s == 1 ? value_term(row[ch], ch) : run_sum(row + ch * s, ch);
    }
    for (double& a : acc) a /= cnt;
  };
  if (compute) {
    per_channel(
        mean, [](T v, int64_t) { return static_cast<double>(v); },
        [&](const T* p, int64_t) { return kernels::row_sum(p, s); });
    per_channel(
        var,
        [&](T v, int64_t ch) {
          const double t = v - mean[ch];
          return t * t;
        },
        [&](const T* p, int64_t ch) { return kernels::row_sum_squares(p, s, mean[ch]); });
  }
  std::vector<double> scale(c), shift(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    scale[ch] = w[ch] / std::sqrt(var[ch] + eps);
    shift[ch] = b[ch] - mean[ch] * scale[ch];
  }
  for (int64_t i = 0; i < n; ++i) {
    const T* row = x + i * c * s;
    T* out = y + i * c * s;
    if (s == 1) {
      for (int64_t ch = 0; ch < c; ++ch) out[ch] = static_cast<T>(row[ch] * scale[ch] + shift[ch]);
    } else {
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t j = 0; j < s; ++j)
          out[ch * s + j] = static_cast<T>(row[ch * s + j] * scale[ch] + shift[ch]);
    }
  }
}

// Writes vals (cast to t's dtype) into t in place, whatever t's strides.
void write_values(const Tensor& t, const std::vector<double>& vals) {
  Tensor src = Tensor::empty({static_cast<int64_t>(vals.size())}, DType::Float64);
  if (!vals.empty()) std::memcpy(src.data<double>(), vals.data(), vals.size() * sizeof(double));
  kernels::copy_into(src, t);
}

struct ConvGeom {
  int64_t n, cin, h, w, cout, kh, kw, oh, ow, groups;
  std::array<int64_t, 2> stride, pad, dil;
};

// Output columns [lo, hi) whose input column ox*s - p + off lies inside [0, w).
std::pair<int64_t, int64_t> valid_range(int64_t out, int64_t s, int64_t p, int64_t off, int64_t w) {
  const int64_t first = off - p;  // input index at output 0
  int64_t lo = first >= 0 ? 0 : (-first + s - 1) / s;
  int64_t hi = first >= w ? 0 : (w - 1 - first) / s + 1;
  lo = std::min(lo, out);
  hi = std::max(std::min(hi, out), lo);
  return {lo, hi};
}

// cols [grp1 - grp0, Cg*kh*kw, N*OH*OW]: groups [grp0, grp1)'s receptive fields, zero where the
// window hits padding.
template <class T>
void im2col(const Tensor& x, const ConvGeom& g, int64_t grp0, int64_t grp1, T* cols) {
  const T* xp = x.data<T>();
  const Strides& st = x.strides();
  const int64_t cg = g.cin / g.groups;
  for (int64_t grp = grp0; grp < grp1; ++grp)
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j) {
          auto [lo, hi] = valid_range(g.ow, g.stride[1], g.pad[1], j * g.dil[1], g.w);
          const int64_t x0 = lo * g.stride[1] - g.pad[1] + j * g.dil[1];
          const int64_t step = g.stride[1] * st[3];
          // Stride 1 or 2 along rows of unit stride: the tap's valid rows in one strided copy
          // (a copy per row cost more in calls and scalar tails than in bytes); others row by row
          const bool rows = (g.stride[1] == 1 || g.stride[1] == 2) && st[3] == 1;
          const int64_t s0 = g.stride[0], y0 = i * g.dil[0] - g.pad[0];  // iy = oy * s0 + y0
          const int64_t plo = std::clamp<int64_t>(y0 >= 0 ? 0 : (-y0 + s0 - 1) / s0, 0, g.oh);
          const int64_t phi =
              std::clamp<int64_t>(g.h - y0 <= 0 ? 0 : (g.h - y0 + s0 - 1) / s0, plo, g.oh);
          for (int64_t b = 0; b < g.n; ++b) {
            const T* plane = xp + b * st[0] + (grp * cg + c) * st[1];
            if (rows) {
              std::fill(cols, cols + g.oh * g.ow, T(0));
              if (phi > plo)
                kernels::copy_rows(plane + (plo * s0 + y0) * st[2] + x0, s0 * st[2],
                                   static_cast<int>(g.stride[1]), cols + plo * g.ow + lo, g.ow,
                                   hi - lo, phi - plo);
              cols += g.oh * g.ow;
              continue;
            }
            for (int64_t oy = 0; oy < g.oh; ++oy, cols += g.ow) {
              const int64_t iy = oy * g.stride[0] - g.pad[0] + i * g.dil[0];
              if (iy < 0 || iy >= g.h) {
                std::fill(cols, cols + g.ow, T(0));
                continue;
              }
              std::fill(cols, cols + lo, T(0));
              std::fill(cols + hi, cols + g.ow, T(0));
              if (hi == lo) continue;
              const T* src = plane + iy * st[2] + x0 * st[3];
              for (int64_t ox = lo; ox < hi; ++ox, src += step) cols[ox] = *src;
            }
          }
        }
}

// res [nch, N*OHW] (the GEMM's [G, Og, N*OHW]) -> channels [ch0, ch0 + nch) of out
// [N, cout, OHW], plus bias.
template <class T>
void scatter_conv(const T* res, T* out, const ConvGeom& g, int64_t cout, int64_t ch0, int64_t nch,
                  const std::vector<double>& bias) {
  const int64_t hw = g.oh * g.ow;
  for (int64_t c = 0; c < nch; ++c) {
    const int64_t ch = ch0 + c;
    const T bv = static_cast<T>(bias[ch]);
    const T* src = res + c * g.n * hw;
    for (int64_t b = 0; b < g.n; ++b) {
      T* dst = out + (b * cout + ch) * hw;
      for (int64_t p = 0; p < hw; ++p) dst[p] = src[b * hw + p] + bv;
    }
  }
}

// Output length of a pool over n (input length L, padding p), room = L + 2p - d(k-1) - 1 >= 0.
// ceil_mode (torch's rule): ceil(room / s) + 1, less one if the last window would start at or past
// L + p, that is in the right padding only. Windows past the end take the elements that exist.
// room < 0 (a window longer than the padded input) leaves ceil_mode one window when room > -s.
int64_t pool_out(int64_t room, int64_t s, int64_t n, int64_t p, bool ceil_mode) {
  int64_t steps = room / s;  // rounded to zero: floor for room >= 0
  if (room % s != 0 && room < 0) --steps;
  if (ceil_mode && room % s != 0) {
    ++steps;
    int64_t last_start;  // steps * s; on overflow it is certainly past n + p (<= INT64_MAX)
    if (__builtin_mul_overflow(steps, s, &last_start) || last_start >= n + p) --steps;
  }
  return steps + 1;
}

struct PoolGeom {
  int64_t n, c, h, w, oh, ow;
  std::array<int64_t, 2> k, stride, pad, dil;
};

// x: [C, H, W] or [N, C, H, W] (rank checked by the caller), a (per-set, `kind`) shape.
PoolGeom pool_geom(const char* op, const char* kind, const Shape& x, const OpAttrs& a,
                   bool with_dilation) {
  PoolGeom g{};
  g.k = pair_param(op, "kernel_size", a.sizes, 1);
  g.stride = a.stride.empty() ? g.k : pair_param(op, "stride", a.stride, 1);
  g.pad = pair_param(op, "padding", a.padding.empty() ? IntList{0} : a.padding, 0);
  g.dil = with_dilation
              ? pair_param(op, "dilation", a.dilation.empty() ? IntList{1} : a.dilation, 1)
              : std::array<int64_t, 2>{1, 1};
  for (int d = 0; d < 2; ++d)
    if (g.pad[d] > g.k[d] / 2)
      throw_error<ValueError>("[", op,
                              "] padding should be at most half of kernel size, got padding ",
                              a.padding, " and kernel_size ", a.sizes);
  const size_t r = x.size();
  g.n = r == 4 ? x[0] : 1;
  g.c = x[r - 3];
  g.h = x[r - 2];
  g.w = x[r - 1];
  const int64_t ny = window_room(op, x, g.h, g.pad[0], g.k[0], g.dil[0]);
  const int64_t nx = window_room(op, x, g.w, g.pad[1], g.k[1], g.dil[1]);
  g.oh = pool_out(ny, g.stride[0], g.h, g.pad[0], a.flag);  // flag: ceil_mode
  g.ow = pool_out(nx, g.stride[1], g.w, g.pad[1], a.flag);
  if (g.oh < 1 || g.ow < 1)
    throw_error<ValueError>("[", op, "] input of ", kind, " ", x, " is too small for kernel ",
                            a.sizes, " with padding ", g.pad[0], "x", g.pad[1], " and dilation ",
                            g.dil[0], "x", g.dil[1], (a.flag ? " (ceil_mode)" : ""));
  return g;
}

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
               const OpAttrs& a) {
  const T* xp = x.data<T>();
  const Strides& st = x.strides();
  // avg's divisor, torch's: the window clipped to the padded input (count_include_pad), or to
  // the input, or divisor_override. In doubles: a huge kernel's size does not overflow.
  auto divisor = [&](int64_t y0, int64_t x0, int64_t ny, int64_t nx) {
    if (a.divisor != 0) return static_cast<double>(a.divisor);
    if (!a.count_include_pad) return static_cast<double>(ny) * static_cast<double>(nx);
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
    const double div = a.divisor != 0 ? static_cast<double>(a.divisor) : static_cast<double>(K * K);
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

std::vector<Tensor> pool_impl(const char* op, std::span<const Tensor> in, const OpAttrs& a,
                              bool is_max) {
  const Tensor& x = in[0];
  Tensor x4 = as_4d(op, x);
  check_floating(op, x);
  PoolGeom g = pool_geom(op, shape_word(), x.shape(), a, is_max);
  Tensor out = Tensor::empty({g.n, g.c, g.oh, g.ow}, x.dtype());
  const bool with_indices = is_max && a.with_indices;
  Tensor idx = with_indices ? Tensor::empty(out.shape(), DType::Int64) : Tensor();
  int64_t* ip = with_indices ? idx.data<int64_t>() : nullptr;
  count_kernel(KernelKind::Other);
  if (out.numel() > 0) {
    if (x.dtype() == DType::Float32)
      pool_loop<float>(x4, out.data<float>(), ip, g, is_max, a);
    else
      pool_loop<double>(x4, out.data<double>(), ip, g, is_max, a);
  }
  auto shaped = [&](const Tensor& t) { return x.dim() == 3 ? t.squeeze(0) : t; };
  if (with_indices) return {shaped(out), shaped(idx)};
  return {shaped(out)};
}

}  // namespace

namespace impl {

void check_channels(const char* op, const char* what, const Shape* t, int64_t c, const char* kind,
                    const Shape& xs) {
  if (t && (t->size() != 1 || (*t)[0] != c))
    throw_error<ValueError>("[", op, "] ", what, " of ", kind, " ", *t, " does not match input of ",
                            kind, " ", xs, " (expected [", c, "])");
}

void check_batch_norm(const char* kind, const Shape& x, const Shape* rm, const Shape* rv,
                      const Shape* w, const Shape* b, bool training) {
  if (x.size() < 2)
    throw_error<ValueError>("[batch_norm] expects an input [N, C, *] of at least 2 dims, got ",
                            kind, " ", x);
  check_channels("batch_norm", "running_mean", rm, x[1], kind, x);
  check_channels("batch_norm", "running_var", rv, x[1], kind, x);
  check_channels("batch_norm", "weight", w, x[1], kind, x);
  check_channels("batch_norm", "bias", b, x[1], kind, x);
  // as torch: an empty batch passes (empty output, running stats unchanged); one value does not
  const bool one_value =
      x[0] == 1 && std::all_of(x.begin() + 2, x.end(), [](int64_t d) { return d == 1; });
  if (training && one_value)
    throw_error<ValueError>(
        "[batch_norm] expected more than 1 value per channel when training, got input of ", kind,
        " ", x);
}

void check_layer_norm(const char* what, const Shape& x, const Shape& ns, const Shape* w,
                      const Shape* b) {
  if (ns.empty())
    throw_error<ValueError>("[layer_norm] normalized_shape must have at least one dim");
  const size_t nd = ns.size();
  if (x.size() < nd || !std::equal(ns.begin(), ns.end(), x.end() - nd))
    throw_error<ValueError>("[layer_norm] input of ", what, " ", x,
                            " does not end with normalized_shape ", ns);
  for (const Shape* t : {w, b})
    if (t && *t != ns)
      throw_error<ValueError>("[layer_norm] ", t == w ? "weight" : "bias", " of ", what, " ", *t,
                              " does not match normalized_shape ", ns);
}

std::vector<Tensor> layer_norm_impl(std::span<const Tensor> in, const OpAttrs& a) {
  const Tensor& x = in[0];
  const Tensor w = opt_input(in, 1), b = opt_input(in, 2);
  const Shape& ns = a.sizes;
  check_floating("layer_norm", x);
  check_same_dtype("layer_norm", x, w, "weight");
  check_same_dtype("layer_norm", x, b, "bias");
  // a.flag (vmap's rule with per-set weights): x [a.sets, ...], w and b [a.sets, *ns], each set's
  // rows with its own, so a set's bits are those of its call alone
  const bool stacked = a.flag;
  const int64_t sets = stacked ? a.sets : 1;
  Shape stacked_ns = ns;
  stacked_ns.insert(stacked_ns.begin(), sets);
  for (const Tensor* t : {&w, &b})
    if (stacked && t->defined() && t->shape() != stacked_ns)
      throw_error<ValueError>("[layer_norm] weight or bias of shape ", t->shape(),
                              " is not one per set (", stacked_ns, ")");
  check_layer_norm(shape_word(), x.shape(), ns, stacked ? nullptr : shape_or_null(w),
                   stacked ? nullptr : shape_or_null(b));
  if (stacked && (x.dim() == 0 || x.size(0) != sets))
    throw_error<ValueError>("[layer_norm] input of shape ", x.shape(), " is not ", sets, " sets");
  const int64_t d = shape_numel(ns);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  count_kernel(KernelKind::Other);
  if (out.numel() == 0) return {out};
  const int64_t rows = x.numel() / d;
  std::vector<double> wv = values_or(w.defined() ? w.reshape({-1}) : w, sets * d, 1.0);
  std::vector<double> bv = values_or(b.defined() ? b.reshape({-1}) : b, sets * d, 0.0);
  Tensor xc = x.contiguous();
  if (x.dtype() == DType::Float32)
    layer_norm_loop(xc.data<float>(), out.data<float>(), rows, d, wv, bv, a.alpha, rows / sets);
  else
    layer_norm_loop(xc.data<double>(), out.data<double>(), rows, d, wv, bv, a.alpha, rows / sets);
  return {out};
}

std::vector<Tensor> batch_norm_impl(std::span<const Tensor> in, const OpAttrs& a) {
  const Tensor& x = in[0];
  const Tensor rm = opt_input(in, 1), rv = opt_input(in, 2);
  const Tensor w = opt_input(in, 3), b = opt_input(in, 4);
  const bool training = a.training;
  const double momentum = a.alpha, eps = a.beta;
  check_batch_norm(shape_word(), x.shape(), shape_or_null(rm), shape_or_null(rv), shape_or_null(w),
                   shape_or_null(b), training);
  check_floating("batch_norm", x);
  const int64_t c = x.size(1);
  check_same_dtype("batch_norm", x, w, "weight");
  check_same_dtype("batch_norm", x, b, "bias");
  check_same_dtype("batch_norm", x, rm, "running_mean");
  check_same_dtype("batch_norm", x, rv, "running_var");
  if (!training && (!rm.defined() || !rv.defined()))
    throw_error<ValueError>("[batch_norm] running_mean and running_var must be given in eval mode");
  if (rm.defined() != rv.defined())
    throw_error<ValueError>("[batch_norm] give both running_mean and running_var or neither");
  const int64_t n = x.size(0);
  const int64_t s = x.dim() > 2 ? shape_numel(Shape(x.shape().begin() + 2, x.shape().end())) : 1;
  const int64_t per_channel = n * s;
  std::vector<double> mean(c), var(c);
  if (!training) {
    mean = rm.to_vector<double>();
    var = rv.to_vector<double>();
  }
  std::vector<double> wv = values_or(w, c, 1.0), bv = values_or(b, c, 0.0);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  count_kernel(KernelKind::Other);
  Tensor xc = x.contiguous();
  if (out.numel() > 0) {
    if (x.dtype() == DType::Float32)
      batch_norm_loop(xc.data<float>(), out.data<float>(), n, c, s, training, mean, var, wv, bv,
                      eps);
    else
      batch_norm_loop(xc.data<double>(), out.data<double>(), n, c, s, training, mean, var, wv, bv,
                      eps);
  }
  if (training && rm.defined() && per_channel > 0) {
    // PyTorch: running stats take the unbiased batch variance.
    std::vector<double> old_m = rm.to_vector<double>(), old_v = rv.to_vector<double>();
    const double unbias = static_cast<double>(per_channel) / static_cast<double>(per_channel - 1);
    for (int64_t ch = 0; ch < c; ++ch) {
      old_m[ch] = (1 - momentum) * old_m[ch] + momentum * mean[ch];
      old_v[ch] = (1 - momentum) * old_v[ch] + momentum * var[ch] * unbias;
    }
    write_values(rm, old_m);
    write_values(rv, old_v);
  }
  return {out};
}

namespace {
// conv2d's geometry and shape checks on x [C, H, W] or [N, C, H, W] (rank checked by the
// caller), w and b's (per-set, `kind`) shapes.
ConvGeom conv_geom(const char* kind, const Shape& x, const Shape& w, const Shape* b,
                   const OpAttrs& a) {
  if (w.size() != 4)
    throw_error<ValueError>("[conv2d] weight must be 4-D [out, in/groups, kh, kw], got ", kind, " ",
                            w);
  ConvGeom g{};
  g.stride = pair_param("conv2d", "stride", a.stride.empty() ? IntList{1} : a.stride, 1);
  g.pad = pair_param("conv2d", "padding", a.padding.empty() ? IntList{0} : a.padding, 0);
  g.dil = pair_param("conv2d", "dilation", a.dilation.empty() ? IntList{1} : a.dilation, 1);
  g.groups = a.groups;
  const size_t r = x.size();
  g.n = r == 4 ? x[0] : 1;
  g.cin = x[r - 3];
  g.h = x[r - 2];
  g.w = x[r - 1];
  g.cout = w[0];
  g.kh = w[2];
  g.kw = w[3];
  if (g.groups < 1) throw_error<ValueError>("[conv2d] groups must be >= 1, got ", g.groups);
  if (g.cin % g.groups != 0 || g.cout % g.groups != 0 || w[1] * g.groups != g.cin)
    throw_error<ValueError>("[conv2d] input of ", kind, " ", x, " and weight of ", kind, " ", w,
                            " do not match with groups=", g.groups,
                            " (expected weight [out, in/groups, kh, kw], out divisible by groups)");
  check_channels("conv2d", "bias", b, g.cout, kind, x);
  if (g.kh == 0 || g.kw == 0)
    throw_error<ValueError>("[conv2d] kernel size should be greater than zero, got weight of ",
                            kind, " ", w);
  const int64_t ny = window_room("conv2d", x, g.h, g.pad[0], g.kh, g.dil[0]);
  const int64_t nx = window_room("conv2d", x, g.w, g.pad[1], g.kw, g.dil[1]);
  if (ny < 0 || nx < 0)
    throw_error<ValueError>("[conv2d] kernel of ", kind, " ", w,
                            " (with dilation) is larger than the padded input of ", kind, " ", x);
  g.oh = ny / g.stride[0] + 1;
  g.ow = nx / g.stride[1] + 1;
  return g;
}
}  // namespace

void throw_embedding_index(int64_t v, const char* kind, const Shape& w) {
  throw_error<IndexError>("[embedding] index ", v, " is out of range for ", w[0],
                          " embeddings (weight of ", kind, " ", w, ")");
}

void check_pool2d(const char* op, const char* kind, const Shape& x, const OpAttrs& a,
                  bool with_dilation) {
  pool_geom(op, kind, x, a, with_dilation);
}

void check_conv2d(const char* kind, const Shape& x, const Shape& w, const Shape* b,
                  const OpAttrs& a) {
  conv_geom(kind, x, w, b, a);
}

std::vector<Tensor> conv2d_impl(std::span<const Tensor> in, const OpAttrs& a) {
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const Tensor b = opt_input(in, 2);
  Tensor x4 = as_4d("conv2d", x);
  check_floating("conv2d", x);
  check_same_dtype("conv2d", x, w, "weight");
  check_same_dtype("conv2d", x, b, "bias");
  // `sets` banks of filters over the one input (vmap's ensemble on a shared input): the input's
  // columns are made once, and each bank's GEMM is the one a call with that bank alone makes
  // (one GEMM of all banks' rows would round differently, so chunking would change the bits)
  const int64_t sets = a.sets;
  if (sets < 1 || w.dim() != 4 || w.size(0) % sets != 0 ||
      (b.defined() && b.dim() == 1 && b.size(0) % sets != 0))
    throw_error<ValueError>("[conv2d] weight of shape ", w.shape(), " and bias of shape ",
                            b.defined() ? b.shape() : Shape{}, " do not split into ", sets,
                            " sets of filters");
  Shape ws = w.shape(), bs = b.defined() ? b.shape() : Shape{};
  ws[0] /= sets;
  if (b.defined() && b.dim() == 1) bs[0] /= sets;
  const ConvGeom g = conv_geom(shape_word(), x.shape(), ws, b.defined() ? &bs : nullptr, a);
  const int64_t ckk = (g.cin / g.groups) * g.kh * g.kw, l = g.n * g.oh * g.ow;
  const int64_t og = g.cout / g.groups;

  const int64_t cout = sets * g.cout;
  Tensor out = Tensor::empty({g.n, cout, g.oh, g.ow}, x.dtype());
  std::vector<double> bias = values_or(b, cout, 0.0);
  count_kernel(KernelKind::Conv);
  if (out.numel() == 0) return {x.dim() == 3 ? out.squeeze(0) : out};
  // Groups a block at a time, the block's columns about the size of the L2 cache: vmap folds
  // the sets of a per-set input into groups, and all their columns at once outgrew the cache
  // (16 sets of a 16-channel 3x3 layer on 8 32x32 images: 75 MB).
  const int64_t group_bytes = std::max<int64_t>(ckk * l * dtype_size(x.dtype()), 1);
  const int64_t block = std::clamp<int64_t>((int64_t{1} << 20) / group_bytes, 1, g.groups);
  for (int64_t g0 = 0; g0 < g.groups; g0 += block) {
    const int64_t gb = std::min(block, g.groups - g0);
    Tensor cols = Tensor::empty({gb, ckk, l}, x.dtype());
    if (x.dtype() == DType::Float32)
      im2col<float>(x4, g, g0, g0 + gb, cols.data<float>());
    else
      im2col<double>(x4, g, g0, g0 + gb, cols.data<double>());
    for (int64_t s = 0; s < sets; ++s) {
      // [gb, Og, Cg*kh*kw] @ [gb, Cg*kh*kw, N*OH*OW]: the block's groups in one batched GEMM
      const int64_t ch0 = s * g.cout + g0 * og;  // the block's first output channel
      Tensor bank = w.narrow(0, ch0, gb * og).reshape({gb, og, ckk});
      Tensor res = kernels::bmm(bank, cols);
      if (x.dtype() == DType::Float32)
        scatter_conv<float>(res.data<float>(), out.data<float>(), g, cout, ch0, gb * og, bias);
      else
        scatter_conv<double>(res.data<double>(), out.data<double>(), g, cout, ch0, gb * og, bias);
    }
  }
  return {x.dim() == 3 ? out.squeeze(0) : out};
}

std::vector<Tensor> max_pool2d_impl(std::span<const Tensor> in, const OpAttrs& a) {
  return pool_impl("max_pool2d", in, a, true);
}

std::vector<Tensor> avg_pool2d_impl(std::span<const Tensor> in, const OpAttrs& a) {
  return pool_impl("avg_pool2d", in, a, false);
}

std::vector<Tensor> embedding_impl(std::span<const Tensor> in, const OpAttrs&) {
  const Tensor& idx = in[0];
  const Tensor& w = in[1];
  if (idx.dtype() != DType::Int64)
    throw_error<TypeError>("[embedding] indices must be int64, got ", idx.dtype(), " of shape ",
                           idx.shape());
  if (w.dim() != 2)
    throw_error<ValueError>("[embedding] weight must be 2-D [num_embeddings, dim], got ",
                            w.shape());
  const int64_t e = w.size(0), d = w.size(1);
  std::vector<int64_t> ids = idx.to_vector<int64_t>();
  for (int64_t v : ids)
    if (v < 0 || v >= e) throw_embedding_index(v, shape_word(), w.shape());
  Shape shape = idx.shape();
  shape.push_back(d);
  Tensor out = Tensor::empty(shape, w.dtype());
  count_kernel(KernelKind::Other);
  if (out.numel() == 0) return {out};
  const int64_t s0 = w.stride(0), s1 = w.stride(1);
  visit_dtype(w.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* wp = w.data<T>();
    T* op = out.data<T>();
    for (size_t i = 0; i < ids.size(); ++i)
      for (int64_t j = 0; j < d; ++j)
        op[static_cast<int64_t>(i) * d + j] = wp[ids[i] * s0 + j * s1];
  });
  return {out};
}

}  // namespace impl

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  OpAttrs a;
  a.sizes = normalized_shape;
  a.alpha = eps;
  return call_op1(OpId::layer_norm, {x, weight, bias}, a);
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  OpAttrs a;
  a.training = training;
  a.alpha = momentum;
  a.beta = eps;
  return call_op1(OpId::batch_norm, {x, running_mean, running_var, weight, bias}, a);
}

ConvPadding::ConvPadding(const std::string& m) : mode(m) {
  if (mode != "same" && mode != "valid")
    throw_error<ValueError>("[conv2d] invalid padding string '", mode,
                            "', should be one of 'valid' or 'same'");
}

std::array<int64_t, 4> conv_same_padding(int64_t kh, int64_t kw, int64_t dh, int64_t dw,
                                         const char* op) {
  int64_t th = 0, tw = 0;
  if (__builtin_mul_overflow(dh, kh - 1, &th) || __builtin_mul_overflow(dw, kw - 1, &tw))
    throw_error<ValueError>("[", op, "] padding='same' with kernel_size (", kh, ", ", kw,
                            ") and dilation (", dh, ", ", dw, ") overflows int64");
  return {tw / 2, tw - tw / 2, th / 2, th - th / 2};
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const IntOrList& stride,
              const ConvPadding& padding, const IntOrList& dilation, int64_t groups) {
  // the op reads an empty list as the default; from a caller it is a mistake, as in torch
  auto refuse_empty = [](const char* what, const IntList& v) {
    if (v.empty()) throw_error<ValueError>("[conv2d] ", what, " must have 1 or 2 values, got []");
  };
  refuse_empty("stride", stride.values);
  refuse_empty("dilation", dilation.values);
  if (padding.mode.empty()) refuse_empty("padding", padding.values);
  OpAttrs a;
  a.stride = stride.values;
  a.padding = padding.mode.empty() ? padding.values : IntList{0, 0};
  a.dilation = dilation.values;
  a.groups = groups;
  const IntList& d = dilation.values;
  // what the op would refuse (no weight, one not 4-D or with an empty kernel, a dilation not
  // positive) it refuses with the shapes
  if (padding.mode == "same" && weight.defined() && weight.dim() == 4 && weight.size(2) > 0 &&
      weight.size(3) > 0 && (d.size() == 1 || d.size() == 2) &&
      std::all_of(d.begin(), d.end(), [](int64_t v) { return v > 0; })) {
    if (std::any_of(a.stride.begin(), a.stride.end(), [](int64_t s) { return s != 1; }))
      throw_error<ValueError>("[conv2d] padding='same' is not supported for strided convolutions");
    const auto p = conv_same_padding(weight.size(2), weight.size(3), d[0], d.back());
    if (p[0] != p[1] || p[2] != p[3])  // an odd total: its extra element goes last
      return call_op1(OpId::conv2d, {pad(x, {p[0], p[1], p[2], p[3]}), weight, bias}, a);
    a.padding = {p[2], p[0]};
  }
  return call_op1(OpId::conv2d, {x, weight, bias}, a);
}

namespace {
OpAttrs max_pool_attrs(const IntOrList& kernel_size, const IntOrList& stride,
                       const IntOrList& padding, const IntOrList& dilation, bool ceil_mode) {
  OpAttrs a;
  a.flag = ceil_mode;
  a.sizes = kernel_size.values;
  a.stride = stride.values;
  a.padding = padding.values;
  a.dilation = dilation.values;
  return a;
}
}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const IntOrList& kernel_size,
                                                   const IntOrList& stride,
                                                   const IntOrList& padding,
                                                   const IntOrList& dilation, bool ceil_mode) {
  OpAttrs a = max_pool_attrs(kernel_size, stride, padding, dilation, ceil_mode);
  a.with_indices = true;
  const Tensor in[] = {x};
  std::vector<Tensor> r = call_op(OpId::max_pool2d, in, a);
  return {r.at(0), r.at(1)};
}

Tensor max_pool2d(const Tensor& x, const IntOrList& kernel_size, const IntOrList& stride,
                  const IntOrList& padding, const IntOrList& dilation, bool ceil_mode) {
  return call_op1(OpId::max_pool2d, {x},
                  max_pool_attrs(kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool2d(const Tensor& x, const IntOrList& kernel_size, const IntOrList& stride,
                  const IntOrList& padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  if (divisor_override == 0)
    throw_error<ValueError>("[avg_pool2d] divisor_override must be nonzero, got 0 (input of shape ",
                            x.shape(), ")");
  OpAttrs a;
  a.flag = ceil_mode;
  a.count_include_pad = count_include_pad;
  a.divisor = divisor_override.value_or(0);
  a.sizes = kernel_size.values;
  a.stride = stride.values;
  a.padding = padding.values;
  return call_op1(OpId::avg_pool2d, {x}, a);
}

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  return call_op1(OpId::embedding, {indices, weight});
}

// Made of cat (constant) and index_select (the other modes), so vmap batches it through their
// rules.
Tensor pad(const Tensor& x, const IntList& pad, const std::string& mode, double value) {
  const int64_t dims = static_cast<int64_t>(pad.size()) / 2, rank = x.dim();
  if (pad.size() % 2 != 0)
    throw_error<ValueError>("[pad] padding length must be even, got ", pad, " for input of shape ",
                            x.shape());
  if (dims > rank)
    throw_error<ValueError>("[pad] padding ", pad, " is too long for input of shape ", x.shape());
  const bool constant = mode == "constant";
  if (!constant && mode != "reflect" && mode != "replicate" && mode != "circular")
    throw_error<ValueError>(
        "[pad] mode must be 'constant', 'reflect', 'replicate' or "
        "'circular', got '",
        mode, "'");
  if (!constant && !(dims >= 1 && dims <= 3 && rank == dims + 2) &&
      !(mode != "circular" && dims >= 1 && dims <= 3 && rank == dims + 1))
    throw_error<ValueError>("[pad] ", mode, " padding of ", dims, " dims takes an input of ",
                            mode == "circular" ? "" : std::to_string(dims + 1) + " or ", dims + 2,
                            " dims, got shape ", x.shape());
  Tensor y = x;
  for (int64_t i = 0; i < dims; ++i) {
    const int64_t d = rank - 1 - i, n = y.size(d);
    const int64_t lo = pad[2 * i], hi = pad[2 * i + 1];
    int64_t len = 0;
    if (lo < -n || hi < -n || __builtin_add_overflow(n, lo, &len) ||
        __builtin_add_overflow(len, hi, &len) || len < 0)
      throw_error<ValueError>("[pad] padding ", pad, " crops dim ", d, " of input of shape ",
                              x.shape(), " to a negative size, or grows it past int64");
    // the elements left after cropping: [c0, c0 + kept)
    const int64_t c0 = std::max<int64_t>(0, -lo), kept = n - c0 - std::max<int64_t>(0, -hi);
    if (constant) {
      // crop first, then the value blocks
      Tensor mid = y.narrow(d, c0, std::max<int64_t>(0, kept));
      if (lo <= 0 && hi <= 0) {
        y = mid;
        continue;
      }
      Shape block = y.shape();
      std::vector<Tensor> parts;
      if (lo > 0) {
        block[d] = lo;
        parts.push_back(full(block, value, y.dtype()));
      }
      parts.push_back(mid);
      if (hi > 0) {
        block[d] = hi;
        parts.push_back(full(block, value, y.dtype()));
      }
      y = cat(parts, d);
      continue;
    }
    if (mode == "reflect" && (lo >= n || hi >= n))
      throw_error<ValueError>("[pad] reflect padding ", pad, " should be less than dim ", d,
                              " of input of shape ", x.shape());
    if (mode == "circular" && (lo > n || hi > n))
      throw_error<ValueError>("[pad] circular padding ", pad, " wraps around dim ", d,
                              " of input of shape ", x.shape(), " more than once");
    // circular wraps around what is left after cropping, as torch; reflect and replicate
    // around the whole dim
    if ((mode == "circular" ? kept : n) <= 0 && len > 0)
      throw_error<ValueError>("[pad] ", mode, " padding ", pad, " of an empty dim ", d,
                              " of input of shape ", x.shape());
    std::vector<int64_t> idx;
    try {
      idx.resize(static_cast<size_t>(len));
    } catch (const std::exception&) {  // length_error or bad_alloc
      throw_error<RuntimeError>("[pad] cannot allocate the ", len, " indices of dim ", d,
                                " padded by ", pad, " (input of shape ", x.shape(), ")");
    }
    for (int64_t j = 0; j < len; ++j) {
      const int64_t i0 = j - lo;  // output j reads input i0, mapped into range
      int64_t s = i0;
      if (mode == "reflect")
        s = i0 < 0 ? -i0 : i0 >= n ? 2 * (n - 1) - i0 : i0;
      else if (mode == "replicate")
        s = std::clamp<int64_t>(i0, 0, n - 1);
      else
        s = c0 + ((i0 - c0) % kept + kept) % kept;
      idx[static_cast<size_t>(j)] = s;
    }
    y = index_select(y, d, tensor<int64_t>(idx, {len}));
  }
  return y;
}

}  // namespace td
