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

// The level's widest float vector (Wide), as the raw register type: arrays of them stay in
// registers (xsimd's batches in an array were kept on the stack). With AVX-512 also Half, for
// the last 8 or fewer outputs of a row (rows of 8, stride 2 over 16 columns, would waste half of
// a 16-lane vector): the same fused multiply-add, so the same bits.
#if defined(__AVX2__) && defined(__FMA__)
struct Ymm {
  using V = __m256;
  static constexpr int64_t kLanes = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V splat(float v) { return _mm256_set1_ps(v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store_first(float* p, V v, int64_t n) {
#ifdef __AVX512F__
    _mm256_mask_storeu_ps(p, static_cast<__mmask8>((1u << n) - 1), v);
#else
    const __m256i first = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(p, first, v);
#endif
  }
  static V relu(V v) { return _mm256_max_ps(_mm256_setzero_ps(), v); }  // NaN: the 2nd operand
};
#endif

#if defined(__AVX512F__)
struct Wide {
  using V = __m512;
  static constexpr int64_t kLanes = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V splat(float v) { return _mm512_set1_ps(v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store_first(float* p, V v, int64_t n) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
  }
  static V relu(V v) { return _mm512_max_ps(_mm512_setzero_ps(), v); }  // NaN: the 2nd operand
};
using Half = Ymm;
#elif defined(__AVX2__) && defined(__FMA__)
using Wide = Ymm;
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
  static void store_first(float* p, V v, int64_t n) {
    for (int64_t i = 0; i < n; ++i) p[i] = v[i];
  }
  static V relu(V v) {
    for (int i = 0; i < kLanes; ++i) v[i] = v[i] < 0.0f ? 0.0f : v[i];  // NaN and -0 kept, as max
    return v;
  }
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
    const int64_t s = s_, len = len_, c0 = c0_, n = c1_ - c0_;
    const float* src = p + (r0_ - g_.pad[0]) * rs + (c0 - g_.pad[1]) * cs;
    float* dst = buf_.data() + r0_ * s * len;
    for (int64_t r = r0_; r < r1_; ++r, src += rs, dst += s * len) {
      if (s == 1 && cs == 1) {
        std::memcpy(dst + c0, src, n * sizeof(float));
      } else if (s == 2 && cs == 1) {
        // input column k is padded column c0 + k: the even k to c0's phase, the odd to the
        // other (loops of a constant stride, which the compiler vectorises)
        float* a = dst + c0 % 2 * len + c0 / 2;
        float* b = dst + (1 - c0 % 2) * len + (c0 + 1) / 2;
        for (int64_t m = 0; m < (n + 1) / 2; ++m) a[m] = src[2 * m];
        for (int64_t m = 0; m < n / 2; ++m) b[m] = src[2 * m + 1];
      } else {
        // phase by phase: padded column c = i * s + q
        for (int64_t q = 0; q < s; ++q) {
          const int64_t first = c0 + ((q - c0 % s) % s + s) % s;
          float* d = dst + q * len;
          for (int64_t c = first, i = first / s; c < c0 + n; c += s, ++i) d[i] = src[(c - c0) * cs];
        }
      }
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

// C output channels of one input plane: their filters [kh * kw], biases and output planes
// (max(0, .) stored if relu).
template <int C>
struct Chans {
  const float* w[C];
  float bias[C];
  float* o[C];
  bool relu;
};

// R output rows (row stride ow) of C channels from the padded plane's rows at src (R rows rstep
// apart), taps at the kk offsets taps, columns [j0, j1) in vectors of V::kLanes: every output
// is bias + w[0] x[0] + w[1] x[1] + ... in tap order, one fused multiply-add per tap, whatever
// its lane, vector width, row or channel block. The channels share each load of x.
template <class V, int R, int C>
void rows_block(const float* src, int64_t rstep, const int64_t* taps, int64_t kk,
                const Chans<C>& ch, int64_t oy, int64_t ow, int64_t j0, int64_t j1) {
  constexpr int64_t L = V::kLanes;
  for (int64_t j = j0; j < j1; j += L) {
    typename V::V acc[C][R];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[c][r] = V::splat(ch.bias[c]);
    for (int64_t t = 0; t < kk; ++t) {
      const float* p = src + taps[t] + j;
      typename V::V xv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xv[r] = V::load(p + r * rstep);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const typename V::V wv = V::splat(ch.w[c][t]);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[c][r] = V::fma(wv, xv[r], acc[c][r]);
      }
    }
    if (ch.relu)
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c)
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[c][r] = V::relu(acc[c][r]);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      float* dst = ch.o[c] + oy * ow + j;
      if (j + L <= j1) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) V::store(dst + r * ow, acc[c][r]);
      } else {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) V::store_first(dst + r * ow, acc[c][r], j1 - j);
      }
    }
  }
}

