// matmul and linear. The ensemble hot path, linear against stacked weights, calls the batched
// GEMM kernel directly so that bias and ReLU ride in its output pass.
#include <algorithm>

#include "engine/kernels/kernels.h"
#include "engine/ops.h"
#include "engine/ops/checks.h"
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
  // the stacked call below would name the padded, stacked shapes
  const Shape sa = per_set_shape(a), sb = per_set_shape(b);
  if (sa.back() != sb[rb == 1 ? 0 : rb - 2])
    throw_error<ValueError>("[matmul] per-set shapes ", shape_str(sa), " and ", shape_str(sb),
                            " cannot be multiplied");
  impl::gemm_dtype("matmul", a.value.dtype(), b.value.dtype(), "per-set shape", sa, sb);
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

// linear(x, w, b?), relu fused when fused_relu (linear_relu):
//   B*I, OI, O?      -> B*O           (x's bdim stays where it is unless it is the last dim)
//   *I, BOI, (B)O?   -> B*O           (the shared x against each set's weights)
//   B*I, BOI, (B)O?  -> B*O           (one batched GEMM, bias and ReLU in its output pass)
//   *I, OI, BO       -> *O + B1..O
// The stacked-weight cases run kernels::gemm_nt over the sets: each set's product, bias and
// ReLU are done while its output is in cache.
std::vector<Batched> linear_rule(const RuleContext& ctx, std::span<const Batched> in,
                                 const OpAttrs& attrs) {
  const Batched& x = in[0];
  const Batched& w = in[1];
  Batched bias = in.size() > 2 ? in[2] : Batched{};
  const bool fuse_relu = attrs_as<LinearAttrs>(ctx.op, attrs).fused_relu;
  auto act = [&](Tensor t) { return fuse_relu ? relu(t) : t; };
  int64_t bsz = ctx.batch_size;
  // every path below assumes a 2-D weight and a matching bias: check the per-set shapes as a
  // call per set would (a per-set 1-D weight or [M, O] bias must not pass by broadcasting)
  const DType t = impl::check_linear("per-set shape", per_set_shape(x), x.value.dtype(),
                                     per_set_shape(w), w.value.dtype(), OptShape(bias).get(),
                                     bias.value.defined() ? bias.value.dtype() : x.value.dtype());
  if (!x.bdim && !w.bdim) {
    // only the bias is batched: *O + B1..O
    Tensor y = linear(x.value, w.value);
    return one(act(add(y, front_and_pad(bias, y.dim()))), 0);
  }
  if (!w.bdim) {
    Tensor xv = x.value;
    int64_t xb = *x.bdim;
    if (xb == xv.dim() - 1) {
      xv = move_bdim_to_front(x);
      xb = 0;
    }
    if (!bias.bdim)
      return one(fuse_relu ? linear_relu(xv, w.value, bias.value) : linear(xv, w.value, bias.value),
                 xb);
    // batched bias [B, O]: add it aligned to the output's bdim
    Tensor y = linear(xv, w.value);
    Tensor bv = move_bdim_to_front(bias);  // [B, O]
    int64_t yr = y.dim();
    Tensor bb = bv;
    for (int64_t d = 1; d < yr - 1 - xb; ++d) bb = bb.unsqueeze(1);  // [B, 1.., O]
    for (int64_t d = 0; d < xb; ++d) bb = bb.unsqueeze(0);           // [1.., B, 1.., O]
    return one(act(add(y, bb)), xb);
  }
  Tensor wf = move_bdim_to_front(w).to(t);  // [B, O, I]
  const int64_t out_f = wf.size(1), in_f = wf.size(2);
  // x as [B or 1, M, I]
  Tensor xf = x.bdim ? move_bdim_to_front(x) : x.value.unsqueeze(0);
  Shape lead(xf.shape().begin() + 1, xf.shape().end() - 1);
  Tensor x3 = xf.to(t);
  if (x3.dim() != 3) x3 = x3.reshape({xf.size(0), shape_numel(lead), in_f});
  Tensor b2;  // [B or 1, O]
  if (bias.value.defined())
    b2 = (bias.bdim ? move_bdim_to_front(bias) : bias.value.unsqueeze(0)).to(t);
  Tensor y;  // [B, M, O]
  if (x3.is_batched() || wf.is_batched() || b2.is_batched()) {
    // still batched at an outer vmap level: ops, so that level's rules see them
    y = matmul(x3, wf.transpose(1, 2));
    if (b2.defined()) y = add(y, b2.unsqueeze(1));
    y = act(y);
  } else {
    y = kernels::gemm_nt(x3, wf, b2, fuse_relu);
  }
  if (lead.size() == 1) return one(y, 0);  // already [B, M, O]
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
