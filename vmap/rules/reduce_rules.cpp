// Reductions and softmax: per-set dims shift past the front batch dim; "all dims" means all
// per-set dims, so the batch is never reduced.
#include "engine/ops/checks.h"
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// B*, dims -> B*(reduced); 0-d per-set tensors reduce a size-1 stand-in dim
std::vector<Batched> reduce_rule(const RuleContext& ctx, std::span<const Batched> in,
                                 const OpAttrs& any) {
  const auto& attrs = attrs_as<ReduceAttrs>(ctx.op, any);
  Tensor x = move_bdim_to_front(in[0]);
  int64_t rank = logical_rank(in[0]);
  ReduceAttrs a = attrs;
  // checked per set (the stacked call would name the stacked shape and the shifted dims); the
  // per-set dims come back normalised, all of them for none
  const IntList dims =
      impl::check_reduce(ctx.op, per_set_shape(in[0]), x.dtype(), attrs.dims, "per-set shape");
  bool arg = ctx.op == OpId::argmax || ctx.op == OpId::argmin;
  if (rank == 0) {
    a.dims = {1};
    a.keepdim = false;
    Tensor u = x.unsqueeze(1);
    return one(call_op(ctx.op, {&u, 1}, a)[0], 0);
  }
  if (arg && attrs.dims.empty()) {
    // flattened per set: B* -> B(n) -> B, then keepdim restores per-set 1s
    Tensor f = x.flatten(1, -1);
    a.dims = {1};
    a.keepdim = false;
    Tensor r = call_op(ctx.op, {&f, 1}, a)[0];
    if (attrs.keepdim) {
      Shape s(rank + 1, 1);
      s[0] = x.size(0);
      r = r.view(s);
    }
    return one(r, 0);
  }
  a.dims.clear();
  for (int64_t d : dims) a.dims.push_back(d + 1);
  return one(call_op(ctx.op, {&x, 1}, a)[0], 0);
}

// B*, dim -> B*
std::vector<Batched> softmax_rule(const RuleContext& ctx, std::span<const Batched> in,
                                  const OpAttrs& any) {
  const auto& attrs = attrs_as<DimAttrs>(ctx.op, any);
  Tensor x = move_bdim_to_front(in[0]);
  int64_t rank = logical_rank(in[0]);
  impl::check_floating(op_name(ctx.op), per_set_shape(in[0]), x.dtype(), "per-set shape");
  DimAttrs a = attrs;
  a.dim = wrap_dim(op_name(ctx.op), attrs.dim, rank) + 1;
  if (rank == 0) {
    Tensor u = x.unsqueeze(1);
    return one(call_op(ctx.op, {&u, 1}, a)[0].squeeze(1), 0);
  }
  return one(call_op(ctx.op, {&x, 1}, a)[0], 0);
}

}  // namespace

void register_reduce_rules() {
  set_family_rule(OpFamily::Reduce, reduce_rule);
  set_family_rule(OpFamily::Softmax, softmax_rule);
}

}  // namespace td::rules
