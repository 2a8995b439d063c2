// layer_norm and batch_norm.
#include "engine/ops.h"
#include "engine/ops/checks.h"
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// layer_norm(x, w?, b?): B*N -> B*N with the bdim in front (normalized dims are trailing);
// batched w/b at a single level: one call with every set's weights (per_set_affine, sets), each
// set's rows with its own, so a set gets the bits of its call alone.
std::vector<Batched> layer_norm_rule(const RuleContext& ctx, std::span<const Batched> in,
                                     const OpAttrs& any) {
  const auto& attrs = attrs_as<LayerNormAttrs>(ctx.op, any);
  const Batched& x = in[0];
  Batched w = in.size() > 1 ? in[1] : Batched{};
  Batched b = in.size() > 2 ? in[2] : Batched{};
  // the ops below see stacked shapes (and promote a batched w or b): check the per-set call
  impl::check_floating("layer_norm", x.value);
  impl::check_same_dtype("layer_norm", x.value, w.value, "weight");
  impl::check_same_dtype("layer_norm", x.value, b.value, "bias");
  impl::check_layer_norm("per-set shape", per_set_shape(x), attrs.normalized_shape,
                         OptShape(w).get(), OptShape(b).get());
  double eps = attrs.eps;
  if (!w.bdim && !b.bdim)
    return one(layer_norm(move_bdim_to_front(x), attrs.normalized_shape, w.value, b.value, eps), 0);
  auto outer = [](const Batched& p) { return p.value.defined() && p.value.is_batched(); };
  const int64_t sets = ctx.batch_size;
  if (!active_levels().empty() || outer(x) || outer(w) || outer(b)) {
    // nested levels: normalise without w and b, then B*N * B1..N + B1..N
    Tensor y = layer_norm(move_bdim_to_front(x), attrs.normalized_shape, {}, {}, eps);
    Batched yb{y, x.bdim ? std::optional<int64_t>(0) : std::nullopt};
    int64_t r = logical_rank(yb);
    auto aligned = [&](const Batched& p) { return p.bdim ? front_and_pad(p, r) : p.value; };
    if (w.value.defined()) y = mul(y, aligned(w));
    if (b.value.defined()) y = add(y, aligned(b));
    return one(y, 0);  // bdim-front: at least one of x, w, b is batched
  }
  Shape stacked = attrs.normalized_shape;
  stacked.insert(stacked.begin(), sets);
  auto per_set = [&](const Batched& p) -> Tensor {
    if (!p.value.defined()) return {};
    return (p.bdim ? move_bdim_to_front(p) : p.value.unsqueeze(0).expand(stacked)).contiguous();
  };
  const Tensor args[] = {ensure_has_bdim(x, sets), per_set(w), per_set(b)};
  LayerNormAttrs a = attrs;
  a.per_set_affine = true;
  a.sets = sets;
  return one(call_op(OpId::layer_norm, args, a)[0], 0);
}

// batch_norm(x, rm?, rv?, w?, b?) folds B into channels:
//   BNC* -> N(BC)*, stats/affine BC -> (BC) ; out N(BC)* -> NBC*, bdim 1
// Batched running stats are [B*C] views of the same storage when possible, so the in-place
// update of training mode writes each set's slice.
std::vector<Batched> batch_norm_rule(const RuleContext& ctx, std::span<const Batched> in,
                                     const OpAttrs& any) {
  const auto& attrs = attrs_as<BatchNormAttrs>(ctx.op, any);
  auto get = [&](size_t i) { return in.size() > i ? in[i] : Batched{}; };
  Batched x = in[0], rm = get(1), rv = get(2), w = get(3), b = get(4);
  int64_t bsz = ctx.batch_size;
  const bool training = attrs.training;
  // the folded call below sees B*C channels: check the per-set shapes as a call per set would
  impl::check_batch_norm("per-set shape", per_set_shape(x), OptShape(rm).get(), OptShape(rv).get(),
                         OptShape(w).get(), OptShape(b).get(), training);
  // dtypes before the running-stats error below, as a call per set orders them
  impl::check_floating("batch_norm", x.value);
  impl::check_same_dtype("batch_norm", x.value, w.value, "weight");
  impl::check_same_dtype("batch_norm", x.value, b.value, "bias");
  if (x.bdim && training && ((rm.value.defined() && !rm.bdim) || (rv.value.defined() && !rv.bdim)))
    throw_error<RuntimeError>(
        "[batch_norm] the input is batched but running_mean/running_var are not; in training "
        "they are updated in place, so stack them per set (e.g. functional_vmap over params "
        "with stacked buffers from TensorDict::from_modules) or use track_running_stats=False "
        "(per-set input shape ",
        shape_str(per_set_shape(x)), ", running_mean shape ",
        rm.value.defined() ? shape_str(rm.value.shape()) : std::string("None"), ")");
  Tensor xf = ensure_has_bdim(x, bsz);  // [B, N, C, *]
  int64_t c = xf.size(2);
  Tensor x2 = fold_bdim_into(xf, 1);  // [N, B*C, *]
  // [B, C] (or shared [C]) -> [B*C]; `view_ok` tells whether it shares the storage
  auto flat = [&](const Batched& p, bool* view_ok) -> Tensor {
    if (!p.value.defined()) return {};
    // a writable copy: training writes the stats into it (with c == 1 the reshape of the
    // expanded [B, 1] would be a stride-0 view, refused by the write-back of a nested level)
    if (!p.bdim) return p.value.unsqueeze(0).expand({bsz, c}).reshape({bsz * c}).contiguous();
    Tensor f = move_bdim_to_front(p);
    if (view_ok && f.is_contiguous()) {
      try {
        Tensor v = f.view({bsz * c});
        *view_ok = true;
        return v;
      } catch (const RuntimeError&) {
      }
    }
    if (view_ok) *view_ok = false;
    return f.contiguous().view({bsz * c});
  };
  bool rm_view = true, rv_view = true;
  Tensor rm2 = flat(rm, &rm_view), rv2 = flat(rv, &rv_view);
  Tensor w2 = flat(w, nullptr), b2 = flat(b, nullptr);
  const Tensor folded[] = {x2, rm2, rv2, w2, b2};
  Tensor y = call_op(OpId::batch_norm, folded, attrs)[0];  // attrs as given: fused_relu too
  if (training) {
    // An unbatched stat beside a batched one: x is unbatched too (checked above), so every set
    // computed the same update into the temporary; it is written once, as a call per set does.
    if (rm.value.defined() && !rm.bdim) copy_(rm.value, rm2.view({bsz, c}).select(0, 0));
    if (rv.value.defined() && !rv.bdim) copy_(rv.value, rv2.view({bsz, c}).select(0, 0));
    // stats computed into temporaries: write each set's slice back
    if (rm.bdim && !rm_view) {
      Tensor dst = move_bdim_to_front(rm);
      copy_(dst, rm2.view({bsz, c}));
    }
    if (rv.bdim && !rv_view) {
      Tensor dst = move_bdim_to_front(rv);
      copy_(dst, rv2.view({bsz, c}));
    }
  }
  return one(y.unflatten(1, {bsz, c}), 1);
}

}  // namespace

void register_norm_rules() {
  set_batch_rule(OpId::layer_norm, layer_norm_rule);
  set_batch_rule(OpId::batch_norm, batch_norm_rule);
}

}  // namespace td::rules
