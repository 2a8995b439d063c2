#pragma once
// functorch-style helpers for batching rules. A rule sees Batched{value, bdim}: value's logical
// dims include the batch dim at bdim (if any); the "logical rank" is the per-set rank.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "engine/batching.h"
#include "engine/dispatch.h"
#include "engine/tensor.h"

namespace td::rules {

// Per-set rank: value.dim() without the batch dim.
int64_t logical_rank(const Batched& b);
// Moves dim `from` of t to position `to` (a permute view).
Tensor movedim(const Tensor& t, int64_t from, int64_t to);
// The value with the batch dim at 0 (an unbatched value is returned as is).
Tensor move_bdim_to_front(const Batched& b);
// As move_bdim_to_front, but an unbatched value is expanded (stride 0) to [batch_size, ...].
Tensor ensure_has_bdim(const Batched& b, int64_t batch_size);
// [B, ..., X, ...] -> [..., B*X, ...]: folds the front batch dim into dim (a dim of the per-set
// view, i.e. physical dim + 1). Copies only when no view exists.
Tensor fold_bdim_into(const Tensor& t, int64_t dim);
// [..., B*X, ...] -> [B, ..., X, ...]: the inverse of fold_bdim_into (dim indexes t; B > 0).
Tensor unfold_bdim_from(const Tensor& t, int64_t dim, int64_t batch_size);
// Inserts size-1 dims after the front batch dim (or at the front if unbatched) so that the
// per-set rank becomes rank; broadcasting against a bdim-front tensor then lines up.
Tensor pad_to_logical_rank(const Tensor& t, bool has_bdim, int64_t rank);
// Batch dim front plus padding: the common prologue of broadcasting rules.
Tensor front_and_pad(const Batched& b, int64_t rank);
// Normalises a per-set dim against a per-set rank (0-d tensors accept 0 and -1).
int64_t wrap_dim(const char* op, int64_t dim, int64_t rank);
// The per-set shape of a Batched value (for messages, and the impls' shared shape checks).
Shape per_set_shape(const Batched& b);
// The per-set shape of an optional input as those checks take it: get() is null when absent.
class OptShape {
 public:
  explicit OptShape(const Batched& b) : present_(b.value.defined()) {
    if (present_) shape_ = per_set_shape(b);
  }
  const Shape* get() const { return present_ ? &shape_ : nullptr; }

 private:
  Shape shape_;
  bool present_;
};
// Sets rule for every built-in op of family f.
void set_family_rule(OpFamily f, BatchRule rule);
// Adds offsets arange(B) * table_size (shaped [B, 1, ..]) to bdim-front indices [B, *], after
// checking that each index lies in [0, table_size) (an out-of-range index would silently read
// another set's table otherwise): out_of_range(index) throws the op's IndexError, naming the
// per-set table as a call per set would. op names the op in the dtype's TypeError.
Tensor offset_indices(const char* op, const Tensor& idx_front, int64_t table_size,
                      const std::function<void(int64_t)>& out_of_range);
// Shorthand for a single output.
inline std::vector<Batched> one(Tensor t, std::optional<int64_t> bdim) {
  std::vector<Batched> out;
  out.push_back({std::move(t), bdim});
  return out;
}

}  // namespace td::rules
