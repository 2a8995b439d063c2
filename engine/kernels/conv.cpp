// conv2d's loops around its GEMM: conv_planes, whose GEMM reads the receptive fields from the
// input itself (or a padded copy of it), or im2col (an input's receptive fields as the columns
// of a matrix) and conv_scatter (the GEMM's rows into the output's channels, plus bias).
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/kernels/small_gemm.h"
#include "engine/kernels/windows.h"

#if defined(__AVX512F__) || defined(__AVX2__)
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

#ifdef __AVX512F__
// Whether copy_short_rows takes x's rows (unit stride) for g.
inline bool short_rows_fit(const ConvGeom& g) { return g.w <= 32 && g.ow <= 16 && g.kw <= 16; }

// PatchPanels' copy of one image's group of channels when an output row fits one register
// (ow <= 16) and an input row two (w <= 32): each input row is loaded once and gives every kx
// its output row by one zero-masking permute of two registers, which hold either two input
// rows (w <= 16, ow <= 8: two output rows per store) or the two halves of one. Short rows cost
// more in row loops, calls and fills than in moving bytes (stride 2's rows of 8); the layout and
// the values are the general copy's below.
void copy_short_rows(const float* src, int64_t cs, int64_t rs, const ConvGeom& g, int64_t ph,
                     float* dst) {
  const int64_t cg = g.cin / g.groups, s0 = g.stride[0], ow = g.ow;
  const int64_t pair = g.w <= 16 && 2 * ow <= 16 ? 2 : 1;  // output rows per register
  constexpr int64_t kMaxKw = 16;
  __m512i idx[kMaxKw];
  __mmask16 keep[kMaxKw];  // lanes that read the input (the others are padding: zero)
  for (int64_t kx = 0; kx < g.kw; ++kx) {
    alignas(64) int32_t lanes[16] = {};
    unsigned m = 0;
    for (int64_t q = 0; q < pair; ++q)
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t ix = j * g.stride[1] + kx * g.dil[1] - g.pad[1];
        if (ix < 0 || ix >= g.w) continue;
        lanes[q * ow + j] = static_cast<int32_t>(q * 16 + ix);  // 16 and up: the second register
        m |= 1u << (q * ow + j);
      }
    idx[kx] = _mm512_load_si512(lanes);
    keep[kx] = static_cast<__mmask16>(m);
  }
  const int64_t w0 = std::min<int64_t>(g.w, 16);
  const auto first = static_cast<__mmask16>((1u << w0) - 1);
  const auto second = static_cast<__mmask16>((1u << (g.w - w0)) - 1);
  const auto one_row = static_cast<__mmask16>((1u << ow) - 1);
  const auto both = static_cast<__mmask16>((1u << (pair * ow)) - 1);
  const int64_t block = ph * ow;  // one (c, kx, phase)'s rows in dst
  for (int64_t c = 0; c < cg; ++c)
    for (int64_t a = 0; a < s0; ++a) {
      // copy row r of phase a is input row r * s0 + a - p0 (zeros outside the input)
      auto in_row = [&](int64_t r) -> const float* {
        const int64_t iy = r * s0 + a - g.pad[0];
        return r < ph && iy >= 0 && iy < g.h ? src + c * cs + iy * rs : nullptr;
      };
      auto load = [](const float* p, __mmask16 m) {
        return p ? _mm512_maskz_loadu_ps(m, p) : _mm512_setzero_ps();
      };
      float* base = dst + (c * g.kw * s0 + a) * block;
      for (int64_t r = 0; r < ph; r += pair) {
        const float* p = in_row(r);
        const __m512 lo = load(p, first);
        const __m512 hi = pair == 2 ? load(in_row(r + 1), first) : load(p ? p + 16 : p, second);
        const __mmask16 store = r + pair <= ph ? both : one_row;
        for (int64_t kx = 0; kx < g.kw; ++kx)
          _mm512_mask_storeu_ps(base + kx * s0 * block + r * ow, store,
                                _mm512_maskz_permutex2var_ps(keep[kx], lo, idx[kx], hi));
      }
    }
}
#elif defined(__AVX2__)
inline bool short_rows_fit(const ConvGeom& g) { return g.w <= 16 && g.ow <= 8 && g.kw <= 16; }

