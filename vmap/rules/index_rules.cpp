// index_select, gather and the out-of-place scatters (the in-place ones: inplace_rules.cpp).
#include <algorithm>

#include "engine/ops.h"
#include "engine/ops/checks.h"
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// index_select(x, index) dim:
//   B*, K          -> B*, dim + 1
//   (B)*X*, BK     -> x with X after B: (BX)* ; index + arange(B)*X: (BK) -> (BK)* -> BK* -> B*K*
std::vector<Batched> index_select_rule(const RuleContext& ctx, std::span<const Batched> in,
                                       const OpAttrs& attrs) {
  const Batched& x = in[0];
  const Batched& idx = in[1];
  int64_t r = logical_rank(x);
  int64_t d = wrap_dim("index_select", attrs_as<DimAttrs>(ctx.op, attrs).dim, r);
  if (!idx.bdim) {
    Tensor xf = move_bdim_to_front(x);
    if (r == 0) {
      impl::check_scalar_index_select(idx.value.shape());
      return one(index_select(xf.unsqueeze(1), 1, idx.value).select(1, 0), 0);
    }
    return one(index_select(xf, d + 1, idx.value), 0);
  }
  if (logical_rank(idx) > 1)
    throw_error<ValueError>("[index_select] index must be 0-d or 1-D, got per-set shape ",
                            shape_str(per_set_shape(idx)));
  int64_t bsz = ctx.batch_size;
  if (r == 0) impl::check_scalar_index_select(per_set_shape(idx));
  Tensor xf = ensure_has_bdim(x, bsz);  // [B, *, X, *]
  if (r == 0) xf = xf.unsqueeze(1);
  Tensor xm = movedim(xf, d + 1, 1);  // [B, X, rest]
  int64_t n = xm.size(1);
  Shape rest(xm.shape().begin() + 2, xm.shape().end());
  Shape flat_shape{bsz * n};
  flat_shape.insert(flat_shape.end(), rest.begin(), rest.end());
  Tensor table = xm.reshape(flat_shape);
  Tensor i2 = move_bdim_to_front(idx);
  bool scalar_idx = logical_rank(idx) == 0;
  if (scalar_idx) i2 = i2.unsqueeze(1);  // [B, K]
  int64_t k = i2.size(1);
  Tensor flat = offset_indices("index_select", i2, n, [&](int64_t v) {
                  impl::check_index_in_range("index_select", v, n, d);
                }).reshape({bsz * k});
  Tensor y = index_select(table, 0, flat);  // [B*K, rest]
  Shape ys{bsz, k};
  ys.insert(ys.end(), rest.begin(), rest.end());
  Tensor out = movedim(y.view(ys), 1, d + 1);
  if (r == 0) out = out.select(1, 0);
  return one(out, 0);
}

// gather(x, index) dim: B*, B* -> B* (an unbatched side is expanded with stride 0); a per-set
// 0-d side counts as 1-D of size 1, as unbatched: B, BK -> B1, BK -> BK
std::vector<Batched> gather_rule(const RuleContext& ctx, std::span<const Batched> in,
                                 const OpAttrs& attrs) {
  int64_t r = logical_rank(in[0]), ri = logical_rank(in[1]);
  int64_t d = wrap_dim("gather", attrs_as<DimAttrs>(ctx.op, attrs).dim, r);
  if (std::max<int64_t>(r, 1) != std::max<int64_t>(ri, 1))
    throw_error<ValueError>("[gather] index of per-set shape ", shape_str(per_set_shape(in[1])),
                            " must have as many dims as input of per-set shape ",
                            shape_str(per_set_shape(in[0])));
  Tensor xf = ensure_has_bdim(in[0], ctx.batch_size);
  Tensor idx = ensure_has_bdim(in[1], ctx.batch_size);
  if (r == 0 || ri == 0) {
    Tensor y = gather(r == 0 ? xf.unsqueeze(1) : xf, 1, ri == 0 ? idx.unsqueeze(1) : idx);
    return one(ri == 0 ? y.select(1, 0) : y, 0);
  }
  return one(gather(xf, d + 1, idx), 0);
}

}  // namespace

// scatter, scatter_add, scatter_reduce(x, index, src) dim: B*, B*, B* -> B* (an unbatched side
// expanded with stride 0); a per-set 0-d side counts as 1-D of size 1, as unbatched: B, BK, BK
// -> B1, BK, BK -> B1 -> B. The sets' writes land in their own rows, in each set's index order,
// so the result is the per-set loop's bit for bit.
std::vector<Batched> scatter_rule(const RuleContext& ctx, std::span<const Batched> in,
                                  const OpAttrs& attrs) {
  ScatterAttrs a = attrs_as<ScatterAttrs>(ctx.op, attrs);
  const Shape xs = per_set_shape(in[0]), is = per_set_shape(in[1]), ss = per_set_shape(in[2]);
  const int64_t d =
      impl::check_scatter(op_name(ctx.op), a.dim, xs, in[0].value.dtype(), is, in[1].value.dtype(),
                          &ss, in[2].value.dtype(), "per-set shape");
  Tensor x = ensure_has_bdim(in[0], ctx.batch_size);
  if (shape_numel(is) == 0) return one(x.clone(), 0);  // nothing written, shapes unchecked
  Tensor idx = ensure_has_bdim(in[1], ctx.batch_size);
  Tensor src = ensure_has_bdim(in[2], ctx.batch_size);
  const bool flat = xs.empty() || is.empty() || ss.empty();
  auto one_d = [](const Tensor& t) { return t.dim() == 1 ? t.unsqueeze(1) : t; };
  a.dim = flat ? 1 : d + 1;
  const Tensor args[] = {flat ? one_d(x) : x, flat ? one_d(idx) : idx, flat ? one_d(src) : src};
  Tensor y = call_op(ctx.op, args, a)[0];
  return one(flat && xs.empty() ? y.select(1, 0) : y, 0);
}

void register_index_rules() {
  set_batch_rule(OpId::index_select, index_select_rule);
  set_batch_rule(OpId::gather, gather_rule);
  set_batch_rule(OpId::scatter, scatter_rule);
  set_batch_rule(OpId::scatter_add, scatter_rule);
  set_batch_rule(OpId::scatter_reduce, scatter_rule);
}

}  // namespace td::rules
