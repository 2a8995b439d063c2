#pragma once
// Limits that make hostile sizes cheap to refuse: the memory budget that work sized by an input
// is checked against before it starts, and the quoting of untrusted names in error messages.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/errors.h"

namespace td {

// The memory td may plan for work whose size an input decides (a loop over the sets, chunks of
// sets, a pipe read whole, bench's modules): a plan beyond it is refused before it starts.
// Default: half the machine's physical memory; the environment variable TD_MEMORY_BUDGET (bytes)
// or set_memory_budget overrides it (<= 0 restores the default).
int64_t memory_budget();
void set_memory_budget(int64_t bytes);
// RuntimeError "[op] <count> <what> need at least <count * bytes_each> bytes, beyond the memory
// budget ..." when count * bytes_each (overflow included) exceeds memory_budget().
void check_memory_budget(const char* op, int64_t count, int64_t bytes_each, const char* what);
// The least a chunk of a vmap call, or a set of a loop, holds until the results are joined
// (its output values and their tensors' headers): what the budget is checked with.
constexpr int64_t kChunkBytes = 512;

// The most dot-separated parts a TensorDict key may have (a module tree is a few levels deep):
// deeper keys would nest dicts as deep, and every walk over them recurses.
constexpr size_t kMaxKeyParts = 256;

// quote_key (errors.h) quotes a key for a message.

}  // namespace td
