// cumsum and cumprod: the per-set dim shifts past the front batch dim.
#include "engine/ops/checks.h"
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// B*, dim -> B*, dim + 1; a 0-d per-set input scans a size-1 stand-in dim: B -> B1 -> B
std::vector<Batched> scan_rule(const RuleContext& ctx, std::span<const Batched> in,
                               const OpAttrs& any) {
  ScanAttrs a = attrs_as<ScanAttrs>(ctx.op, any);
  Tensor x = move_bdim_to_front(in[0]);
  const int64_t rank = logical_rank(in[0]);
  // checked per set: the stacked call would accept dim == rank
  const Shape s = per_set_shape(in[0]);
  impl::check_scan(ctx.op, s, x.dtype(), a, "per-set shape");
  a.dim = impl::check_one_dim(op_name(ctx.op), s, a.dim, "per-set shape") + 1;
  if (rank == 0) {
    Tensor u = x.unsqueeze(1);
    return one(call_op(ctx.op, {&u, 1}, a)[0].squeeze(1), 0);
  }
  return one(call_op(ctx.op, {&x, 1}, a)[0], 0);
}

}  // namespace

void register_scan_rules() { set_family_rule(OpFamily::Scan, scan_rule); }

}  // namespace td::rules
