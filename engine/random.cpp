#include "engine/random.h"

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
std::array<uint32_t, 4> philox(std::array<uint32_t, 4> c, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57, kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = uint64_t(kM0) * c[0], p1 = uint64_t(kM1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k1,
         uint32_t(p0)};
    k0 += kW0;
    k1 += kW1;
  }
  return c;
}

struct Block {
  uint32_t k0, k1, stream, s0, s1;
  std::array<uint32_t, 4> at(uint64_t block) const {
    return philox({uint32_t(block), stream, s0 ^ uint32_t(block >> 32) * 0x9E3779B9u, s1}, k0, k1);
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

void philox_uniform(float* out, int64_t n, uint64_t seed, uint64_t stream, uint64_t set_key,
                    uint64_t elem0) {
  Block b = make_block(seed, stream, set_key);
  for (int64_t i = 0; i < n; ++i) {
    uint64_t e = elem0 + i;
    out[i] = to_float(b.at(e / 4)[e % 4]);
  }
}

void philox_uniform(double* out, int64_t n, uint64_t seed, uint64_t stream, uint64_t set_key,
                    uint64_t elem0) {
  Block b = make_block(seed, stream, set_key);
  for (int64_t i = 0; i < n; ++i) {
    uint64_t e = elem0 + i;
    auto r = b.at(e / 2);
    out[i] = e % 2 ? to_double(r[2], r[3]) : to_double(r[0], r[1]);
  }
}

template <class T>
static void normal_impl(T* out, int64_t n, uint64_t seed, uint64_t stream, uint64_t set_key,
                        uint64_t elem0) {
  Block b = make_block(seed, stream, set_key);
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t e = elem0 + i;
    auto r = b.at(e / 2);  // one block per pair of outputs (Box-Muller)
    double u1 = 1.0 - to_double(r[0], r[1]);  // (0, 1]
    double u2 = to_double(r[2], r[3]);
    double rad = std::sqrt(-2.0 * std::log(u1));
    out[i] = static_cast<T>(e % 2 ? rad * std::sin(kTwoPi * u2) : rad * std::cos(kTwoPi * u2));
  }
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
