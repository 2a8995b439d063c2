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
                                const OpAttrs& any) {
  const auto& attrs = attrs_as<SizesAttrs>(ctx.op, any);
  // sizes are resolved (a -1) and refused against the per-set shape, as a call per set (B == 0
  // too); expand pads the per-set dims so that new leading ones go after the batch dim
  Tensor x = move_bdim_to_front(in[0]);
  const Shape per_set = per_set_shape(in[0]);
  SizesAttrs a = attrs;
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
                                  const OpAttrs& any) {
  const auto& attrs = attrs_as<DimsAttrs>(ctx.op, any);
  Tensor x = move_bdim_to_front(in[0]);
  int64_t r = logical_rank(in[0]);
  if (static_cast<int64_t>(attrs.dims.size()) != r)
    throw_error<ValueError>("[permute] got ", attrs.dims.size(), " dims ", shape_str(attrs.dims),
                            " for a tensor of shape ", shape_str(per_set_shape(in[0])));
  DimsAttrs a = attrs;
  a.dims = {0};
  for (int64_t d : attrs.dims) a.dims.push_back(normalize_dim("permute", d, r) + 1);
  return one(call_op(ctx.op, {&x, 1}, a)[0], 0);
}

// ops with per-set dims in their attributes: a copy of them with the dims shifted past the
// front bdim
std::vector<Batched> dim_rule(const RuleContext& ctx, std::span<const Batched> in,
                              const OpAttrs& attrs) {
  const char* name = op_name(ctx.op);
  Tensor x = move_bdim_to_front(in[0]);
  int64_t r = logical_rank(in[0]);
  auto call = [&](const OpAttrs& a) { return one(call_op(ctx.op, {&x, 1}, a)[0], 0); };
  switch (ctx.op) {
    case OpId::unsqueeze: {
      DimAttrs a = attrs_as<DimAttrs>(ctx.op, attrs);
      a.dim = normalize_insert_dim(name, a.dim, r) + 1;
      return call(a);
    }
    case OpId::transpose: {
      TransposeAttrs a = attrs_as<TransposeAttrs>(ctx.op, attrs);
      if (r == 0) {
        wrap_dim(name, a.dim0, 0);
        wrap_dim(name, a.dim1, 0);
        return one(x, 0);
      }
      a.dim0 = normalize_dim(name, a.dim0, r) + 1;
      a.dim1 = normalize_dim(name, a.dim1, r) + 1;
      return call(a);
    }
    case OpId::select: {
      SelectAttrs a = attrs_as<SelectAttrs>(ctx.op, attrs);
      a.dim = impl::check_select(per_set_shape(in[0]), a.dim, a.index, "per-set shape") + 1;
      return call(a);
    }
    case OpId::slice: {
      SliceAttrs a = attrs_as<SliceAttrs>(ctx.op, attrs);
      if (r == 0) throw_error<IndexError>("[", name, "] cannot ", name, " a 0-d tensor");
      a.dim = normalize_dim(name, a.dim, r) + 1;
      return call(a);
    }
    case OpId::flatten: {
      FlattenAttrs a = attrs_as<FlattenAttrs>(ctx.op, attrs);
      if (r == 0) {  // 0-d flattens to [1]
        wrap_dim(name, a.start_dim, 0);
        wrap_dim(name, a.end_dim, 0);
        return one(x.unsqueeze(1), 0);
      }
      const int64_t s0 = normalize_dim(name, a.start_dim, r) + 1;
      const int64_t s1 = normalize_dim(name, a.end_dim, r) + 1;
      if (s0 > s1)
        throw_error<ValueError>("[flatten] start_dim ", a.start_dim, " comes after end_dim ",
                                a.end_dim, " for shape ", shape_str(per_set_shape(in[0])));
      a.start_dim = s0;
      a.end_dim = s1;
      return call(a);
    }
    case OpId::unflatten: {
      UnflattenAttrs a = attrs_as<UnflattenAttrs>(ctx.op, attrs);
      if (r == 0)
        throw_error<IndexError>("[", name, "] dim ", a.dim,
                                " given but a tensor of shape [] has no dims");
      a.dim = normalize_dim(name, a.dim, r) + 1;
      return call(a);
    }
    default:
      return call(attrs);
  }
}

// squeeze: only per-set size-1 dims go (never the batch dim, even when B == 1)
std::vector<Batched> squeeze_rule(const RuleContext& ctx, std::span<const Batched> in,
                                  const OpAttrs& any) {
  const auto& attrs = attrs_as<DimsAttrs>(ctx.op, any);
  Tensor x = move_bdim_to_front(in[0]);
  int64_t r = logical_rank(in[0]);
  DimsAttrs a = attrs;
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
