#pragma once
// Counter-based random numbers (Philox 4x32-10). A draw is a pure function of
// (seed, stream, set key, element index): the stream advances once per random op call, the set
// key names the vmap set (0 outside vmap), so set i gets the same draws however it is batched.
#include <array>
#include <cstdint>

namespace td {

void manual_seed(uint64_t seed);  // seeds this thread (and threads started later); stream := 0

struct RngState {
  uint64_t seed = 0;
  uint64_t stream = 0;   // next stream to hand out
  uint64_t set_key = 0;  // key of the set this thread computes outside any level (loop mode)
};
RngState rng_state();
void set_rng_state(const RngState& s);
uint64_t next_rng_stream();  // returns the current stream and advances it
// Key of sub-set `index` of the set keyed `parent`.
uint64_t combine_set_key(uint64_t parent, uint64_t index);

// One Philox 4x32-10 block: the scalar reference (the fill functions compute 16 at a time).
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter,
                                      std::array<uint32_t, 2> key);
// Word `index` of the stream that philox_uniform(float) reads (element e is word e), computed
// with the scalar reference.
uint32_t philox_word(uint64_t seed, uint64_t stream, uint64_t set_key, uint64_t index);

// Fills out[0..n) with draws for element indices [elem0, elem0 + n).
void philox_uniform(float* out, int64_t n, uint64_t seed, uint64_t stream, uint64_t set_key,
                    uint64_t elem0 = 0);  // [0, 1)
void philox_uniform(double* out, int64_t n, uint64_t seed, uint64_t stream, uint64_t set_key,
                    uint64_t elem0 = 0);
void philox_normal(float* out, int64_t n, uint64_t seed, uint64_t stream, uint64_t set_key,
                   uint64_t elem0 = 0);  // N(0, 1)
void philox_normal(double* out, int64_t n, uint64_t seed, uint64_t stream, uint64_t set_key,
                   uint64_t elem0 = 0);
// Dropout in one pass: out[i] = (x[i] * (u_i >= p)) * (1 / (1 - p)) in the dtype's arithmetic,
// u_i being element i of philox_uniform with the same arguments: bit for bit what
// mul(mul(x, ge(rand, p).to(dtype)), 1 / (1 - p)) gives, without its four passes.
void philox_dropout(const float* x, float* out, int64_t n, double p, uint64_t seed,
                    uint64_t stream, uint64_t set_key);
void philox_dropout(const double* x, double* out, int64_t n, double p, uint64_t seed,
                    uint64_t stream, uint64_t set_key);

}  // namespace td
