#pragma once
// The draws of one set of a random op, shared by the random ops and their batching rule, which
// draws set by set with each set's key.
#include <cstdint>

#include "engine/dispatch.h"

namespace td::impl {

// t, or under vmap's decomposition the physical array of t's every set: what a value check reads
Tensor all_sets(const Tensor& t);
// rand, randn and dropout_mask draw floats, randperm int64: a TypeError otherwise
void check_random_dtype(OpId op, DType dtype);
// The n draws of one set of a random factory op (rand, randn, dropout_mask or randperm) into out, of
// attrs.dtype, with (seed, stream, key): rand_impl's and friends' fill, shared with vmap's rule.
void fill_random(OpId op, const RandomAttrs& attrs, void* out, int64_t n, uint64_t seed,
                 uint64_t stream, uint64_t key);
// Dropout of contiguous unbatched float x into out with the draws of (stream, key): the one-pass
// kernel of dropout_impl, shared with vmap's dropout rule.
void fused_dropout(const Tensor& x, const Tensor& out, double p, uint64_t stream, uint64_t key);

}  // namespace td::impl
