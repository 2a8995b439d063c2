#include "engine/random.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>

namespace td {
namespace {

std::atomic<uint64_t> g_default_seed{67280421310721ULL};

RngState& state() {
  thread_local RngState s{g_default_seed.load(), 0, 0};
  return s;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
constexpr uint32_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57, kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;

// One round on a counter (c0..c3) with key (k0, k1); shared by the scalar reference and the
// 16-wide fill so both compute the same function.
inline void philox_round(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t k0,
                         uint32_t k1) {
  uint64_t p0 = uint64_t(kM0) * c0, p1 = uint64_t(kM1) * c2;
  uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
  c1 = uint32_t(p1);
  c3 = uint32_t(p0);
  c0 = n0;
  c2 = n2;
}

struct Block {
  uint32_t k0, k1, stream, s0, s1;
  // The counter of block number `block` (element e of a float fill is in block e / 4).
  std::array<uint32_t, 4> counter(uint64_t block) const {
    return {uint32_t(block), stream, s0 ^ uint32_t(block >> 32) * 0x9E3779B9u, s1};
  }
};

Block make_block(uint64_t seed, uint64_t stream, uint64_t set_key) {
  uint64_t k = splitmix64(seed ^ splitmix64(stream >> 32));
  return {uint32_t(k), uint32_t(k >> 32), uint32_t(stream), uint32_t(set_key),
          uint32_t(set_key >> 32)};
}

inline float to_float(uint32_t u) { return float(u >> 8) * (1.0f / 16777216.0f); }
inline double to_double(uint32_t hi, uint32_t lo) {
  return double(((uint64_t(hi) << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int r = 0; r < 10; ++r) {
    philox_round(c[0], c[1], c[2], c[3], k[0], k[1]);
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

uint32_t philox_word(uint64_t seed, uint64_t stream, uint64_t set_key, uint64_t index) {
  Block b = make_block(seed, stream, set_key);
  return philox4x32_10(b.counter(index / 4), {b.k0, b.k1})[index % 4];
}

void manual_seed(uint64_t seed) {
  g_default_seed.store(seed);
  state() = RngState{seed, 0, 0};
}

RngState rng_state() { return state(); }
void set_rng_state(const RngState& s) { state() = s; }
uint64_t next_rng_stream() { return state().stream++; }

uint64_t combine_set_key(uint64_t parent, uint64_t index) {
  return splitmix64(parent * 0x100000001B3ULL ^ splitmix64(index + 1));
}

// Philox blocks [first, first + count) of one key into words[4 * i + lane], 16 blocks at a time
// in structure-of-arrays form so the rounds vectorise.
static void philox_blocks(const Block& b, uint64_t first, int64_t count, uint32_t* words) {
  constexpr int kW = 16;
  for (int64_t base = 0; base < count; base += kW) {
    int w = static_cast<int>(std::min<int64_t>(kW, count - base));
    uint32_t c0[kW], c1[kW], c2[kW], c3[kW];
    for (int l = 0; l < kW; ++l) {
      auto c = b.counter(first + base + l);
      c0[l] = c[0];
      c1[l] = c[1];
      c2[l] = c[2];
      c3[l] = c[3];
    }
    uint32_t k0 = b.k0, k1 = b.k1;
    for (int r = 0; r < 10; ++r) {
      for (int l = 0; l < kW; ++l) philox_round(c0[l], c1[l], c2[l], c3[l], k0, k1);
      k0 += kW0;
      k1 += kW1;
    }
    for (int l = 0; l < w; ++l) {
      uint32_t* o = words + 4 * (base + l);
      o[0] = c0[l];
      o[1] = c1[l];
      o[2] = c2[l];
      o[3] = c3[l];
    }
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

}  // namespace td
