// Pooling: fold the batch into N, or into C where the sets lie between images and channels.
#include "engine/ops/checks.h"
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// BNCHW -> (BN)CHW -> BNCH'W', or N(BC)HW -> N(BC)H'W' -> BNCH'W' when the sets lie between the
// images and the channels (a batched convolution's output): each merge a view, where merging B
// into N would copy every activation; a per-set 3-D input BCHW pools as is
std::vector<Batched> pool_rule(const RuleContext& ctx, std::span<const Batched> in,
                               const OpAttrs& attrs) {
  const int64_t r = logical_rank(in[0]);
  // a per-set [H, W] would pass the stacked [B, H, W] as one unbatched [C, H, W]
  if (r != 3 && r != 4)
    throw_error<ValueError>("[", op_name(ctx.op),
                            "] expects a 3-D or 4-D input, got per-set shape ",
                            shape_str(per_set_shape(in[0])));
  impl::check_pool2d(op_name(ctx.op), "per-set shape", per_set_shape(in[0]),
                     attrs_as<PoolAttrs>(ctx.op, attrs), ctx.op == OpId::max_pool2d);
  Tensor x = move_bdim_to_front(in[0]);
  // every output (max_pool2d's indices too: they count within a plane) unfolds the same way
  std::vector<Batched> out;
  if (r == 3) {
    for (const Tensor& y : call_op(ctx.op, {&x, 1}, attrs)) out.push_back({y, 0});
    return out;
  }
  if (x.stride(0) != x.size(1) * x.stride(1) && x.stride(0) == x.size(2) * x.stride(2)) {
    Tensor x2 = fold_bdim_into(x, 1);
    for (const Tensor& y : call_op(ctx.op, {&x2, 1}, attrs))
      out.push_back({unfold_bdim_from(y, 1, ctx.batch_size), 0});
    return out;
  }
  Tensor x2 = x.flatten(0, 1);
  for (const Tensor& y : call_op(ctx.op, {&x2, 1}, attrs))
    out.push_back({y.unflatten(0, {ctx.batch_size, x.size(1)}), 0});
  return out;
}

}  // namespace

void register_pool_rules() { set_family_rule(OpFamily::Pool, pool_rule); }

}  // namespace td::rules
