// conv2d's Winograd case, F(2x2, 3x3): float32, 3x3 filters, stride 1, dilation 1. Each 2x2
// block of outputs (a tile) is A^T [(G g G^T) . (B^T d B)] A for its 4x4 input patch d: 16
// element-wise products per tile and channel pair instead of the direct 36, done as 16 GEMMs
// [og, cg] @ [cg, tiles] over a block of tiles at a time.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>
#include <xsimd/xsimd.hpp>

#include "engine/kernels/kernels.h"
#include "engine/kernels/simd.h"
#include "engine/kernels/small_gemm.h"

#ifdef __AVX2__
#include <immintrin.h>
#endif

// The vectors below stay inside this file: no call passes them across an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace td::kernels::TD_ISA {
namespace {

// The transforms are vectors of tiles along a row: 8 lanes where AVX2 has them (a 16x16 output
// has 8 tiles per row: AVX-512's 16 lanes would be half empty), else the level's width. Adds
// and subtractions only, so the width does not change the bits.
#ifdef __AVX2__
using TV = xsimd::batch<float, xsimd::avx2>;
#else
using TV = xsimd::batch<float>;
#endif
constexpr int64_t TW = static_cast<int64_t>(TV::size);

// lo, hi = a[0], b[0], a[1], b[1], ...: xsimd 8's AVX zip_lo and zip_hi interleave within each
// 128-bit half only
inline void interleave(TV a, TV b, TV& lo, TV& hi) {
#ifdef __AVX2__
  const __m256 l = _mm256_unpacklo_ps(a, b), h = _mm256_unpackhi_ps(a, b);
  lo = _mm256_permute2f128_ps(l, h, 0x20);
  hi = _mm256_permute2f128_ps(l, h, 0x31);
#else
  lo = xsimd::zip_lo(a, b);
  hi = xsimd::zip_hi(a, b);
#endif
}

// The tile blocks' budget: the transformed inputs and
// products of a block (16 * (cg + og) floats per tile) stay in L2 between their passes.
constexpr int64_t kBlockBytes = 256 << 10;

struct Layout {
  int64_t cg, og, tiles_y, tiles_x, tiles;
  int64_t rows, half;  // the padded copy: rows per channel, elements per row phase
  int64_t block, ts;   // tiles per block, and the row stride of a block's matrices
  int64_t vs, ms;      // the plane strides of the 16 matrices of inputs and of products

