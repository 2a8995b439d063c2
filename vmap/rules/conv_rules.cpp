// conv2d: fold the batch into N (batched input only) or into groups (batched weight).
#include "engine/ops.h"
#include "engine/ops/checks.h"
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// bn: a folded BatchNorm's running_mean, running_var, weight and bias (ConvAttrs::batch_norm), one
// value per output channel, or none
Tensor conv(const Tensor& x, const Tensor& w, const Tensor& b, const std::vector<Tensor>& bn,
            const ConvAttrs& a, int64_t groups, int64_t sets = 1) {
  ConvAttrs c = a;
  c.groups = groups;
  c.sets = sets;
  std::vector<Tensor> inputs{x, w, b};
  inputs.insert(inputs.end(), bn.begin(), bn.end());
  return call_op(OpId::conv2d, inputs, c)[0];
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
// A folded BatchNorm's tensors (inputs 3-6) follow the output channels as the bias does.
std::vector<Batched> conv2d_rule(const RuleContext& ctx, std::span<const Batched> in,
                                 const OpAttrs& any) {
  const auto& attrs = attrs_as<ConvAttrs>(ctx.op, any);
  Batched x = in[0], w = in[1];
  Batched b = in.size() > 2 ? in[2] : Batched{};
  const std::vector<Batched> bn(in.begin() + std::min<size_t>(in.size(), 3), in.end());
  bool bn_batched = false;
  for (const Batched& p : bn) {
    bn_batched = bn_batched || p.bdim.has_value();
    if (p.value.defined() && logical_rank(p) != 1)
      throw_error<ValueError>(
          "[conv2d] a folded batch_norm's tensors must be 1-D per set, got "
          "per-set shape ",
          shape_str(per_set_shape(p)));
  }
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
    in2.insert(in2.end(), bn.begin(), bn.end());
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
    std::vector<Tensor> bn0;
    for (const Batched& p : bn) bn0.push_back(per_set(p));
    Shape s = conv(per_set(x), per_set(w), per_set(b), bn0, attrs, attrs.groups).shape();
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
  if (!w.bdim && (b.bdim || bn_batched)) {
    Shape ws = w.value.shape();
    ws.insert(ws.begin(), bsz);
    w = {w.value.unsqueeze(0).expand(ws), 0};
  }
  if (!w.bdim) {
    // BNCHW -> (BN)CHW
    Tensor x2 = xf.flatten(0, 1);
    std::vector<Tensor> bn1;
    for (const Batched& p : bn) bn1.push_back(p.value);
    y = conv(x2, w.value, b.value, bn1, attrs, attrs.groups);
    return finish(y.unflatten(0, {bsz, xf.size(1)}), 0);  // [B, N, O, H', W']
  }
  Tensor wf = move_bdim_to_front(w);  // [B, O, C/g, kh, kw]
  int64_t out_c = wf.size(1);
  Tensor w2 = wf.flatten(0, 1);  // [(B O), C/g, kh, kw]
  // a value per set and output channel: [B*O]
  auto per_channel = [&](const Batched& p) -> Tensor {
    if (!p.value.defined()) return {};
    if (per_set_shape(p) != Shape{out_c})
      throw_error<ValueError>("[conv2d] per-set shape ", shape_str(per_set_shape(p)),
                              " of a bias or folded batch_norm tensor does not match the ", out_c,
                              " output channels of per-set weight ", shape_str(per_set_shape(w)));
    return p.bdim ? move_bdim_to_front(p).reshape({bsz * out_c})
                  : p.value.unsqueeze(0).expand({bsz, out_c}).reshape({bsz * out_c});
  };
  Tensor b2 = per_channel(b);
  std::vector<Tensor> bn2;
  for (const Batched& p : bn) bn2.push_back(per_channel(p));
  if (!x.bdim) {
    y = conv(xf, w2, b2, bn2, attrs, attrs.groups, bsz);  // [N, B*O, H', W']
  } else {
    Tensor x2 = fold_bdim_into(xf, 1);  // [N, B*C, H, W]
    y = conv(x2, w2, b2, bn2, attrs, attrs.groups * bsz);
  }
  return finish(y.unflatten(1, {bsz, out_c}), 1);
}

}  // namespace

void register_conv_rules() { set_batch_rule(OpId::conv2d, conv2d_rule); }

}  // namespace td::rules
