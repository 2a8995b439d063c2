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

// An unbatched self cannot take per-set values.
void check_self_batched(const char* name, std::span<const Batched> in) {
  const Batched& self = in[0];
  if (self.bdim) return;
  Shape s = in.size() > 1 ? per_set_shape(in.back()) : Shape{};
  throw_error<RuntimeError>(
      "[", name, "] vmap: cannot write a batched value (per-set shape ", shape_str(s),
      ") into an unbatched tensor in place (shape ", shape_str(self.value.shape()),
      "); create the destination inside the vmapped function from a batched tensor (e.g. "
      "zeros_like(x) or x.clone() for a batched x) or pass it batched");
}

// self B*, other (B)* -> self B* (same bdim), written in place
std::vector<Batched> inplace_rule(const RuleContext& ctx, std::span<const Batched> in,
                                  const OpAttrs& attrs) {
  const char* name = op_name(ctx.op);
  const Batched& self = in[0];
  check_self_batched(name, in);
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

// scatter_, scatter_add_, scatter_reduce_(self, index, src) dim: self B*, index (B)*, src (B)*
// -> self B* (same bdim), written through a view with the batch dim first; the other sides as
// scatter's rule (index_rules.cpp) lays them out.
std::vector<Batched> scatter_inplace_rule(const RuleContext& ctx, std::span<const Batched> in,
                                          const OpAttrs& attrs) {
  const char* name = op_name(ctx.op);
  check_self_batched(name, in);
  const Batched& self = in[0];
  ScatterAttrs a = attrs_as<ScatterAttrs>(ctx.op, attrs);
  // checked per set first: the stacked shapes would name the batch dim
  const Shape xs = per_set_shape(self), is = per_set_shape(in[1]), ss = per_set_shape(in[2]);
  const int64_t d =
      impl::check_scatter(name, a.dim, xs, self.value.dtype(), is, in[1].value.dtype(), &ss,
                          in[2].value.dtype(), "per-set shape");
  if (shape_numel(is) == 0) return one(self.value, self.bdim);
  // per set too: the stacked call would name the batch dim's neighbour (in-place ops are not
  // replayed set by set); an index still batched at a lower level cannot be read here, and the
  // op checks it there
  const int64_t size = xs.empty() ? 1 : xs[d];
  if (!in[1].value.is_batched())
    for (int64_t v : in[1].value.to_vector<int64_t>()) impl::check_index_in_range(name, v, size, d);
  Tensor x = movedim(self.value, *self.bdim, 0);
  Tensor idx = ensure_has_bdim(in[1], ctx.batch_size);
  Tensor src = ensure_has_bdim(in[2], ctx.batch_size);
  const bool flat = xs.empty() || is.empty() || ss.empty();
  auto one_d = [](const Tensor& t) { return t.dim() == 1 ? t.unsqueeze(1) : t; };
  a.dim = flat ? 1 : d + 1;
  const Tensor args[] = {flat ? one_d(x) : x, flat ? one_d(idx) : idx, flat ? one_d(src) : src};
  call_op(ctx.op, args, a);
  return one(self.value, self.bdim);
}

}  // namespace

void register_inplace_rules() {
  set_family_rule(OpFamily::InPlace, inplace_rule);
  for (OpId op : {OpId::scatter_, OpId::scatter_add_, OpId::scatter_reduce_})
    set_batch_rule(op, scatter_inplace_rule);
}

}  // namespace td::rules