// AVX2's form of the copy above, for input rows of up to 16 and output rows of up to 8: each
// input row loaded once as two registers, each kx's output row one permute of each and a blend.
void copy_short_rows(const float* src, int64_t cs, int64_t rs, const ConvGeom& g, int64_t ph,
                     float* dst) {
  const int64_t cg = g.cin / g.groups, s0 = g.stride[0], ow = g.ow;
  constexpr int64_t kMaxKw = 16;
  __m256i idx[kMaxKw];
  __m256 from_hi[kMaxKw], keep[kMaxKw];  // lanes read from the second register; from the input
  for (int64_t kx = 0; kx < g.kw; ++kx) {
    alignas(32) int32_t lanes[8] = {}, hi[8] = {}, in[8] = {};
    for (int64_t j = 0; j < ow; ++j) {
      const int64_t ix = j * g.stride[1] + kx * g.dil[1] - g.pad[1];
      if (ix < 0 || ix >= g.w) continue;
      lanes[j] = static_cast<int32_t>(ix % 8);
      hi[j] = ix >= 8 ? -1 : 0;
      in[j] = -1;
    }
    idx[kx] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
    from_hi[kx] = _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(hi)));
    keep[kx] = _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(in)));
  }
  auto first_n = [](int64_t n) {  // a maskload/maskstore mask of the first n lanes
    alignas(32) int32_t m[8];
    for (int64_t i = 0; i < 8; ++i) m[i] = i < n ? -1 : 0;
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
  };
  const int64_t w0 = std::min<int64_t>(g.w, 8);
  const __m256i first = first_n(w0), second = first_n(g.w - w0), out_lanes = first_n(ow);
  const int64_t block = ph * ow;  // one (c, kx, phase)'s rows in dst
  for (int64_t c = 0; c < cg; ++c)
    for (int64_t a = 0; a < s0; ++a) {
      float* base = dst + (c * g.kw * s0 + a) * block;
      for (int64_t r = 0; r < ph; ++r) {
        const int64_t iy = r * s0 + a - g.pad[0];  // zeros outside the input
        __m256 lo = _mm256_setzero_ps(), hi = lo;
        if (iy >= 0 && iy < g.h) {
          const float* p = src + c * cs + iy * rs;
          lo = _mm256_maskload_ps(p, first);
          hi = _mm256_maskload_ps(p + 8, second);
        }
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          const __m256 v = _mm256_and_ps(
              keep[kx], _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx[kx]),
                                         _mm256_permutevar8x32_ps(hi, idx[kx]), from_hi[kx]));
          float* d = base + kx * s0 * block + r * ow;
          if (ow == 8)
            _mm256_storeu_ps(d, v);
          else
            _mm256_maskstore_ps(d, out_lanes, v);
        }
      }
    }
}
#endif

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

// dst[0, n) = src[0, n) for a run of a panel row: vectors, the last one overlapping the one
// before (a call to memcpy per panel row cost more than the copy).
inline void copy_short(const float* src, float* dst, int64_t n) {
  using V = xsimd::batch<float>;
  constexpr int64_t W = static_cast<int64_t>(V::size);
  if (n < W) {
    for (int64_t j = 0; j < n; ++j) dst[j] = src[j];
    return;
  }
  for (int64_t j = 0; j + W < n; j += W) V::load_unaligned(src + j).store_unaligned(dst + j);
  V::load_unaligned(src + n - W).store_unaligned(dst + n - W);
}

