// matmul with PyTorch's full rules and linear; both end in one GEMM kernel.
#include <array>
#include <utility>
#include <vector>

#include "engine/kernels/kernels.h"
#include "engine/ops.h"
#include "engine/ops/impls.h"

namespace td {
namespace {

[[noreturn]] void mismatch(const Tensor& a, const Tensor& b) {
  throw_error<ValueError>("[matmul] ", shapes_word(), " ", a.shape(), " and ", b.shape(),
                          " cannot be multiplied");
}

// Batch dims of a and b broadcast (NumPy rules), or a ValueError naming both full shapes.
Shape broadcast_batch(const Tensor& a, const Tensor& b, const Shape& ba, const Shape& bb) {
  size_t n = std::max(ba.size(), bb.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - ba.size() ? 1 : ba[i - (n - ba.size())];
    int64_t y = i < n - bb.size() ? 1 : bb[i - (n - bb.size())];
    if (x != y && x != 1 && y != 1) mismatch(a, b);
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// t [..., r, c] as [Bt, r, c] over the broadcast batch shape; [1, r, c] when t has no batch to
// contribute (bmm broadcasts it), so shared operands are never materialised per batch.
Tensor as_3d(const Tensor& t, const Shape& batch) {
  int64_t r = t.size(-2), c = t.size(-1);
  int64_t own = shape_numel(Shape(t.shape().begin(), t.shape().end() - 2));
  if (own == 1) return t.reshape({1, r, c});
  Shape full = batch;
  full.push_back(r);
  full.push_back(c);
  return t.expand(full).reshape({shape_numel(batch), r, c});
}

// The batch dims of t expanded to `batch`, merged where a view allows: (size, stride) groups,
// outermost first.
std::vector<std::array<int64_t, 2>> batch_groups(const Tensor& t, const Shape& batch) {
  const int64_t lead = static_cast<int64_t>(batch.size()) - (t.dim() - 2);
  std::vector<std::array<int64_t, 2>> groups;
  for (int64_t d = 0; d < static_cast<int64_t>(batch.size()); ++d) {
    if (batch[d] == 1) continue;
    const int64_t td = d - lead;  // t's dim, or none (broadcast: stride 0)
    const int64_t stride = td < 0 || t.size(td) == 1 ? 0 : t.stride(td);
    if (!groups.empty() && groups.back()[1] == stride * batch[d])
      groups.back() = {groups.back()[0] * batch[d], stride};
    else
      groups.push_back({batch[d], stride});
  }
  return groups;
}

// a and b as bmm's operands: [Bt, ., .] each, or, for float operands whose batch dims do not
// merge into one without a copy but split into the same two groups (attention's heads viewed in
// a fused projection's output), [B1, B2, ., .] views.
std::pair<Tensor, Tensor> as_bmm_operands(const Tensor& a, const Tensor& b, const Shape& batch) {
  auto three = [&] { return std::pair{as_3d(a, batch), as_3d(b, batch)}; };
  if ((a.dtype() != DType::Float32 && a.dtype() != DType::Float64) || shape_numel(batch) == 0)
    return three();
  auto ga = batch_groups(a, batch), gb = batch_groups(b, batch);
  if (ga.size() <= 1 && gb.size() <= 1) return three();
  // one group splits anywhere; two must be the same split
  auto split = [](std::vector<std::array<int64_t, 2>>& g, int64_t inner) {
    if (g.size() == 1 && g[0][0] % inner == 0)
      g = {{g[0][0] / inner, g[0][1] * inner}, {inner, g[0][1]}};
  };
  if (ga.size() == 2) split(gb, ga[1][0]);
  if (gb.size() == 2) split(ga, gb[1][0]);
  if (ga.size() != 2 || gb.size() != 2 || ga[0][0] != gb[0][0] || ga[1][0] != gb[1][0])
    return three();
  auto view = [](const Tensor& t, const std::vector<std::array<int64_t, 2>>& g) {
    return Tensor::from_storage_unchecked(
        t.storage(), t.dtype(), {g[0][0], g[1][0], t.size(-2), t.size(-1)},
        {g[0][1], g[1][1], t.stride(-2), t.stride(-1)}, t.offset());
  };
  return {view(a, ga), view(b, gb)};
}

Tensor matmul_nd(const Tensor& a0, const Tensor& b0) {
  Tensor a = a0, b = b0;
  const bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
  if (a_vec) a = a.unsqueeze(0);   // [K] -> [1, K]
  if (b_vec) b = b.unsqueeze(-1);  // [K] -> [K, 1]
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  if (b.size(-2) != k) mismatch(a0, b0);

  Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_batch(a0, b0, ba, bb);
  Tensor out;
  if (bb.empty()) {
    // [..., M, K] @ [K, N]: fold a's batch into M, one plain GEMM.
    Tensor a3 = a.reshape({1, shape_numel(ba) * m, k});
    out = kernels::bmm(a3, b.unsqueeze(0));
  } else {
    auto [a3, b3] = as_bmm_operands(a, b, batch);
    out = kernels::bmm(a3, b3);
  }
  Shape shape = batch;
  if (!a_vec) shape.push_back(m);
  if (!b_vec) shape.push_back(n);
  return out.view(shape);
}

// linear's input x does not end with the weight's in-features (its last dim; `what` names the
// shapes: "shape" or "per-set shape")
[[noreturn]] void throw_linear_mismatch(const char* what, const Shape& x, const Shape& w) {
  throw_error<ValueError>("[linear] input of ", what, " ", x, " does not match weight of ", what,
                          " ", w, " (expected [..., ", w.back(), "])");
}

}  // namespace

namespace impl {

DType gemm_dtype(const char* op, DType a, DType b, const char* what, const Shape& sa,
                 const Shape& sb) {
  DType t = promote_types(a, b);
  if (t == DType::Bool) throw_bool_not_implemented(op, {sa, sb});
  if (is_floating(a) != is_floating(b) || (a == DType::Bool) != (b == DType::Bool))
    throw_error<TypeError>("[", op, "] operands of ", what, "s ", sa, " and ", sb, " have dtypes ",
                           dtype_name(a), " and ", dtype_name(b),
                           ", which do not mix (as in torch); cast one with to()");
  return t;
}

std::vector<Tensor> matmul_impl(std::span<const Tensor> in, const OpAttrs&) {
  if (in.size() != 2) throw_error<ValueError>("[matmul] expects 2 inputs, got ", in.size());
  const Tensor &a0 = in[0], &b0 = in[1];
  if (a0.dim() == 0 || b0.dim() == 0)
    throw_error<ValueError>("[matmul] both arguments need at least 1 dim, got ", shapes_word(), " ",
                            a0.shape(), " and ", b0.shape());
  DType t = gemm_dtype("matmul", a0.dtype(), b0.dtype(), shape_word(), a0.shape(), b0.shape());
  Tensor a = a0.to(t), b = b0.to(t);
  if (a.dim() == 1 && b.dim() == 1) {
    if (a.size(0) != b.size(0)) mismatch(a0, b0);
    return {kernels::bmm(a.view({1, 1, -1}), b.view({1, -1, 1})).view({})};
  }
  return {matmul_nd(a, b)};
}

DType check_linear(const char* what, const Shape& x, DType xt, const Shape& w, DType wt,
                   const Shape* b, DType bt) {
  if (w.size() != 2)
    throw_error<ValueError>("[linear] weight must be 2-D [out, in] (or 1-D [in]), got ", what, " ",
                            w);
  if (x.empty() || x.back() != w[1]) throw_linear_mismatch(what, x, w);
  if (b && (b->size() != 1 || (*b)[0] != w[0]))
    throw_error<ValueError>("[linear] bias of ", what, " ", *b, " does not match weight of ", what,
                            " ", w, " (expected [", w[0], "])");
  DType t = gemm_dtype("linear", xt, wt, what, x, w);
  return b ? gemm_dtype("linear", t, bt, what, w, *b) : t;
}

std::vector<Tensor> linear_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const bool fused_relu = attrs_as<LinearAttrs>(OpId::linear, attrs).fused_relu;
  if (in.size() < 2 || in.size() > 3)
    throw_error<ValueError>("[linear] expects 2 or 3 inputs, got ", in.size());
  const Tensor& x0 = in[0];
  const Tensor& w0 = in[1];
  const Tensor b0 = in.size() > 2 ? in[2] : Tensor();
  const DType t =
      check_linear(shape_word(), x0.shape(), x0.dtype(), w0.shape(), w0.dtype(),
                   b0.defined() ? &b0.shape() : nullptr, b0.defined() ? b0.dtype() : x0.dtype());
  Tensor x = x0.to(t), w = w0.to(t), b = b0.defined() ? b0.to(t) : Tensor();
  const int64_t in_f = w.size(1), out_f = w.size(0);
  Shape lead(x.shape().begin(), x.shape().end() - 1);
  Tensor x2 = x.dim() == 2 ? x : x.reshape({shape_numel(lead), in_f});
  Tensor y = kernels::gemm_nt(x2.unsqueeze(0), w.unsqueeze(0), b.defined() ? b.unsqueeze(0) : b,
                              fused_relu);
  Shape out_shape = lead;
  out_shape.push_back(out_f);
  return {y.view(out_shape)};
}

}  // namespace impl

Tensor matmul(const Tensor& a, const Tensor& b) { return call_op1(OpId::matmul, {a, b}); }

namespace {

// torch's linear also takes a weight [in]: x @ weight, of shape x.shape[:-1]. torch 1.13 adds a
// bias to that in place (so it must broadcast to the output, whose dtype stays), except for 2-D
// and 3-D inputs, which its addmm path refuses (a non-contiguous 3-D one it takes: td's results do
// not depend on the layout, so td refuses every 3-D one).
Tensor vector_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!x.defined() || x.dim() == 0 || x.size(-1) != weight.size(0))
    throw_linear_mismatch(shape_word(), x.defined() ? x.shape() : Shape{}, weight.shape());
  impl::gemm_dtype("linear", x.dtype(), weight.dtype(), shape_word(), x.shape(), weight.shape());
  Tensor y = matmul(x, weight);
  if (!bias.defined()) return y;
  if (x.dim() == 2 || x.dim() == 3)
    throw_error<ValueError>(
        "[linear] a 1-D weight takes a bias only with an input of 1 or at "
        "least 4 dims (as in torch), got input of ",
        shape_word(), " ", x.shape(), ", weight of ", shape_word(), " ", weight.shape(),
        " and bias of ", shape_word(), " ", bias.shape());
  if (broadcast_shapes("linear", y.shape(), bias.shape()) != y.shape())
    throw_error<ValueError>("[linear] bias of ", shape_word(), " ", bias.shape(),
                            " does not broadcast to the output of ", shape_word(), " ", y.shape(),
                            " (input of ", shape_word(), " ", x.shape(), ", 1-D weight of ",
                            shape_word(), " ", weight.shape(), ")");
  if (is_floating(bias.dtype()) && !is_floating(y.dtype()))
    throw_error<TypeError>("[linear] bias of dtype ", dtype_name(bias.dtype()),
                           " can't be added in place to the ", dtype_name(y.dtype()),
                           " output of input of ", shape_word(), " ", x.shape(),
                           " and 1-D weight of ", shape_word(), " ", weight.shape());
  return add(y, bias).to(y.dtype());
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (weight.defined() && weight.dim() == 1) return vector_linear(x, weight, bias);
  return call_op1(OpId::linear, {x, weight, bias}, LinearAttrs{});
}

Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (weight.defined() && weight.dim() == 1) return relu(vector_linear(x, weight, bias));
  return call_op1(OpId::linear, {x, weight, bias}, LinearAttrs{.fused_relu = true});
}

}  // namespace td
