// cat, stack, split: unbatched inputs are expanded (stride 0) to the batch size.
#include "engine/ops.h"
#include "engine/ops/impls.h"
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// [B*] ... , dim -> B*, dim + 1
std::vector<Batched> join_rule(const RuleContext& ctx, std::span<const Batched> in,
                               const OpAttrs& attrs) {
  const char* name = op_name(ctx.op);
  // the stacked call below would name the stacked shapes
  std::vector<Shape> shapes;
  for (const auto& b : in) shapes.push_back(per_set_shape(b));
  if (ctx.op == OpId::stack)
    impl::check_stack(shapes, "per-set shape");
  else
    impl::check_cat(shapes, attrs.dim, "per-set shape");
  int64_t r = logical_rank(in[0]) + (ctx.op == OpId::stack ? 1 : 0);
  OpAttrs a = attrs;
  a.dim = normalize_dim(name, attrs.dim, r) + 1;
  std::vector<Tensor> args;
  for (const auto& b : in) args.push_back(ensure_has_bdim(b, ctx.batch_size));
  return one(call_op(ctx.op, args, a)[0], 0);
}

// B*, dim -> [B*] pieces, dim + 1
std::vector<Batched> split_rule(const RuleContext& ctx, std::span<const Batched> in,
                                const OpAttrs& attrs) {
  Tensor x = move_bdim_to_front(in[0]);
  OpAttrs a = attrs;
  a.dim = normalize_dim("split", attrs.dim, logical_rank(in[0])) + 1;
  std::vector<Batched> out;
  for (auto& t : call_op(ctx.op, {&x, 1}, a)) out.push_back({t, 0});
  return out;
}

}  // namespace

void register_join_rules() {
  set_batch_rule(OpId::cat, join_rule);
  set_batch_rule(OpId::stack, join_rule);
  set_batch_rule(OpId::split, split_rule);
}

}  // namespace td::rules
