#pragma once
// The pieces of Philox 4x32-10 that the scalar reference (random.cpp) and the vectorised fills
// (kernels/philox.cpp) share: the key schedule, a block's counter, and the conversions to
// floating values.
#include <array>
#include <cmath>
#include <cstdint>

namespace td::philox {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
constexpr uint32_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57, kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;

// One round on a counter (c0..c3) with key (k0, k1), for the scalar reference and the portable
// fill; philox_round_lanes (kernels/philox.cpp) is the same round on vector lanes (tests compare the fills with the
// reference word for word).
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
  // The counters of blocks block0 .. block0 + N - 1, word by word: cs[word][block - block0].
  template <int N>
  void counters(uint64_t block0, uint32_t (&cs)[4][N]) const {
    for (int l = 0; l < N; ++l) {
      const auto c = counter(block0 + l);
      for (int i = 0; i < 4; ++i) cs[i][l] = c[i];
    }
  }
};

inline Block make_block(uint64_t seed, uint64_t stream, uint64_t set_key) {
  uint64_t k = splitmix64(seed ^ splitmix64(stream >> 32));
  return {uint32_t(k), uint32_t(k >> 32), uint32_t(stream), uint32_t(set_key),
          uint32_t(set_key >> 32)};
}

// u >> 8 fits an int32, whose conversion vectorises (an unsigned one does not before AVX-512).
inline float to_float(uint32_t u) {
  return float(static_cast<int32_t>(u >> 8)) * (1.0f / 16777216.0f);
}
inline double to_double(uint32_t hi, uint32_t lo) {
  return double(((uint64_t(hi) << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}

// Float32 dropout's draws (see random.h): element e's byte is byte e % 4 of word e / 4, which
// is in block e / 16; the j-th tie takes word kRefineWord + j.
constexpr uint64_t kRefineWord = uint64_t{1} << 62;

struct KeepRule {
  uint32_t hi, lo;  // T = ceil(float(p) * 2^24) = hi * 2^16 + lo; hi = 256 keeps nothing
  explicit KeepRule(double p) {
    const auto t = static_cast<uint32_t>(std::ceil(double(static_cast<float>(p)) * 16777216.0));
    hi = t >> 16;
    lo = t & 0xFFFF;
  }
};

}  // namespace td::philox
