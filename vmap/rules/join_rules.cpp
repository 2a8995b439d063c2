// cat, stack, split: unbatched inputs are expanded (stride 0) to the batch size.
#include "engine/ops.h"
#include "engine/ops/checks.h"
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// [B*] ... , dim -> B*, dim + 1
std::vector<Batched> join_rule(const RuleContext& ctx, std::span<const Batched> in,
                               const OpAttrs& any) {
  const auto& attrs = attrs_as<DimAttrs>(ctx.op, any);
  const char* name = op_name(ctx.op);
  // the stacked call below would name the stacked shapes
  std::vector<Shape> shapes;
  for (const auto& b : in) shapes.push_back(per_set_shape(b));
  if (ctx.op == OpId::stack)
    impl::check_stack(shapes, "per-set shape");
  else
    impl::check_cat(shapes, attrs.dim, "per-set shape");
  // cat skips a per-set [0] (its physical [B, 0] would not be skipped): drop it from the call,
  // keeping its dtype; all skipped gives [B, 0]
  DType dtype = in[0].value.dtype();
  std::vector<Tensor> args;
  size_t first = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    dtype = promote_types(dtype, in[i].value.dtype());
    if (ctx.op == OpId::cat && impl::cat_skips(shapes[i])) continue;
    if (args.empty()) first = i;
    args.push_back(ensure_has_bdim(in[i], ctx.batch_size));
  }
  if (args.empty()) return one(Tensor::empty({ctx.batch_size, 0}, dtype), 0);
  if (args[0].dtype() != dtype) args[0] = args[0].to(dtype);
  int64_t r = logical_rank(in[first]) + (ctx.op == OpId::stack ? 1 : 0);
  DimAttrs a = attrs;
  a.dim = normalize_dim(name, attrs.dim, r) + 1;
  return one(call_op(ctx.op, args, a)[0], 0);
}

// B*, dim -> [B*] pieces, dim + 1
std::vector<Batched> split_rule(const RuleContext& ctx, std::span<const Batched> in,
                                const OpAttrs& any) {
  const auto& attrs = attrs_as<SplitAttrs>(ctx.op, any);
  Tensor x = move_bdim_to_front(in[0]);
  SplitAttrs a = attrs;
  a.dim = impl::check_split(per_set_shape(in[0]), attrs.dim, attrs.sections, "per-set shape") + 1;
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