  explicit Layout(const ConvGeom& g) {
    cg = g.cin / g.groups;
    og = g.cout / g.groups;
    tiles_y = (g.oh + 1) / 2;
    tiles_x = (g.ow + 1) / 2;
    tiles = tiles_y * tiles_x;
    rows = 2 * tiles_y + 2;
    half = tiles_x + 1 + TW;  // + TW: a vector read past the last tile stays inside
    const int64_t per_tile = 16 * (cg + og) * static_cast<int64_t>(sizeof(float));
    block = std::min(tiles, std::max(kPanelCols, kBlockBytes / per_tile / kPanelCols * kPanelCols));
    ts = block + TW;  // + TW: a vector stored past a block's last tile stays inside
    // + a line: planes a power of two apart shared a set of L1 between the transforms' 16 streams
    vs = cg * ts + 16;
    ms = og * ts + 16;
  }
};

// The exponent bits of a float: all ones for an inf or a NaN.
inline uint32_t exponent(float v) { return std::bit_cast<uint32_t>(v) & 0x7f800000u; }
constexpr uint32_t kNonFinite = 0x7f800000u;

// An image's group of channels, zero-padded and each row split into its even and odd elements
// (E[j] = row[2j], O[j] = row[2j + 1]): tile tx's columns 2tx .. 2tx + 3 are then E[tx],
// O[tx], E[tx + 1], O[tx + 1], a vector of tiles by contiguous loads. Returns whether every
// value copied is finite.
bool pad_split(const Tensor& x, const ConvGeom& g, const Layout& l, int64_t grp, int64_t img,
               float* dst) {
  const Strides& st = x.strides();
  const float* src = x.data<float>() + img * st[0] + grp * l.cg * st[1];
  std::fill(dst, dst + l.cg * l.rows * 2 * l.half, 0.0f);
  const int64_t ry0 = g.pad[0], rx0 = g.pad[1];  // padded row and column of x[0, 0]
  const int64_t h = std::min(g.h, l.rows - ry0), w = std::min(g.w, 2 * l.tiles_x + 2 - rx0);
  // x[iy, ix] goes to padded column q = ix + rx0: even ix to ev[ix / 2], odd ix to od[ix / 2]
  const int64_t ev = (rx0 & 1 ? l.half : 0) + rx0 / 2, od = (rx0 & 1 ? 0 : l.half) + (rx0 + 1) / 2;
  uint32_t top = 0;  // the largest exponent met
  for (int64_t c = 0; c < l.cg; ++c)
    for (int64_t iy = 0; iy < h; ++iy) {
      const float* s = src + c * st[1] + iy * st[2];
      float* row = dst + (c * l.rows + iy + ry0) * 2 * l.half;
      float* __restrict e = row + ev;
      float* __restrict o = row + od;
      auto split = [&](int64_t sx) {  // (loops the compiler vectorizes where sx is 1)
        for (int64_t k = 0; k < (w + 1) / 2; ++k) {
          e[k] = s[2 * k * sx];
          top = std::max(top, exponent(e[k]));
        }
        for (int64_t k = 0; k < w / 2; ++k) {
          o[k] = s[(2 * k + 1) * sx];
          top = std::max(top, exponent(o[k]));
        }
      };
      if (st[3] == 1)
        split(1);
      else
        split(st[3]);
    }
  return top != kNonFinite;
}

// Calls f(ty, tx, n, col) for the runs of tiles along a row that make up tiles [i0, i1) (in
// row-major order): n tiles from (ty, tx), at column col of the block.
template <class F>
void for_runs(const Layout& l, int64_t i0, int64_t i1, F&& f) {
  for (int64_t i = i0; i < i1;) {
    const int64_t ty = i / l.tiles_x, tx = i % l.tiles_x;
    const int64_t n = std::min(i1 - i, l.tiles_x - tx);
    f(ty, tx, n, i - i0);
    i += n;
  }
}

// v[e * l.vs + c * l.ts + col] = (B^T d B)[e / 4][e % 4] for tiles [i0, i1) (col = i - i0) of
// channel c's patches d in the padded copy p.
void transform_inputs(const float* p, const Layout& l, int64_t i0, int64_t i1, float* v) {
  const int64_t rs = 2 * l.half, es = l.vs;
  for_runs(l, i0, i1, [&](int64_t ty, int64_t tx, int64_t n, int64_t col) {
    for (int64_t c = 0; c < l.cg; ++c) {
      const float* r0 = p + (c * l.rows + 2 * ty) * rs + tx;
      float* dst = v + c * l.ts + col;
      for (int64_t j = 0; j < n; j += TW) {
        // B^T d along each of the patch's 4 rows (columns 0-3), then down the columns
        TV t[4][4];
        for (int k = 0; k < 4; ++k) {
          const float* e = r0 + k * rs + j;
          const float* o = e + l.half;
          const TV e0 = TV::load_unaligned(e), e1 = TV::load_unaligned(e + 1);
          const TV o0 = TV::load_unaligned(o), o1 = TV::load_unaligned(o + 1);
          t[k][0] = e0 - e1;
          t[k][1] = o0 + e1;
          t[k][2] = e1 - o0;
          t[k][3] = o0 - o1;
        }
        for (int m = 0; m < 4; ++m) {
          (t[0][m] - t[2][m]).store_unaligned(dst + (0 * 4 + m) * es + j);
          (t[1][m] + t[2][m]).store_unaligned(dst + (1 * 4 + m) * es + j);
          (t[2][m] - t[1][m]).store_unaligned(dst + (2 * 4 + m) * es + j);
          (t[1][m] - t[3][m]).store_unaligned(dst + (3 * 4 + m) * es + j);
        }
      }
    }
  });
}

// Output channel o's tiles [i0, i1): A^T m A from the products m[e * l.ms + o * l.ts + col],
// plus bias, then ReLU, into its plane y [oh, ow]; the last tile's second row or column dropped
// where oh or ow is odd.
void transform_outputs(const float* m, const Layout& l, const ConvGeom& g, int64_t o, float bias,
                       bool relu, int64_t i0, int64_t i1, float* y) {
  const int64_t es = l.ms;
  const float* mo = m + o * l.ts;
  for_runs(l, i0, i1, [&](int64_t ty, int64_t tx, int64_t n, int64_t col) {
    const bool two_rows = 2 * ty + 1 < g.oh;
    for (int64_t j = 0; j < n; j += TW) {
      TV s[4][2];  // (m A) for each of the 4 rows
      for (int k = 0; k < 4; ++k) {
        const float* src = mo + k * 4 * es + col + j;
        const TV m0 = TV::load_unaligned(src), m1 = TV::load_unaligned(src + es);
        const TV m2 = TV::load_unaligned(src + 2 * es), m3 = TV::load_unaligned(src + 3 * es);
        s[k][0] = m0 + m1 + m2;
        s[k][1] = m1 - m2 - m3;
      }
      const TV b(bias);
      TV out[2][2];
      for (int q = 0; q < 2; ++q) {
        out[0][q] = s[0][q] + s[1][q] + s[2][q] + b;
        out[1][q] = s[1][q] - s[2][q] - s[3][q] + b;
        if (relu) {
          out[0][q] = relu_keep_nan(out[0][q]);
          out[1][q] = relu_keep_nan(out[1][q]);
        }
      }
      // output columns 2 (tx + j) .. : the two columns of each tile interleaved
      // (a block may end inside a row: its tiles past n are not this block's)
      const int64_t ox = 2 * (tx + j), cols = std::min({2 * TW, 2 * (n - j), g.ow - ox});
      for (int r = 0; r < (two_rows ? 2 : 1); ++r) {
        float* dst = y + (2 * ty + r) * g.ow + ox;
        TV lo, hi;
        interleave(out[r][0], out[r][1], lo, hi);
        if (cols == 2 * TW) {
          lo.store_unaligned(dst);
          hi.store_unaligned(dst + TW);
        } else {
          alignas(64) float buf[2 * TW];
          lo.store_aligned(buf);
          hi.store_aligned(buf + TW);
          std::memcpy(dst, buf, static_cast<size_t>(cols) * sizeof(float));
        }
      }
    }
  });
}

}  // namespace

