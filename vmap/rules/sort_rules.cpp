// sort, argsort and topk: the per-set dim shifts past the front batch dim; every output (the
// indices too, which count along that dim) keeps the batch dim in front.
#include "engine/ops/checks.h"
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

std::vector<Batched> all_front(std::vector<Tensor> ys, bool squeeze_stand_in) {
  std::vector<Batched> out;
  for (Tensor& y : ys) out.push_back({squeeze_stand_in ? y.squeeze(1) : std::move(y), 0});
  return out;
}

// sort, argsort: B*, dim -> B*, dim + 1 (values and indices alike); a 0-d per-set input sorts
// a size-1 stand-in dim: B -> B1 -> B
std::vector<Batched> sort_rule(const RuleContext& ctx, std::span<const Batched> in,
                               const OpAttrs& any) {
  SortAttrs a = attrs_as<SortAttrs>(ctx.op, any);
  Tensor x = move_bdim_to_front(in[0]);
  const int64_t rank = logical_rank(in[0]);
  a.dim = impl::check_one_dim(op_name(ctx.op), per_set_shape(in[0]), a.dim, "per-set shape") + 1;
  if (rank == 0) x = x.unsqueeze(1);
  return all_front(call_op(ctx.op, {&x, 1}, a), rank == 0);
}

// topk: B*, dim -> B*(k at dim + 1); a 0-d per-set input (k 0 or 1) keeps one element per set,
// as an unbatched call does: B -> B1 -> B
std::vector<Batched> topk_rule(const RuleContext& ctx, std::span<const Batched> in,
                               const OpAttrs& any) {
  TopkAttrs a = attrs_as<TopkAttrs>(ctx.op, any);
  Tensor x = move_bdim_to_front(in[0]);
  const int64_t rank = logical_rank(in[0]);
  a.dim = impl::check_topk(per_set_shape(in[0]), a.k, a.dim, "per-set shape") + 1;
  if (rank == 0) {
    x = x.unsqueeze(1);
    a.k = 1;
  }
  return all_front(call_op(ctx.op, {&x, 1}, a), rank == 0);
}

}  // namespace

void register_sort_rules() {
  set_batch_rule(OpId::sort, sort_rule);
  set_batch_rule(OpId::argsort, sort_rule);
  set_batch_rule(OpId::topk, topk_rule);
}

}  // namespace td::rules
