// In-place ops: self batched at this level is written through its physical layout, each set's
// slice by its own values; a batched value into an unbatched self is an error.
#include "engine/ops.h"
#include "engine/ops/checks.h"
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// Lays `other` out to broadcast against self's physical layout: per-set dims right-aligned,
// the batch dim (or a unit dim) at self's bdim.
Tensor align_to_self(const Batched& other, int64_t self_rank, int64_t self_bdim) {
  Tensor t = front_and_pad(other, self_rank);  // [B, *self-rank] or [1.., *]
  if (!other.bdim) {
    t = pad_to_logical_rank(t, false, self_rank);
    return t.unsqueeze(self_bdim);
  }
  return movedim(t, 0, self_bdim);
}

// self B*, other (B)* -> self B* (same bdim), written in place
std::vector<Batched> inplace_rule(const RuleContext& ctx, std::span<const Batched> in,
                                  const OpAttrs& attrs) {
  const char* name = op_name(ctx.op);
  const Batched& self = in[0];
  if (!self.bdim) {
    Shape s = in.size() > 1 ? per_set_shape(in[1]) : Shape{};
    throw_error<RuntimeError>(
        "[", name, "] vmap: cannot write a batched value (per-set shape ", shape_str(s),
        ") into an unbatched tensor in place (shape ", shape_str(self.value.shape()),
        "); create the destination inside the vmapped function from a batched tensor (e.g. "
        "zeros_like(x) or x.clone() for a batched x) or pass it batched");
  }
  std::vector<Tensor> args{self.value};
  const Shape ss = per_set_shape(self);
  for (size_t i = 1; i < in.size(); ++i) {
    // checked per set, as a call per set would: against the physical layout an operand with
    // more dims than self ([1, 4] into a per-set [4]) broadcast over the batch dim instead
    impl::check_broadcasts_to(name, ss, per_set_shape(in[i]), "per-set shape");
    args.push_back(align_to_self(in[i], logical_rank(self), *self.bdim));
  }
  call_op(ctx.op, args, attrs);
  return one(self.value, self.bdim);
}

}  // namespace

void register_inplace_rules() { set_family_rule(OpFamily::InPlace, inplace_rule); }

}  // namespace td::rules
