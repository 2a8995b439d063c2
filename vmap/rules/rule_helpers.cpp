#include "vmap/rules/rule_helpers.h"

#include "engine/ops.h"

namespace td::rules {

int64_t logical_rank(const Batched& b) { return b.value.dim() - (b.bdim ? 1 : 0); }

Tensor movedim(const Tensor& t, int64_t from, int64_t to) {
  int64_t n = t.dim();
  from = normalize_dim("movedim", from, n);
  to = normalize_dim("movedim", to, n);
  if (from == to) return t;
  IntList perm;
  for (int64_t d = 0; d < n; ++d)
    if (d != from) perm.push_back(d);
  perm.insert(perm.begin() + to, from);
  return t.permute(perm);
}

Tensor move_bdim_to_front(const Batched& b) {
  return b.bdim ? movedim(b.value, *b.bdim, 0) : b.value;
}

Tensor ensure_has_bdim(const Batched& b, int64_t batch_size) {
  if (b.bdim) return move_bdim_to_front(b);
  Shape s = b.value.shape();
  s.insert(s.begin(), batch_size);
  return b.value.unsqueeze(0).expand(s);
}

Tensor fold_bdim_into(const Tensor& t, int64_t dim) {
  // [B, ..., X, ...]: put B right before X, then merge the two
  int64_t x = dim + 1;
  Tensor m = movedim(t, 0, x - 1);
  return m.flatten(x - 1, x);
}

Tensor unfold_bdim_from(const Tensor& t, int64_t dim, int64_t batch_size) {
  Tensor u = t.unflatten(dim, {batch_size, -1});
  return movedim(u, dim, 0);
}

Tensor pad_to_logical_rank(const Tensor& t, bool has_bdim, int64_t rank) {
  Tensor r = t;
  int64_t have = t.dim() - (has_bdim ? 1 : 0);
  for (; have < rank; ++have) r = r.unsqueeze(has_bdim ? 1 : 0);
  return r;
}

Tensor front_and_pad(const Batched& b, int64_t rank) {
  return pad_to_logical_rank(move_bdim_to_front(b), b.bdim.has_value(), rank);
}

int64_t wrap_dim(const char* op, int64_t dim, int64_t rank) {
  if (rank == 0) {
    if (dim != 0 && dim != -1)
      throw_error<IndexError>("[", op, "] dim ", dim, " out of range for a 0-d tensor");
    return 0;
  }
  return normalize_dim(op, dim, rank);
}

Shape per_set_shape(const Batched& b) {
  Shape s = b.value.shape();
  if (b.bdim) s.erase(s.begin() + *b.bdim);
  return s;
}

void set_family_rule(OpFamily f, BatchRule rule) {
  for (int i = 0; i < static_cast<int>(OpId::kNumBuiltin); ++i)
    if (op_info(static_cast<OpId>(i)).family == f) set_batch_rule(static_cast<OpId>(i), rule);
}

Tensor offset_indices(const char* op, const Tensor& idx_front, int64_t table_size,
                      const std::function<void(int64_t)>& out_of_range) {
  int64_t batch = idx_front.size(0);
  const Tensor& idx = idx_front;
  if (idx.dtype() != DType::Int64)  // a float index must not be truncated into a row
    throw_error<TypeError>("[", op, "] indices must be int64, got ", idx.dtype(),
                           " of per-set shape ", Shape(idx.shape().begin() + 1, idx.shape().end()));
  Shape off_shape(idx.dim(), 1);
  off_shape[0] = batch;
  Tensor offsets = mul(arange(static_cast<double>(batch), kInt64),
                       scalar_tensor(static_cast<double>(table_size), kInt64))
                       .view(off_shape);
  if (!idx.is_batched()) {
    for (int64_t v : idx.to_vector<int64_t>())
      if (v < 0 || v >= table_size) {
        out_of_range(v);
        throw_error<IndexError>("[", op, "] index ", v, " is out of range");  // if it did not
      }
    return add(idx, offsets);
  }
  // Still batched at lower levels: the data cannot be read here, so map a bad index to one
  // past the folded table, which the op itself rejects.
  Tensor bad = logical_or(lt(idx, scalar_tensor(0, kInt64)),
                          ge(idx, scalar_tensor(static_cast<double>(table_size), kInt64)));
  return where(bad, scalar_tensor(static_cast<double>(batch * table_size), kInt64),
               add(idx, offsets));
}

}  // namespace td::rules
