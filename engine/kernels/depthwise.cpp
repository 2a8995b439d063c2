// conv2d's depthwise case (one input channel per group): each output plane computed directly, a
// vector of outputs along a row at a time, from a zero-padded copy of its input plane (no
// im2col, no GEMM of one filter row).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/kernels/kernels.h"

#ifdef __AVX__
#include <immintrin.h>
#endif

// The vectors below stay inside this file: no call passes them across an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace td::kernels::TD_ISA {
namespace {

// The level's widest float vector, as the raw register type: arrays of them stay in registers
// (xsimd's batches in an array were kept on the stack).
#if defined(__AVX512F__)
struct Wide {
  using V = __m512;
  static constexpr int64_t kLanes = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V splat(float v) { return _mm512_set1_ps(v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
};
#elif defined(__AVX2__) && defined(__FMA__)
struct Wide {
  using V = __m256;
  static constexpr int64_t kLanes = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V splat(float v) { return _mm256_set1_ps(v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
};
#else
// GCC's generic vectors (SSE2, NEON): a * b + c, however this level compiles it, the same for
// every lane.
struct Wide {
  using V = float __attribute__((vector_size(16)));
  static constexpr int64_t kLanes = 4;
  static V load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static V splat(float v) { return V{v, v, v, v}; }
  static V fma(V a, V b, V c) { return a * b + c; }
  static void store(float* p, V v) { std::memcpy(p, &v, sizeof v); }
};
#endif

#ifdef __AVX512F__
// Half of AVX-512's: a row of 8 outputs (stride 2 over 16 columns) would waste half of a
// 16-lane vector. The same fused multiply-add, so the same bits.
struct Half {
  using V = __m256;
  static constexpr int64_t kLanes = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V splat(float v) { return _mm256_set1_ps(v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
};
#endif

// One image's channel of x, zero-padded, each padded row split into the phases of the column
// stride s: phase q holds padded columns q, q + s, q + 2s, ..., so that tap kx of the outputs
// j..j+L-1 of a row is one contiguous load, at phase (kx * d) % s, offset j + (kx * d) / s.
// Rows are long enough for whole vectors past the last output (reading zeros).
class PaddedPlane {
 public:
  PaddedPlane(const ConvGeom& g, int64_t lanes) : g_(g), s_(g.stride[1]) {
    rows_ = (g.oh - 1) * g.stride[0] + (g.kh - 1) * g.dil[0] + 1;
    const int64_t owr = (g.ow + lanes - 1) / lanes * lanes;
    len_ = owr + (g.kw - 1) * g.dil[1] / s_;
    // the padding stays zero: every plane writes the same interior
    buf_.assign(rows_ * s_ * len_, 0.0f);
    const int64_t cols = len_ * s_;
    c0_ = std::min(g.pad[1], cols);
    c1_ = std::clamp(g.pad[1] + g.w, c0_, cols);
    r0_ = std::min(g.pad[0], rows_);
    r1_ = std::clamp(g.pad[0] + g.h, r0_, rows_);
  }

  // Copies in the plane at p (row stride rs, column stride cs).
  void load(const float* p, int64_t rs, int64_t cs) {
    for (int64_t r = r0_; r < r1_; ++r) {
      const float* src = p + (r - g_.pad[0]) * rs + (c0_ - g_.pad[1]) * cs;
      float* dst = buf_.data() + r * s_ * len_;
      if (s_ == 1 && cs == 1) {
        std::memcpy(dst + c0_, src, (c1_ - c0_) * sizeof(float));
        continue;
      }
      for (int64_t c = c0_; c < c1_; ++c, src += cs) dst[c % s_ * len_ + c / s_] = *src;
    }
  }

  const float* data() const { return buf_.data(); }
  int64_t row_step() const { return s_ * len_; }
  // Tap (ky, kx) of output (0, 0) in the buffer, in tap order.
  std::vector<int64_t> taps() const {
    std::vector<int64_t> off;
    for (int64_t ky = 0; ky < g_.kh; ++ky)
      for (int64_t kx = 0; kx < g_.kw; ++kx) {
        const int64_t c = kx * g_.dil[1];
        off.push_back((ky * g_.dil[0] * s_ + c % s_) * len_ + c / s_);
      }
    return off;
  }

 private:
  const ConvGeom& g_;
  int64_t s_, rows_ = 0, len_ = 0, r0_ = 0, r1_ = 0, c0_ = 0, c1_ = 0;
  std::vector<float> buf_;
};

// R output rows (row stride ow) of one channel from the padded plane's rows at src (R rows
// rstep apart), filter wt at the kk tap offsets taps, vectors of V::kLanes outputs along the
// rows: every output is bias + w[0] x[0] + w[1] x[1] + ... in tap order, one fused
// multiply-add per tap, whatever its lane or row block.
template <class V, int R>
void rows_block(const float* src, int64_t rstep, const int64_t* taps, int64_t kk, const float* wt,
                float bias, float* o, int64_t ow) {
  constexpr int64_t L = V::kLanes;
  for (int64_t j = 0; j < ow; j += L) {
    typename V::V acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = V::splat(bias);
    for (int64_t t = 0; t < kk; ++t) {
      const float* p = src + taps[t] + j;
      const typename V::V wv = V::splat(wt[t]);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r] = V::fma(wv, V::load(p + r * rstep), acc[r]);
    }
    float* dst = o + j;
    if (j + L <= ow) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) V::store(dst + r * ow, acc[r]);
    } else {
      alignas(64) float tail[L];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        V::store(tail, acc[r]);
        std::memcpy(dst + r * ow, tail, (ow - j) * sizeof(float));
      }
    }
  }
}

// A block of the last n < 8 rows.
template <class V, int R = 7>
void last_rows(int64_t n, const float* src, int64_t rstep, const int64_t* taps, int64_t kk,
               const float* wt, float bias, float* o, int64_t ow) {
  if constexpr (R > 0) {
    if (n == R) return rows_block<V, R>(src, rstep, taps, kk, wt, bias, o, ow);
    last_rows<V, R - 1>(n, src, rstep, taps, kk, wt, bias, o, ow);
  }
}

// Eight rows at a time: eight independent chains of multiply-adds hide the FMA's latency.
template <class V>
void plane(const PaddedPlane& pp, const ConvGeom& g, const std::vector<int64_t>& taps,
           const float* wt, float bias, float* o) {
  constexpr int kRows = 8;
  const int64_t rstep = g.stride[0] * pp.row_step(), kk = g.kh * g.kw;
  int64_t oy = 0;
  for (; oy + kRows <= g.oh; oy += kRows)
    rows_block<V, kRows>(pp.data() + oy * rstep, rstep, taps.data(), kk, wt, bias, o + oy * g.ow,
                         g.ow);
  last_rows<V>(g.oh - oy, pp.data() + oy * rstep, rstep, taps.data(), kk, wt, bias, o + oy * g.ow,
               g.ow);
}

template <class V>
void depthwise_tasks(const Tensor& x, const ConvGeom& g, const float* w, const float* bias,
                     const Tensor& out, int64_t t0, int64_t t1) {
  const int64_t og = g.cout / g.groups, banks = out.size(1) / g.cout, hw = g.oh * g.ow;
  const int64_t kk = g.kh * g.kw;
  const float* xp = x.data<float>();
  const Strides& st = x.strides();
  float* po = out.data<float>();
  PaddedPlane pp(g, V::kLanes);
  const std::vector<int64_t> taps = pp.taps();
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t img = t / g.cin, c = t % g.cin;
    pp.load(xp + img * st[0] + c * st[1], st[2], st[3]);
    for (int64_t b = 0; b < banks; ++b)
      for (int64_t k = 0; k < og; ++k) {
        const int64_t ch = b * g.cout + c * og + k;
        plane<V>(pp, g, taps, w + ch * kk, bias ? bias[ch] : 0.0f,
                 po + (img * out.size(1) + ch) * hw);
      }
  }
}

}  // namespace

void conv_depthwise(const Tensor& x, const ConvGeom& g, const float* w, const float* bias,
                    const Tensor& out, int64_t t0, int64_t t1) {
#ifdef __AVX512F__
  if (g.ow <= Half::kLanes) return depthwise_tasks<Half>(x, g, w, bias, out, t0, t1);
#endif
  depthwise_tasks<Wide>(x, g, w, bias, out, t0, t1);
}

}  // namespace td::kernels::TD_ISA