// The receptive fields of an image's group of input channels, a panel of output pixels at a
// time: row p = (c * kh + ky) * kw + kx of a panel holds x[c, iy, ix] for its pixels (oy, ox),
// iy = oy * s0 - p0 + ky * d0, ix = ox * s1 - p1 + kx * d1, zero in the padding: the values
// im2col would write, so the product's bits are the same. Tap p of pixel q = oy * ow + ox is
// read at plane + offs[p] + q, so a panel's rows lie in place: in x itself for a 1x1 (or kh x 1)
// convolution without padding or stride on contiguous rows, else in a copy of the image's group
// of channels made for it, kw times x's size rather than im2col's kh * kw: for each channel and
// kx, the padded rows' elements ix = ox * s1 - p1 + kx * d1 for ox < ow, the rows split into s0
// phases (rows a, a + s0, ...), so that one output row's taps follow the previous row's.
class PatchPanels final : public PanelSource {
 public:
  PatchPanels(const Tensor& x, const ConvGeom& g) : g_(g), x_(x.data<float>()) {
    const Strides& st = x.strides();
    ns_ = st[0], xcs_ = st[1], xrs_ = st[2], xss_ = st[3];
    const int64_t cg = g.cin / g.groups, s0 = g.stride[0];
    copy_ = !(g.kw == 1 && s0 == 1 && g.stride[1] == 1 && g.pad[0] == 0 && g.pad[1] == 0 &&
              xss_ == 1 && xrs_ == g.w);
    // a phase's rows: enough for every tap's (oy + ky * d0 / s0 < ph)
    ph_ = g.oh + (g.kh - 1) * g.dil[0] / s0;
    if (copy_) {
      // on a 64-byte line: a panel row of an output row that starts one is read whole
      buf_.resize(cg * g.kw * s0 * ph_ * g.ow + 16);
      const auto at = reinterpret_cast<uintptr_t>(buf_.data());
      copy_at_ = buf_.data() + (64 - at % 64) % 64 / sizeof(float);
    }
    const int64_t cs = copy_ ? g.kw * s0 * ph_ * g.ow : xcs_;
    offs_.reserve(cg * g.kh * g.kw);
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t ky = 0; ky < g.kh; ++ky)
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          const int64_t y = ky * g.dil[0];
          offs_.push_back(copy_ ? c * cs + ((kx * s0 + y % s0) * ph_ + y / s0) * g.ow
                                : c * cs + y * g.w);
        }
  }

  // The image's group of channels to read from, copied as laid out above when needed (not
  // again for the same image and group).
  void select(int64_t grp, int64_t img) {
    const float* src = x_ + ns_ * img + xcs_ * (g_.cin / g_.groups) * grp;
    if (!copy_) {
      plane_ = src;
      return;
    }
    plane_ = copy_at_;
    if (src == copied_) return;
    copied_ = src;
    const int64_t s0 = g_.stride[0], s1 = g_.stride[1], ow = g_.ow;
    float* dst = copy_at_;
#if defined(__AVX512F__) || defined(__AVX2__)
    if (xss_ == 1 && short_rows_fit(g_)) {
      copy_short_rows(src, xcs_, xrs_, g_, ph_, dst);
      return;
    }
#endif
    for (int64_t c = 0; c < g_.cin / g_.groups; ++c)
      for (int64_t kx = 0; kx < g_.kw; ++kx) {
        const int64_t x0 = kx * g_.dil[1] - g_.pad[1];  // ix = ox * s1 + x0
        const auto [lo, hi] = valid_range(ow, s1, g_.pad[1], kx * g_.dil[1], g_.w);
        for (int64_t a = 0; a < s0; ++a, dst += ph_ * ow) {
          // rows r with iy = r * s0 + a - p0 inside x: [r0, r1)
          const int64_t y0 = a - g_.pad[0];
          const int64_t r0 = std::min(ph_, y0 >= 0 ? 0 : (-y0 + s0 - 1) / s0);
          const int64_t r1 = std::clamp<int64_t>((g_.h - y0 + s0 - 1) / s0, r0, ph_);
          std::fill(dst, dst + ph_ * ow, 0.0f);
          if (hi > lo && r1 > r0)
            copy_tap_rows(src + c * xcs_ + (r0 * s0 + y0) * xrs_ + (lo * s1 + x0) * xss_, s0 * xrs_,
                          static_cast<int>(s1 * xss_), dst + r0 * ow + lo, ow, hi - lo, r1 - r0);
        }
      }
  }

  PanelRows pack(int64_t n0, int64_t nc, int64_t k0, int64_t kc, float* panel) const override {
    if (nc == kPanelCols) return {plane_ + n0, offs_.data() + k0};
    // the last panel, short: copied, so that nothing past the plane is read
    for (int64_t p = 0; p < kc; ++p) {
      float* dst = panel + p * kPanelCols;
      std::fill(dst + nc, dst + kPanelCols, 0.0f);
      copy_short(plane_ + offs_[k0 + p] + n0, dst, nc);
    }
    return {panel, nullptr};
  }

 private:
  const ConvGeom& g_;
  const float* x_;
  int64_t ns_, xcs_, xrs_, xss_;  // x's strides
  bool copy_;
  int64_t ph_;  // a phase's rows in the copy
  std::vector<float> buf_;
  float* copy_at_ = nullptr;       // the copy, in buf_
  const float* plane_ = nullptr;   // the image's group: in x, or the copy
  const float* copied_ = nullptr;  // the group the copy holds
  std::vector<int64_t> offs_;
};

}  // namespace

void conv_planes(const Tensor& x, const ConvGeom& g, const float* w, const float* bias,
                 const double* bn_scale, const double* bn_shift, bool relu, const Tensor& out,
                 int64_t t0, int64_t t1) {
  const int64_t ckk = g.cin / g.groups * g.kh * g.kw, hw = g.oh * g.ow;
  const int64_t og = g.cout / g.groups, cout = out.size(1), banks = cout / g.cout;
  PatchPanels patches(x, g);
  float* po = out.data<float>();
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t bank = t % banks, img = t / banks % g.n, grp = t / (banks * g.n);
    const int64_t ch = bank * g.cout + grp * og;
    patches.select(grp, img);
    float* planes = po + (img * cout + ch) * hw;
    small_gemm_panels(w + ch * ckk, ckk, patches, bias ? bias + ch : nullptr, planes, hw, og, hw,
                      ckk, relu && !bn_scale);
    // the BatchNorm while the planes are in cache (a pass of its own over the whole output cost
    // conv_s2_bn16 6%)
    if (bn_scale)
      batch_norm_scale_shift(planes, planes, 1, og, hw, bn_scale + ch, bn_shift + ch, relu);
  }
}

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
