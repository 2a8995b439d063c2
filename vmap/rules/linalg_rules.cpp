// matmul and linear. The ensemble hot path: a shared input against stacked weights is one GEMM
// against the [B*out, in] matrix the weights already are (a view, no copy).
#include <algorithm>

#include "engine/ops.h"
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// Ba*, Bb* -> B*: 1-D operands become matrices, batched ones go bdim-front and are padded to
// the same per-set rank, then one broadcasting matmul (a batched GEMM).
std::vector<Batched> matmul_rule(const RuleContext&, std::span<const Batched> in, const OpAttrs&) {
  const Batched& a = in[0];
  const Batched& b = in[1];
  int64_t ra = logical_rank(a), rb = logical_rank(b);
  if (ra == 0 || rb == 0)
    throw_error<ValueError>("[matmul] both arguments need at least 1 dim, got per-set shapes ",
                            shape_str(per_set_shape(a)), " and ", shape_str(per_set_shape(b)));
  Tensor ta = move_bdim_to_front(a), tb = move_bdim_to_front(b);
  // vector operands: [K] -> [1, K] (left), [K] -> [K, 1] (right)
  if (ra == 1) ta = ta.unsqueeze(a.bdim ? 1 : 0);
  if (rb == 1) tb = tb.unsqueeze(-1);
  int64_t r = std::max<int64_t>({ra, rb, 2});
  if (a.bdim) ta = pad_to_logical_rank(ta, true, r);
  if (b.bdim) tb = pad_to_logical_rank(tb, true, r);
  Tensor out = matmul(ta, tb);  // [B, *, M, N]
  if (rb == 1) out = out.select(-1, 0);
  if (ra == 1) out = out.select(-1 - (rb == 1 ? 0 : 1), 0);
  return one(out, 0);
}

// linear(x, w, b?):
//   B*I, OI, O?      -> B*O           (x's bdim stays where it is unless it is the last dim)
//   *I, BOI, (B)O?   -> *(BO) -> *BO  (ONE gemm against w.view([B*O, I]), bdim = x.dim()-1)
//   B*I, BOI, (B)O?  -> BMI @ BIO     (one batched gemm) + bias
//   *I, OI, BO       -> *O + B1..O
std::vector<Batched> linear_rule(const RuleContext& ctx, std::span<const Batched> in,
                                 const OpAttrs&) {
  const Batched& x = in[0];
  const Batched& w = in[1];
  Batched bias = in.size() > 2 ? in[2] : Batched{};
  int64_t bsz = ctx.batch_size;
  if (logical_rank(w) != 2) {
    // rare 1-D weight: decompose
    Tensor wt = move_bdim_to_front(w);
    Batched y{matmul_rule(
        ctx, std::vector<Batched>{x, {wt, w.bdim ? std::optional<int64_t>(0) : std::nullopt}},
        {})[0]};
    if (!bias.value.defined()) return {y};
    int64_t r = std::max(logical_rank(y), logical_rank(bias));
    return one(add(front_and_pad(y, r), bias.bdim ? front_and_pad(bias, r) : bias.value), 0);
  }
  if (logical_rank(x) == 0)
    throw_error<ValueError>("[linear] input needs at least 1 dim, got a 0-d per-set input");
  if (!x.bdim && !w.bdim) {
    // only the bias is batched: *O + B1..O
    Tensor y = linear(x.value, w.value);
    return one(add(y, front_and_pad(bias, y.dim())), 0);
  }
  if (!w.bdim) {
    Tensor xv = x.value;
    int64_t xb = *x.bdim;
    if (xb == xv.dim() - 1) {
      xv = move_bdim_to_front(x);
      xb = 0;
    }
    if (!bias.bdim) return one(linear(xv, w.value, bias.value), xb);
    // batched bias [B, O]: add it aligned to the output's bdim
    Tensor y = linear(xv, w.value);
    Tensor bv = move_bdim_to_front(bias);  // [B, O]
    int64_t yr = y.dim();
    Tensor bb = bv;
    for (int64_t d = 1; d < yr - 1 - xb; ++d) bb = bb.unsqueeze(1);  // [B, 1.., O]
    for (int64_t d = 0; d < xb; ++d) bb = bb.unsqueeze(0);           // [1.., B, 1.., O]
    return one(add(y, bb), xb);
  }
  Tensor wf = move_bdim_to_front(w);  // [B, O, I]
  int64_t out_f = wf.size(1), in_f = wf.size(2);
  if (!x.bdim) {
    Tensor w2 = wf.reshape({bsz * out_f, in_f});  // a view of contiguous stacked weights
    Tensor b2;
    if (bias.value.defined())
      b2 = bias.bdim ? move_bdim_to_front(bias).reshape({bsz * out_f})
                     : bias.value.unsqueeze(0).expand({bsz, out_f}).reshape({bsz * out_f});
    Tensor y = linear(x.value, w2, b2);  // [*, B*O]
    int64_t last = y.dim() - 1;
    return one(y.unflatten(last, {bsz, out_f}), last);
  }
  // both batched: [B, M, I] @ [B, I, O]
  Tensor xf = move_bdim_to_front(x);
  Shape lead(xf.shape().begin() + 1, xf.shape().end() - 1);
  Tensor x3 = xf.reshape({bsz, shape_numel(lead), in_f});
  Tensor y = matmul(x3, wf.transpose(1, 2));  // [B, M, O]
  if (bias.value.defined())
    y = add(y, bias.bdim ? move_bdim_to_front(bias).unsqueeze(1) : bias.value);
  Shape out_shape{bsz};
  out_shape.insert(out_shape.end(), lead.begin(), lead.end());
  out_shape.push_back(out_f);
  return one(y.view(out_shape), 0);
}

}  // namespace

void register_linalg_rules() {
  set_batch_rule(OpId::matmul, matmul_rule);
  set_batch_rule(OpId::linear, linear_rule);
}

}  // namespace td::rules
