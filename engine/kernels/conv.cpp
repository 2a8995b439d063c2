// conv2d's loops around its GEMM: im2col (an input's receptive fields as the columns of a
// matrix) and conv_scatter (the GEMM's rows into the output's channels, plus bias).
#include <algorithm>
#include <cstdint>

#include "engine/kernels/kernels.h"
#include "engine/kernels/windows.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace td::kernels::TD_ISA {
namespace {

#ifdef __AVX512F__
// A register of every other element of [a, b] (even lanes), and the masks of a row's tail.
inline __m512 evens(__m512 a, __m512 b) {
  return _mm512_permutex2var_ps(
      a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b);
}
inline __m512d evens(__m512d a, __m512d b) {
  return _mm512_permutex2var_pd(a, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), b);
}
inline __m512 load_masked(const float* p, uint32_t m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512d load_masked(const double* p, uint32_t m) { return _mm512_maskz_loadu_pd(m, p); }
inline void store_masked(float* p, uint32_t m, __m512 v) { _mm512_mask_storeu_ps(p, m, v); }
inline void store_masked(double* p, uint32_t m, __m512d v) { _mm512_mask_storeu_pd(p, m, v); }
#endif

// dst[r * dst_rows + k] = src[r * src_rows + step * k] for k in [0, n), r in [0, rows), step 1
// or 2, reading no element past each row's src[step * (n - 1)]: all of a tap's rows at once
// (they are short: a call and a scalar tail per row cost more than the copy).
template <class T>
void copy_tap_rows(const T* src, int64_t src_rows, int step, T* dst, int64_t dst_rows, int64_t n,
                   int64_t rows) {
#ifdef __AVX512F__
  constexpr int64_t W = 64 / sizeof(T);  // lanes
  constexpr uint32_t all = (1u << W) - 1;
  auto mask = [](int64_t k) { return k >= W ? all : k <= 0 ? 0u : (1u << k) - 1; };
  // W outputs take step * (W - 1) + 1 inputs; the row's tail masked
  const int64_t full = n / W * W, rest = n - full;
  const uint32_t tail = mask(rest);
  if (step == 1) {
    for (int64_t r = 0; r < rows; ++r, src += src_rows, dst += dst_rows) {
      for (int64_t k = 0; k < full; k += W) store_masked(dst + k, all, load_masked(src + k, all));
      if (rest > 0) store_masked(dst + full, tail, load_masked(src + full, tail));
    }
    return;
  }
  if (step == 2) {
    const int64_t need = 2 * rest - 1;
    const uint32_t ma = mask(need), mb = mask(need - W);
    for (int64_t r = 0; r < rows; ++r, src += src_rows, dst += dst_rows) {
      for (int64_t k = 0; k < full; k += W)
        store_masked(dst + k, all,
                     evens(load_masked(src + 2 * k, all), load_masked(src + 2 * k + W, all >> 1)));
      if (rest > 0)
        store_masked(dst + full, tail,
                     evens(load_masked(src + 2 * full, ma), load_masked(src + 2 * full + W, mb)));
    }
    return;
  }
#endif
  for (int64_t r = 0; r < rows; ++r, src += src_rows, dst += dst_rows)
    for (int64_t k = 0; k < n; ++k) dst[k] = src[step * k];
}

// cols [grp1 - grp0, Cg*kh*kw, N*OH*OW]: groups [grp0, grp1)'s receptive fields, zero where the
// window hits padding.
template <class T>
void im2col_typed(const Tensor& x, const ConvGeom& g, int64_t grp0, int64_t grp1, T* cols) {
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
                copy_tap_rows(plane + (plo * s0 + y0) * st[2] + x0, s0 * st[2],
                              static_cast<int>(g.stride[1]), cols + plo * g.ow + lo, g.ow, hi - lo,
                              phi - plo);
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
void conv_scatter_typed(const T* res, T* out, const ConvGeom& g, int64_t cout, int64_t ch0,
                        int64_t nch, const double* bias) {
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

}  // namespace

void im2col(const Tensor& x, const ConvGeom& g, int64_t grp0, int64_t grp1, const Tensor& cols) {
  if (x.dtype() == DType::Float32)
    im2col_typed<float>(x, g, grp0, grp1, cols.data<float>());
  else
    im2col_typed<double>(x, g, grp0, grp1, cols.data<double>());
}

void conv_scatter(const Tensor& res, const Tensor& out, const ConvGeom& g, int64_t ch0, int64_t nch,
                  const double* bias) {
  const int64_t cout = out.size(1);
  if (out.dtype() == DType::Float32)
    conv_scatter_typed<float>(res.data<float>(), out.data<float>(), g, cout, ch0, nch, bias);
  else
    conv_scatter_typed<double>(res.data<double>(), out.data<double>(), g, cout, ch0, nch, bias);
}

}  // namespace td::kernels::TD_ISA