bool winograd_pays(int64_t cg, int64_t og, int64_t oh, int64_t ow) {
  // Measured against conv_planes (one 3x3 layer, 8 sets of 8 images, on Zen 5). With AVX-512's
  // direct path: 64 channels over 16x16 outputs 1.11-1.14x, 32x32 1.4x, 128 over 16x16
  // 1.2-1.47x, but 32 channels 0.76-0.96x and 8x8 outputs 0.67-0.91x (a panel of 32 tiles half
  // empty). At AVX2's narrower direct path it pays earlier: 32 channels over 8x8 1.35x, over
  // 16x16 3.2x, 64 over 8x8 1.6x; 16 channels 0.49x, and 128 over 8x8 0.88x (the filters'
  // 1 MiB of transforms met by 16 tiles) or 4x4 0.28x.
  const int64_t hw = oh * ow;
  if (xsimd::batch<float>::size >= 16) return cg >= 64 && og >= 64 && hw >= 256;
  return cg >= 32 && og >= 32 && hw >= 64 && (hw >= 256 || cg * og <= 64 * 64);
}

void winograd_filters(const float* w, int64_t filters, int64_t cg, int64_t og, float* u,
                      uint8_t* finite) {
  // G g G^T in double, rounded once: G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]. A line of
  // channels at a time, each of the 16 planes written a whole line at once (they lie og * cg
  // apart: written a float at a time, they thrashed one set of L1, a fifth of conv64_8's time).
  constexpr int64_t kLine = 16;
  float r[16][kLine];
  std::fill(finite, finite + filters / og, uint8_t{1});
  for (int64_t f = 0; f < filters; ++f)
    for (int64_t c0 = 0; c0 < cg; c0 += kLine) {
      const int64_t nc = std::min(kLine, cg - c0);
      for (int64_t c = 0; c < nc; ++c) {
        const float* k = w + (f * cg + c0 + c) * 9;
        for (int j = 0; j < 9; ++j)
          if (exponent(k[j]) == kNonFinite) finite[f / og] = 0;
        double t[4][3];  // G g
        for (int j = 0; j < 3; ++j) {
          const double g0 = k[j], g1 = k[3 + j], g2 = k[6 + j];
          t[0][j] = g0;
          t[1][j] = 0.5 * (g0 + g1 + g2);
          t[2][j] = 0.5 * (g0 - g1 + g2);
          t[3][j] = g2;
        }
        for (int i = 0; i < 4; ++i) {
          r[i * 4 + 0][c] = static_cast<float>(t[i][0]);
          r[i * 4 + 1][c] = static_cast<float>(0.5 * (t[i][0] + t[i][1] + t[i][2]));
          r[i * 4 + 2][c] = static_cast<float>(0.5 * (t[i][0] - t[i][1] + t[i][2]));
          r[i * 4 + 3][c] = static_cast<float>(t[i][2]);
        }
      }
      float* dst = u + (f / og * 16 * og + f % og) * cg + c0;
      for (int e = 0; e < 16; ++e)
        std::memcpy(dst + e * og * cg, r[e], static_cast<size_t>(nc) * sizeof(float));
    }
}

