#include "engine/random.h"

#include <array>
#include <atomic>

#include "engine/kernels/philox_block.h"

namespace td {
using namespace philox;
namespace {

std::atomic<uint64_t> g_default_seed{67280421310721ULL};
// A thread not seeded explicitly starts its streams at its own multiple of 2^32 (the first such
// thread at 0), handed out once per process, so concurrent callers never repeat each other's
// draws; manual_seed in a thread restarts that thread at stream 0, reproducibly.
std::atomic<uint64_t> g_next_thread_stream{0};

RngState& state() {
  thread_local RngState s{g_default_seed.load(), g_next_thread_stream.fetch_add(1) << 32, 0};
  return s;
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

bool philox_keep_reference(uint64_t seed, uint64_t stream, uint64_t set_key, double p, uint64_t e,
                           uint64_t ties_before) {
  const KeepRule rule(p);
  const uint32_t byte = (philox_word(seed, stream, set_key, e / 4) >> (8 * (e % 4))) & 0xFF;
  if (byte != rule.hi) return byte > rule.hi;
  return (philox_word(seed, stream, set_key, kRefineWord + ties_before) >> 16) >= rule.lo;
}

}  // namespace td
