// conv2d: fold the batch into N (batched input only) or into groups (batched weight).
#include "engine/ops.h"
#include "engine/ops/checks.h"
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

Tensor conv(const Tensor& x, const Tensor& w, const Tensor& b, const ConvAttrs& a, int64_t groups,
            int64_t sets = 1) {
  ConvAttrs c = a;
  c.groups = groups;
  c.sets = sets;
  return call_op1(OpId::conv2d, {x, w, b}, c);
}

// conv2d(x, w, b?):
//   BNCHW, OCkk        -> (BN)CHW -> BNOH'W'
//   NCHW, BOCkk        -> w (BO)Ckk as B sets of filters -> N(BO)H'W' -> NBOH'W' (bdim 1)
//   BNCHW, BOCkk       -> N(BC)HW with groups*B, w (BO)Ckk -> N(BO)H'W' -> NBOH'W' (bdim 1)
// A per-set 3-D input [C, H, W] gets a unit N. A batched bias with shared filters makes the
// filters per-set banks (expanded, not copied): the GEMM then starts each output from its set's
// bias, as one set alone does, instead of adding it afterwards with other bits.
// A call with sets > 1 (an inner vmap's shared-input ensemble, batched again here) is the
// grouped conv it equals: the input's channels repeated once per set, groups * sets.
std::vector<Batched> conv2d_rule(const RuleContext& ctx, std::span<const Batched> in,
                                 const OpAttrs& any) {
  const auto& attrs = attrs_as<ConvAttrs>(ctx.op, any);
  Batched x = in[0], w = in[1];
  Batched b = in.size() > 2 ? in[2] : Batched{};
  if (attrs.sets > 1) {
    Tensor xf = move_bdim_to_front(x);  // [B?, N?, C, H, W]
    const int64_t cd = xf.dim() - 3;
    Shape s = xf.shape();
    s.insert(s.begin() + cd, attrs.sets);
    Tensor rep = xf.unsqueeze(cd).expand(s).flatten(cd, cd + 1);
    ConvAttrs a = attrs;
    a.groups *= attrs.sets;
    a.sets = 1;
    std::vector<Batched> in2{{rep, x.bdim ? std::optional<int64_t>(0) : std::nullopt}, w, b};
    return conv2d_rule(ctx, in2, a);
  }
  int64_t bsz = ctx.batch_size;
  int64_t xr = logical_rank(x);
  if (xr != 3 && xr != 4)
    throw_error<ValueError>("[conv2d] expected a 3-D or 4-D input, got per-set shape ",
                            shape_str(per_set_shape(x)));
  if (logical_rank(w) != 4)
    throw_error<ValueError>("[conv2d] expected a 4-D weight, got per-set shape ",
                            shape_str(per_set_shape(w)));
  impl::check_conv2d("per-set shape", per_set_shape(x), per_set_shape(w), OptShape(b).get(), attrs);
  if (bsz == 0) {
    // nothing to fold (groups * 0 is invalid): the per-set output shape, with no sets
    auto per_set = [](const Batched& p) {
      return p.value.defined() ? zeros(per_set_shape(p), p.value.dtype()) : Tensor();
    };
    Shape s = conv(per_set(x), per_set(w), per_set(b), attrs, attrs.groups).shape();
    s.insert(s.begin(), 0);
    return one(zeros(s, x.value.dtype()), 0);
  }
  Tensor xf = move_bdim_to_front(x);
  if (xr == 3) {
    xf = xf.unsqueeze(x.bdim ? 1 : 0);
    x = {xf, x.bdim ? std::optional<int64_t>(0) : std::nullopt};
  }
  auto finish = [&](Tensor out, int64_t bdim) -> std::vector<Batched> {
    if (xr == 3) out = out.select(bdim == 0 ? 1 : 0, 0);  // drop the unit N
    return one(out, xr == 3 && bdim == 1 ? 0 : bdim);
  };
  Tensor y;
  if (!w.bdim && b.bdim) {
    Shape ws = w.value.shape();
    ws.insert(ws.begin(), bsz);
    w = {w.value.unsqueeze(0).expand(ws), 0};
  }
  if (!w.bdim) {
    // BNCHW -> (BN)CHW
    Tensor x2 = xf.flatten(0, 1);
    y = conv(x2, w.value, b.value, attrs, attrs.groups);
    return finish(y.unflatten(0, {bsz, xf.size(1)}), 0);  // [B, N, O, H', W']
  }
  Tensor wf = move_bdim_to_front(w);  // [B, O, C/g, kh, kw]
  int64_t out_c = wf.size(1);
  Tensor w2 = wf.flatten(0, 1);  // [(B O), C/g, kh, kw]
  Tensor b2;
  if (b.value.defined())
    b2 = b.bdim ? move_bdim_to_front(b).reshape({bsz * out_c})
                : b.value.unsqueeze(0).expand({bsz, out_c}).reshape({bsz * out_c});
  if (!x.bdim) {
    y = conv(xf, w2, b2, attrs, attrs.groups, bsz);  // [N, B*O, H', W']
  } else {
    Tensor x2 = fold_bdim_into(xf, 1);  // [N, B*C, H, W]
    y = conv(x2, w2, b2, attrs, attrs.groups * bsz);
  }
  return finish(y.unflatten(1, {bsz, out_c}), 1);
}

}  // namespace

void register_conv_rules() { set_batch_rule(OpId::conv2d, conv2d_rule); }

}  // namespace td::rules