void conv_winograd(const Tensor& x, const ConvGeom& g, const float* w, const float* u,
                   const uint8_t* finite, const float* bias, bool relu, const Tensor& out,
                   int64_t t0, int64_t t1) {
  const Layout l(g);
  const int64_t cout = out.size(1), banks = cout / g.cout, hw = g.oh * g.ow;
  std::vector<float> padded(l.cg * l.rows * 2 * l.half);
  // (not zeroed: every element read is written first)
  const std::unique_ptr<float[]> v(new float[16 * l.vs]), m(new float[16 * l.ms]);
  float* po = out.data<float>();
  // the tasks of one image's group (its banks) share each block's transformed inputs
  for (int64_t t = t0; t < t1;) {
    const int64_t img = t / banks % g.n, grp = t / (banks * g.n);
    const int64_t b0 = t % banks, b1 = std::min(banks, b0 + (t1 - t));
    const bool image_finite = pad_split(x, g, l, grp, img, padded.data());
    // An inf or NaN in the image or the bank's filters: the direct kernel, whose sums give the
    // direct convolution's inf and NaN (the transforms' differences turn inf - inf into NaN).
    // By the image's and bank's own values, so a set batched or alone takes the same path.
    auto direct = [&](int64_t bank) {
      return !image_finite || !finite[(bank * g.cout + grp * l.og) / l.og];
    };
    bool some = false;  // banks that take the transforms
    for (int64_t bank = b0; bank < b1; ++bank) some = some || !direct(bank);
    for (int64_t i0 = 0; some && i0 < l.tiles; i0 += l.block) {
      const int64_t i1 = std::min(l.tiles, i0 + l.block), n = i1 - i0;
      transform_inputs(padded.data(), l, i0, i1, v.get());
      for (int64_t bank = b0; bank < b1; ++bank) {
        if (direct(bank)) continue;
        const int64_t ch = bank * g.cout + grp * l.og;
        const float* ub = u + ch * 16 * l.cg;  // this bank's group: [16, og, cg]
        for (int64_t e = 0; e < 16; ++e)
          small_gemm_nn(ub + e * l.og * l.cg, l.cg, v.get() + e * l.vs, l.ts, nullptr,
                        m.get() + e * l.ms, l.ts, l.og, n, l.cg);
        for (int64_t o = 0; o < l.og; ++o)
          transform_outputs(m.get(), l, g, o, bias ? bias[ch + o] : 0.0f, relu, i0, i1,
                            po + (img * cout + ch + o) * hw);
      }
    }
    for (int64_t bank = b0; bank < b1; ++bank)
      if (direct(bank))
        conv_planes(x, g, w, bias, nullptr, nullptr, relu, out, t + bank - b0, t + bank - b0 + 1);
    t += b1 - b0;
  }
}

}  // namespace td::kernels::TD_ISA
