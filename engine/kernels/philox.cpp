// Philox 4x32-10 fills on vector lanes: uniform, normal, dropout's keep draws and dropout
// itself, word for word what the scalar reference (engine/random.cpp) gives.
#include <algorithm>
#include <bit>
#include <cmath>
#include <type_traits>
#include <utility>

#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "engine/kernels/kernels.h"
#include "engine/kernels/philox_block.h"

namespace td::kernels::TD_ISA {
using namespace td::philox;

// Philox on vector lanes, one block per lane, a counter word per register: S::mul gives the high
// and low halves of each lane's 32x32->64 product, S::xor3 a three-way XOR, S::store_blocks
// writes the S::kN blocks out one after the other (philox_round_lanes is philox_round).
#ifdef __AVX2__
// The high halves of the 32x32->64 products come from even/odd lane multiplies (no cross-lane
// shuffles, which the compiler's own vectorisation of the 64-bit product needs), the low halves
// from one 32-bit multiply.
struct Avx2Lanes {
  using I = __m256i;
  static constexpr int kN = 8;
  static I set1(uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }
  static I iota_from(uint32_t v) {
    return _mm256_add_epi32(set1(v), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static I load(const uint32_t* a) { return _mm256_load_si256(reinterpret_cast<const I*>(a)); }
  static void mul(I x, uint32_t m, I& hi, I& lo) {
    const I mv = set1(m);
    const I even = _mm256_mul_epu32(x, mv);
    const I odd = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), mv);
    hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
    lo = _mm256_mullo_epi32(x, mv);
  }
  static I xor3(I a, I b, I c) { return _mm256_xor_si256(_mm256_xor_si256(a, b), c); }
  static void store_blocks(const I (&c)[4], uint32_t* out) {
    const I t0 = _mm256_unpacklo_epi32(c[0], c[1]);  // blocks 0, 1 | 4, 5
    const I t1 = _mm256_unpackhi_epi32(c[0], c[1]);  // blocks 2, 3 | 6, 7
    const I t2 = _mm256_unpacklo_epi32(c[2], c[3]);
    const I t3 = _mm256_unpackhi_epi32(c[2], c[3]);
    const I u0 = _mm256_unpacklo_epi64(t0, t2);  // block 0 | block 4
    const I u1 = _mm256_unpackhi_epi64(t0, t2);  // block 1 | block 5
    const I u2 = _mm256_unpacklo_epi64(t1, t3);  // block 2 | block 6
    const I u3 = _mm256_unpackhi_epi64(t1, t3);  // block 3 | block 7
    auto store = [&](int i, I x) { _mm256_storeu_si256(reinterpret_cast<I*>(out + 8 * i), x); };
    store(0, _mm256_permute2x128_si256(u0, u1, 0x20));
    store(1, _mm256_permute2x128_si256(u2, u3, 0x20));
    store(2, _mm256_permute2x128_si256(u0, u1, 0x31));
    store(3, _mm256_permute2x128_si256(u2, u3, 0x31));
  }
};
#endif

#ifdef __AVX512F__
// Each product pair comes from an even and an odd lane multiply; one masked dword swap gathers
// the high halves, another the low halves (no 32-bit multiply), and the two three-way XORs are
// one ternary-logic op each: 12 instructions for 16 blocks, against 16 for 8 with AVX2 (on Zen 4
// a 1M float32 rand 455 -> 420 us, dropout 505 -> 455 us).
struct Avx512Lanes {
  using I = __m512i;
  static constexpr int kN = 16;
  static I set1(uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
  static I iota_from(uint32_t v) {
    return _mm512_add_epi32(
        set1(v), _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  }
  static I load(const uint32_t* a) { return _mm512_load_si512(a); }
  static void mul(I x, uint32_t m, I& hi, I& lo) {
    const I mv = set1(m);
    const I even = _mm512_mul_epu32(x, mv);
    const I odd = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), mv);
    hi = _mm512_mask_shuffle_epi32(odd, 0x5555, even, _MM_PERM_CDAB);
    lo = _mm512_mask_shuffle_epi32(even, 0xAAAA, odd, _MM_PERM_CDAB);
  }
  static I xor3(I a, I b, I c) { return _mm512_ternarylogic_epi32(a, b, c, 0x96); }
  static void store_blocks(const I (&c)[4], uint32_t* out) {
    // uj's 128-bit quarter q holds block 4q + j: (c0, c1, c2, c3)
    const I t0 = _mm512_unpacklo_epi32(c[0], c[1]), t1 = _mm512_unpackhi_epi32(c[0], c[1]);
    const I t2 = _mm512_unpacklo_epi32(c[2], c[3]), t3 = _mm512_unpackhi_epi32(c[2], c[3]);
    const I u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
    const I u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
    const I lo01 = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(1, 0, 1, 0));  // blocks 0 4 1 5
    const I lo23 = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(1, 0, 1, 0));  // 2 6 3 7
    const I hi01 = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(3, 2, 3, 2));  // 8 12 9 13
    const I hi23 = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(3, 2, 3, 2));  // 10 14 11 15
    _mm512_storeu_si512(out, _mm512_shuffle_i32x4(lo01, lo23, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_storeu_si512(out + 16, _mm512_shuffle_i32x4(lo01, lo23, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm512_storeu_si512(out + 32, _mm512_shuffle_i32x4(hi01, hi23, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_storeu_si512(out + 48, _mm512_shuffle_i32x4(hi01, hi23, _MM_SHUFFLE(3, 1, 3, 1)));
  }
};
#endif

// Philox blocks [first, first + count) of one key into words[4 * i + lane], a group of blocks at
// a time in structure-of-arrays form so the rounds vectorise.
#ifdef __AVX2__
// Counters are made in registers (consecutive blocks differ in word 0 only, unless they cross a
// multiple of 2^32). Four groups of S::kN blocks go through each round together: the rounds
// wait on their latency with fewer independent chains (AVX2 on Zen 3: two groups 0.62 ns a
// word, four 0.51).
template <class S>
void philox_round_lanes(typename S::I (&c)[4], typename S::I k0, typename S::I k1) {
  typename S::I hi0, lo0, hi1, lo1;
  S::mul(c[0], kM0, hi0, lo0);
  S::mul(c[2], kM1, hi1, lo1);
  c[0] = S::xor3(hi1, c[1], k0);
  c[2] = S::xor3(hi0, c[3], k1);
  c[1] = lo1;
  c[3] = lo0;
}

template <class S>
void philox_blocks_simd(const Block& b, uint64_t first, int64_t count, uint32_t* words) {
  using I = typename S::I;
  constexpr int kGroups = 4, kW = S::kN * kGroups;
  for (int64_t base = 0; base < count; base += kW) {
    const int w = static_cast<int>(std::min<int64_t>(kW, count - base));
    const uint64_t block0 = first + static_cast<uint64_t>(base);
    I v[kGroups][4];
    if (block0 >> 32 == (block0 + kW - 1) >> 32) {
      const auto c = b.counter(block0);
      for (int g = 0; g < kGroups; ++g) {
        v[g][0] = S::iota_from(c[0] + S::kN * g);
        for (int i = 1; i < 4; ++i) v[g][i] = S::set1(c[i]);
      }
    } else {
      alignas(64) uint32_t cs[4][kW];
      b.counters(block0, cs);
      for (int g = 0; g < kGroups; ++g)
        for (int i = 0; i < 4; ++i) v[g][i] = S::load(cs[i] + S::kN * g);
    }
    uint32_t k0 = b.k0, k1 = b.k1;
    for (int r = 0; r < 10; ++r) {
      const I k0v = S::set1(k0), k1v = S::set1(k1);
      for (auto& g : v) philox_round_lanes<S>(g, k0v, k1v);
      k0 += kW0;
      k1 += kW1;
    }
    alignas(64) uint32_t tail[4 * kW];
    uint32_t* out = w == kW ? words + 4 * base : tail;
    for (int g = 0; g < kGroups; ++g) S::store_blocks(v[g], out + 4 * S::kN * g);
    if (out == tail) std::copy(tail, tail + 4 * w, words + 4 * base);
  }
}

static void philox_blocks(const Block& b, uint64_t first, int64_t count, uint32_t* words) {
#ifdef __AVX512F__
  philox_blocks_simd<Avx512Lanes>(b, first, count, words);
#else
  philox_blocks_simd<Avx2Lanes>(b, first, count, words);
#endif
}
#else
static void philox_blocks(const Block& b, uint64_t first, int64_t count, uint32_t* words) {
  constexpr int kW = 16;
  for (int64_t base = 0; base < count; base += kW) {
    int w = static_cast<int>(std::min<int64_t>(kW, count - base));
    uint32_t cs[4][kW];
    b.counters(first + base, cs);
    uint32_t k0 = b.k0, k1 = b.k1;
    for (int r = 0; r < 10; ++r) {
      for (int l = 0; l < kW; ++l) philox_round(cs[0][l], cs[1][l], cs[2][l], cs[3][l], k0, k1);
      k0 += kW0;
      k1 += kW1;
    }
    for (int l = 0; l < w; ++l)
      for (int i = 0; i < 4; ++i) words[4 * (base + l) + i] = cs[i][l];
  }
}
#endif

// Float draws with elem0 = 0 (every fill but a resumed one): element i is word i, so blocks
// are made in runs and run(i, words, len) consumes elements [i, i + len) in a plain loop.
template <class Run>
static void for_each_float_run(const Block& b, int64_t n, Run&& run) {
  constexpr int64_t kRun = 256;
  alignas(32) uint32_t words[4 * kRun];
  for (int64_t i = 0; i < n; i += 4 * kRun) {
    const int64_t len = std::min<int64_t>(4 * kRun, n - i);
    philox_blocks(b, static_cast<uint64_t>(i / 4), (len + 3) / 4, words);
    run(i, words, len);
  }
}

// Element e takes word e % 4 of block e / 4 (float), or words 2(e % 2), 2(e % 2) + 1 of block
// e / 2 (double, and the pair of a Box-Muller normal). Blocks are made in runs of kRun.
template <int kPerBlock, class Emit>
static void for_each_word(const Block& b, uint64_t elem0, int64_t n, Emit&& emit) {
  constexpr int64_t kRun = 256;
  uint32_t words[4 * kRun];
  int64_t i = 0;
  while (i < n) {
    uint64_t e = elem0 + i;
    uint64_t first = e / kPerBlock;
    uint64_t last = (elem0 + n - 1) / kPerBlock;
    int64_t count = std::min<int64_t>(kRun, static_cast<int64_t>(last - first + 1));
    philox_blocks(b, first, count, words);
    for (int64_t j = 0; j < count; ++j) {
      const uint32_t* r = words + 4 * j;
      for (int lane = (j == 0 ? static_cast<int>(e % kPerBlock) : 0); lane < kPerBlock && i < n;
           ++lane, ++i)
        emit(i, lane, r);
    }
  }
}

void philox_uniform(float* out, int64_t n, uint64_t seed, uint64_t stream, uint64_t set_key,
                    uint64_t elem0) {
  if (elem0 == 0) {
    for_each_float_run(make_block(seed, stream, set_key), n,
                       [&](int64_t i, const uint32_t* words, int64_t len) {
                         for (int64_t t = 0; t < len; ++t) out[i + t] = to_float(words[t]);
                       });
    return;
  }
  for_each_word<4>(make_block(seed, stream, set_key), elem0, n,
                   [&](int64_t i, int lane, const uint32_t* r) { out[i] = to_float(r[lane]); });
}

void philox_uniform(double* out, int64_t n, uint64_t seed, uint64_t stream, uint64_t set_key,
                    uint64_t elem0) {
  for_each_word<2>(make_block(seed, stream, set_key), elem0, n,
                   [&](int64_t i, int lane, const uint32_t* r) {
                     out[i] = to_double(r[2 * lane], r[2 * lane + 1]);
                   });
}

void philox_permutation(int64_t* out, int64_t n, uint64_t seed, uint64_t stream,
                        uint64_t set_key) {
  for (int64_t i = 0; i < n; ++i) out[i] = i;
  if (n < 2) return;
  for_each_word<2>(make_block(seed, stream, set_key), 0, n - 1,
                   [&](int64_t t, int lane, const uint32_t* r) {
                     const uint64_t u = (uint64_t{r[2 * lane]} << 32) | r[2 * lane + 1];
                     const int64_t i = n - 1 - t;
                     // j uniform in [0, i]: the top 64 bits of u * (i + 1), no modulo bias
                     const auto j = static_cast<int64_t>(
                         (static_cast<unsigned __int128>(u) * static_cast<uint64_t>(i + 1)) >> 64);
                     std::swap(out[i], out[j]);
                   });
}

namespace {

inline uint32_t byte_of(const uint32_t* words, int64_t t) {
  return (words[t / 4] >> (8 * (t % 4))) & 0xFF;
}

// Runs of elements [i, i + len): run(i, bytes, ties, len) gets the run's bytes and a bit per
// element (ties[t / 64] >> t % 64) set for the ties its refinement keeps; element i + t keeps if
// bytes[t] > rule.hi or its bit is set. A run's ties are drawn before its pass, so the pass reads
// each element once and writes it once (dropout may be in place).
template <class Run>
void for_each_keep_run(const Block& b, int64_t n, const KeepRule& rule, Run&& run) {
  constexpr int64_t kRun = 4096;  // elements: 256 blocks
  alignas(64) uint32_t words[kRun / 4];
  alignas(64) uint8_t spread[kRun];  // big-endian hosts: the bytes in element order
  alignas(64) uint64_t ties[kRun / 64];
  const uint32_t hi = rule.hi;
  uint64_t ties_before = 0;  // in the whole stream: the j-th tie takes word kRefineWord + j
  // the ties' refinement words, 4 to a block, drawn a batch of blocks at a time (a run has about
  // 16 ties)
  constexpr int64_t kBlocks = 64;
  alignas(64) uint32_t refine[4 * kBlocks];
  uint64_t first = ~uint64_t{0};  // the block refine holds from
  for (int64_t i = 0; i < n; i += kRun) {
    const int64_t len = std::min(kRun, n - i);
    philox_blocks(b, static_cast<uint64_t>(i / 16), (len + 15) / 16, words);
    const uint8_t* bytes = reinterpret_cast<const uint8_t*>(words);
    if constexpr (std::endian::native != std::endian::little) {
      for (int64_t t = 0; t < len; ++t) spread[t] = static_cast<uint8_t>(byte_of(words, t));
      bytes = spread;
    }
    std::fill(ties, ties + (len + 63) / 64, uint64_t{0});
    if (hi < 256) {
      int64_t t = 0;
#ifdef __AVX512BW__
      const __m512i hv = _mm512_set1_epi8(static_cast<char>(hi));
      for (; t + 64 <= len; t += 64)
        ties[t / 64] = _mm512_cmpeq_epi8_mask(_mm512_loadu_si512(bytes + t), hv);
#endif
      for (; t < len; ++t) ties[t / 64] |= uint64_t{bytes[t] == hi} << (t % 64);
      for (int64_t q = 0; q < (len + 63) / 64; ++q)
        for (uint64_t m = ties[q]; m; m &= m - 1) {
          const uint64_t w = kRefineWord + ties_before++;
          if (w / 4 - first >= uint64_t{kBlocks}) {  // unsigned: also w / 4 < first
            first = w / 4;
            philox_blocks(b, first, kBlocks, refine);
          }
          if ((refine[w - 4 * first] >> 16) < rule.lo) ties[q] &= ~(m & -m);
        }
    }
    run(i, bytes, static_cast<const uint64_t*>(ties), len);
  }
}

// out[t] = f(keep_t) for t < len, keep_t = 1.0f if bytes[t] > hi or bit t of ties is set, else
// 0.0f: 64 at a time from one byte compare with AVX-512BW.
template <class F>
inline void map_keep(const uint8_t* bytes, const uint64_t* ties, uint32_t hi, int64_t len, F&& f) {
  int64_t t = 0;
#ifdef __AVX512BW__
  const __m512i hv = _mm512_set1_epi8(static_cast<char>(hi));
  const __m512 one = _mm512_set1_ps(1.0f);
  for (; hi < 256 && t + 64 <= len; t += 64) {
    const uint64_t m = _mm512_cmpgt_epu8_mask(_mm512_loadu_si512(bytes + t), hv) | ties[t / 64];
    for (int q = 0; q < 4; ++q)
      f(t + 16 * q, _mm512_maskz_mov_ps(static_cast<__mmask16>(m >> (16 * q)), one));
  }
#endif
  for (; t < len; ++t) f(t, bytes[t] > hi || (ties[t / 64] >> (t % 64) & 1) ? 1.0f : 0.0f);
}

}  // namespace

void philox_dropout(const float* x, float* out, int64_t n, double p, uint64_t seed,
                    uint64_t stream, uint64_t set_key) {
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  const KeepRule rule(p);
  auto run = [&](int64_t i, const uint8_t* bytes, const uint64_t* ties, int64_t len) {
    // the run's pointers as values: through the captures every store would reload them
    map_keep(bytes, ties, rule.hi, len, [xs = x + i, os = out + i, scale](int64_t t, auto keep) {
      if constexpr (std::is_same_v<decltype(keep), float>) {
        os[t] = (xs[t] * keep) * scale;
      } else {
#ifdef __AVX512F__
        const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(xs + t), keep);
        _mm512_storeu_ps(os + t, _mm512_mul_ps(v, _mm512_set1_ps(scale)));
#endif
      }
    });
  };
  for_each_keep_run(make_block(seed, stream, set_key), n, rule, run);
}

void philox_keep_mask(float* out, int64_t n, double p, uint64_t seed, uint64_t stream,
                      uint64_t set_key) {
  const KeepRule rule(p);
  auto run = [&](int64_t i, const uint8_t* bytes, const uint64_t* ties, int64_t len) {
    map_keep(bytes, ties, rule.hi, len, [os = out + i](int64_t t, auto keep) {
      if constexpr (std::is_same_v<decltype(keep), float>) {
        os[t] = keep;
      } else {
#ifdef __AVX512F__
        _mm512_storeu_ps(os + t, keep);
#endif
      }
    });
  };
  for_each_keep_run(make_block(seed, stream, set_key), n, rule, run);
}

void philox_dropout(const double* x, double* out, int64_t n, double p, uint64_t seed,
                    uint64_t stream, uint64_t set_key) {
  const double scale = 1.0 / (1.0 - p);
  for_each_word<2>(make_block(seed, stream, set_key), 0, n,
                   [&](int64_t i, int lane, const uint32_t* r) {
                     out[i] = (x[i] * (to_double(r[2 * lane], r[2 * lane + 1]) >= p ? 1.0 : 0.0)) *
                              scale;
                   });
}

template <class T>
static void normal_impl(T* out, int64_t n, uint64_t seed, uint64_t stream, uint64_t set_key,
                        uint64_t elem0) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  // one block per pair of outputs (Box-Muller): lane 0 takes the cosine, lane 1 the sine
  for_each_word<2>(make_block(seed, stream, set_key), elem0, n,
                   [&](int64_t i, int lane, const uint32_t* r) {
                      double u1 = 1.0 - to_double(r[0], r[1]);  // (0, 1]
                      double u2 = to_double(r[2], r[3]);
                      double rad = std::sqrt(-2.0 * std::log(u1));
                      out[i] = static_cast<T>(lane ? rad * std::sin(kTwoPi * u2)
                                                   : rad * std::cos(kTwoPi * u2));
                    });
}

void philox_normal(float* out, int64_t n, uint64_t seed, uint64_t stream, uint64_t set_key,
                   uint64_t elem0) {
  normal_impl(out, n, seed, stream, set_key, elem0);
}
void philox_normal(double* out, int64_t n, uint64_t seed, uint64_t stream, uint64_t set_key,
                   uint64_t elem0) {
  normal_impl(out, n, seed, stream, set_key, elem0);
}

}  // namespace td::kernels::TD_ISA