// R rows of outputs, whole vectors along them; with AVX-512 a rest of 8 or fewer columns in a
// vector of 8 (rows of 24 outputs wasted a third of their second 16-lane vector).
template <int R, int C>
void rows(const float* src, int64_t rstep, const int64_t* taps, int64_t kk, const Chans<C>& ch,
          int64_t oy, int64_t ow) {
#ifdef __AVX512F__
  const int64_t rest = ow % Wide::kLanes, split = rest <= Half::kLanes ? ow - rest : ow;
  rows_block<Wide, R, C>(src, rstep, taps, kk, ch, oy, ow, 0, split);
  rows_block<Half, R, C>(src, rstep, taps, kk, ch, oy, ow, split, ow);
#else
  rows_block<Wide, R, C>(src, rstep, taps, kk, ch, oy, ow, 0, ow);
#endif
}

// A block of the last n < R rows.
template <int R, int C>
void last_rows(int64_t n, const float* src, int64_t rstep, const int64_t* taps, int64_t kk,
               const Chans<C>& ch, int64_t oy, int64_t ow) {
  if constexpr (R > 0) {
    if (n == R) return rows<R, C>(src, rstep, taps, kk, ch, oy, ow);
    last_rows<R - 1, C>(n, src, rstep, taps, kk, ch, oy, ow);
  }
}

// The planes of C channels, R rows at a time: R * C independent chains of multiply-adds hide
// the FMA's latency (R * C accumulators and R vectors of x fit the level's registers).
template <int R, int C>
void planes(const PaddedPlane& pp, const ConvGeom& g, const std::vector<int64_t>& taps,
            const Chans<C>& ch) {
  const int64_t rstep = g.stride[0] * pp.row_step(), kk = g.kh * g.kw;
  int64_t oy = 0;
  for (; oy + R <= g.oh; oy += R)
    rows<R, C>(pp.data() + oy * rstep, rstep, taps.data(), kk, ch, oy, g.ow);
  last_rows<R - 1, C>(g.oh - oy, pp.data() + oy * rstep, rstep, taps.data(), kk, ch, oy, g.ow);
}

#ifdef __AVX512F__
constexpr int kPairRows = 8;  // 16 accumulators of 32 registers
#else
constexpr int kPairRows = 4;  // 8 accumulators of 16 registers
#endif

}  // namespace

void conv_depthwise(const Tensor& x, const ConvGeom& g, const float* w, const float* bias,
                    bool relu, const Tensor& out, int64_t t0, int64_t t1) {
  const int64_t og = g.cout / g.groups, banks = out.size(1) / g.cout, hw = g.oh * g.ow;
  const int64_t kk = g.kh * g.kw, nch = banks * og;
  const float* xp = x.data<float>();
  const Strides& st = x.strides();
  float* po = out.data<float>();
  PaddedPlane pp(g, Wide::kLanes);
  const std::vector<int64_t> taps = pp.taps();
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t img = t / g.cin, c = t % g.cin;
    pp.load(xp + img * st[0] + c * st[1], st[2], st[3]);
    // the plane's output channels i = bank * og + k, two at a time
    auto chan = [&](int64_t i, auto& ch, int slot) {
      const int64_t co = i / og * g.cout + c * og + i % og;
      ch.w[slot] = w + co * kk;
      ch.bias[slot] = bias ? bias[co] : 0.0f;
      ch.o[slot] = po + (img * out.size(1) + co) * hw;
      ch.relu = relu;
    };
    int64_t i = 0;
    for (; i + 2 <= nch; i += 2) {
      Chans<2> ch;
      chan(i, ch, 0);
      chan(i + 1, ch, 1);
      planes<kPairRows, 2>(pp, g, taps, ch);
    }
    if (i < nch) {
      Chans<1> ch;
      chan(i, ch, 0);
      planes<8, 1>(pp, g, taps, ch);
    }
  }
}

}  // namespace td::kernels::TD_ISA
