#pragma once
// Counter-based random numbers (Philox 4x32-10). A draw is a pure function of
// (seed, stream, set key, element index): the stream advances once per random op call, the set
// key names the vmap set (0 outside vmap), so set i gets the same draws however it is batched.
#include <array>
#include <cstdint>

namespace td {

// Seeds this thread (stream := 0) and is the seed of threads that draw later without one. A
// thread that never called manual_seed starts at a stream of its own (a multiple of 2^32 taken
// from a process-wide counter), so threads do not repeat each other's draws.
void manual_seed(uint64_t seed);

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

// The fills (philox_uniform, philox_normal, philox_keep_mask, philox_dropout) are kernels, in
// engine/kernels/kernels.def. Float uniform element e is word e of the stream; a double, and
// each pair of normals (Box-Muller), takes a block's two word pairs.
// Dropout's keep draws, float32: element e is kept with probability 1 - T / 2^24, T =
// ceil(float(p) * 2^24) (what rand >= p gives), from a byte per element instead of a word.
// Element e takes byte e % 4 (bits 8(e % 4) up) of word e / 4 of the stream philox_uniform
// reads; it is kept if that byte is above T's top byte (T >> 16), dropped if below, and on a tie
// kept if bits 16-31 of word 2^62 + j are at least T & 0xFFFF, j counting the ties before it
// (in element order). Four times fewer Philox words than rand.
// philox_keep_reference is element e's draw from the scalar Philox, given the number of ties
// before it (for tests).
bool philox_keep_reference(uint64_t seed, uint64_t stream, uint64_t set_key, double p, uint64_t e,
                           uint64_t ties_before);

}  // namespace td
