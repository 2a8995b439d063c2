// View and shape ops: with the bdim in front every per-set dim shifts by one; results stay views.
#include "engine/ops/checks.h"
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

Shape with_batch(int64_t b, const Shape& s) {
  Shape out{b};
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

// view/reshape: B*, shape -> B shape ; expand: B*, shape -> B shape (per-set dims padded first)
std::vector<Batched> shape_rule(const RuleContext& ctx, std::span<const Batched> in,
                                const OpAttrs& attrs) {
  // sizes are resolved (a -1) and refused against the per-set shape, as a call per set (B == 0
  // too); expand pads the per-set dims so that new leading ones go after the batch dim
  Tensor x = move_bdim_to_front(in[0]);
  const Shape per_set = per_set_shape(in[0]);
  OpAttrs a = attrs;
  Shape sizes;
  if (ctx.op == OpId::expand) {
    sizes = impl::expand_shape(per_set, attrs.sizes, "per-set shape");
    x = pad_to_logical_rank(x, true, static_cast<int64_t>(sizes.size()));
  } else {
    sizes = infer_size(op_name(ctx.op), attrs.sizes, shape_numel(per_set));
  }
  a.sizes = with_batch(x.size(0), sizes);
  return one(call_op(ctx.op, {&x, 1}, a)[0], 0);
}

// permute: B*, dims -> B*, (0, dims + 1)
std::vector<Batched> permute_rule(const RuleContext& ctx, std::span<const Batched> in,
                                  const OpAttrs& attrs) {
  Tensor x = move_bdim_to_front(in[0]);
  int64_t r = logical_rank(in[0]);
  if (static_cast<int64_t>(attrs.dims.size()) != r)
    throw_error<ValueError>("[permute] got ", attrs.dims.size(), " dims ", shape_str(attrs.dims),
                            " for a tensor of shape ", shape_str(per_set_shape(in[0])));
  OpAttrs a = attrs;
  a.dims = {0};
  for (int64_t d : attrs.dims) a.dims.push_back(normalize_dim("permute", d, r) + 1);
  return one(call_op(ctx.op, {&x, 1}, a)[0], 0);
}

// ops with one per-set dim in attrs.dim (and dim2): shift them past the front bdim
std::vector<Batched> dim_rule(const RuleContext& ctx, std::span<const Batched> in,
                              const OpAttrs& attrs) {
  const char* name = op_name(ctx.op);
  Tensor x = move_bdim_to_front(in[0]);
  int64_t r = logical_rank(in[0]);
  OpAttrs a = attrs;
  switch (ctx.op) {
    case OpId::unsqueeze:
      a.dim = normalize_insert_dim(name, attrs.dim, r) + 1;
      break;
    case OpId::transpose:
      if (r == 0) {
        wrap_dim(name, attrs.dim, 0);
        wrap_dim(name, attrs.dim2, 0);
        return one(x, 0);
      }
      a.dim = normalize_dim(name, attrs.dim, r) + 1;
      a.dim2 = normalize_dim(name, attrs.dim2, r) + 1;
      break;
    case OpId::select:
      a.dim = impl::check_select(per_set_shape(in[0]), attrs.dim, attrs.start, "per-set shape") + 1;
      break;
    case OpId::slice:
      if (r == 0) throw_error<IndexError>("[", name, "] cannot ", name, " a 0-d tensor");
      a.dim = normalize_dim(name, attrs.dim, r) + 1;
      break;
    case OpId::flatten:
      if (r == 0) {  // 0-d flattens to [1]
        wrap_dim(name, attrs.dim, 0);
        wrap_dim(name, attrs.dim2, 0);
        return one(x.unsqueeze(1), 0);
      }
      a.dim = normalize_dim(name, attrs.dim, r) + 1;
      a.dim2 = normalize_dim(name, attrs.dim2, r) + 1;
      if (a.dim > a.dim2)
        throw_error<ValueError>("[flatten] start_dim ", attrs.dim, " comes after end_dim ",
                                attrs.dim2, " for shape ", shape_str(per_set_shape(in[0])));
      break;
    case OpId::unflatten:
      if (r == 0)
        throw_error<IndexError>("[", name, "] dim ", attrs.dim,
                                " given but a tensor of shape [] has no dims");
      a.dim = normalize_dim(name, attrs.dim, r) + 1;
      break;
    default:
      break;
  }
  return one(call_op(ctx.op, {&x, 1}, a)[0], 0);
}

// squeeze: only per-set size-1 dims go (never the batch dim, even when B == 1)
std::vector<Batched> squeeze_rule(const RuleContext& ctx, std::span<const Batched> in,
                                  const OpAttrs& attrs) {
  Tensor x = move_bdim_to_front(in[0]);
  int64_t r = logical_rank(in[0]);
  OpAttrs a = attrs;
  a.dims.clear();
  if (attrs.dims.empty()) {
    for (int64_t d = 1; d <= r; ++d)
      if (x.size(d) == 1) a.dims.push_back(d);
  } else {
    for (int64_t d : attrs.dims) {
      int64_t nd = wrap_dim("squeeze", d, r);
      if (r > 0 && x.size(nd + 1) == 1) a.dims.push_back(nd + 1);
    }
  }
  if (a.dims.empty()) return one(x, 0);
  return one(call_op(ctx.op, {&x, 1}, a)[0], 0);
}

}  // namespace

void register_view_rules() {
  set_batch_rule(OpId::view, shape_rule);
  set_batch_rule(OpId::reshape, shape_rule);
  set_batch_rule(OpId::expand, shape_rule);
  set_batch_rule(OpId::permute, permute_rule);
  for (OpId op : {OpId::transpose, OpId::unsqueeze, OpId::select, OpId::slice, OpId::flatten,
                  OpId::unflatten})
    set_batch_rule(op, dim_rule);
  set_batch_rule(OpId::squeeze, squeeze_rule);
}

}  // namespace td::rules
