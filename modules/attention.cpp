#include "modules/attention.h"

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "engine/ops.h"
#include "modules/init.h"

namespace td::nn {

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, double p, bool with_bias, bool bf,
                                       bool add_bias_kv, bool zero_attn, std::optional<int64_t> kd,
                                       std::optional<int64_t> vd)
    : embed_dim(e),
      num_heads(h),
      head_dim(h > 0 ? e / h : 0),
      kdim(kd.value_or(e)),
      vdim(vd.value_or(e)),
      dropout(p),
      batch_first(bf),
      add_zero_attn(zero_attn) {
  if (e <= 0 || h <= 0 || e % h != 0)
    throw_error<ValueError>("[MultiheadAttention] embed_dim (", e,
                            ") must be positive and divisible by num_heads (", h, ")");
  if (kdim <= 0 || vdim <= 0)
    throw_error<ValueError>("[MultiheadAttention] kdim and vdim must be positive, got ", kdim,
                            " and ", vdim);
  if (!(p >= 0.0 && p <= 1.0))
    throw_error<ValueError>("[MultiheadAttention] dropout must be between 0 and 1, got ", p);
  auto xavier_uniform = [](int64_t rows, int64_t cols) {
    const double bound = std::sqrt(6.0 / static_cast<double>(rows + cols));
    return uniform_init({rows, cols}, bound);
  };
  if (kdim == e && vdim == e) {
    in_proj_weight = register_parameter("in_proj_weight", xavier_uniform(3 * e, e));
  } else {
    q_proj_weight = register_parameter("q_proj_weight", xavier_uniform(e, e));
    k_proj_weight = register_parameter("k_proj_weight", xavier_uniform(e, kdim));
    v_proj_weight = register_parameter("v_proj_weight", xavier_uniform(e, vdim));
  }
  if (with_bias) in_proj_bias = register_parameter("in_proj_bias", zeros({3 * e}));
  if (add_bias_kv) {  // xavier_normal_ of [1, 1, E]: fan_in = fan_out = E
    const double sd = std::sqrt(1.0 / static_cast<double>(e));
    bias_k = register_parameter("bias_k", randn({1, 1, e}) * sd);
    bias_v = register_parameter("bias_v", randn({1, 1, e}) * sd);
  }
  out_proj = register_module("out_proj", std::make_shared<Linear>(e, e, with_bias));
  if (with_bias) {
    Tensor b = out_proj->bias;
    copy_(b, zeros_like(b));
  }
  register_method("forward", &MultiheadAttention::forward,
                  {"query", "key", "value", "key_padding_mask", "need_weights", "attn_mask",
                   "average_attn_weights"},
                  {{"key_padding_mask", Value()},
                   {"need_weights", true},
                   {"attn_mask", Value()},
                   {"average_attn_weights", true}});
}

namespace {
// A bool mask (True = masked) becomes -inf where set; a float mask is added as it is. Either is
// in the query's dtype, as in torch (a float64 mask does not promote a float32 attention).
Tensor additive_mask(const Tensor& m, const char* what, DType dtype) {
  if (m.dtype() == kBool)
    return where(m, -std::numeric_limits<double>::infinity(), zeros({}, dtype));
  if (!is_floating(m.dtype()))
    throw_error<TypeError>("[MultiheadAttention] ", what, " must be bool or float, got ",
                           dtype_name(m.dtype()));
  return m.to(dtype);
}
}  // namespace

Value MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                  const Value& key_padding_mask, bool need_weights,
                                  const Value& attn_mask, bool average_attn_weights) {
  const char* op = "[MultiheadAttention]";
  // the masks are Values so that None can be passed by keyword; anything else must be a tensor
  for (const auto& [mask, name] :
       {std::pair{&key_padding_mask, "key_padding_mask"}, std::pair{&attn_mask, "attn_mask"}})
    if (!mask->is_none() && !mask->is_tensor())
      throw_error<TypeError>(op, " ", name, " must be a Tensor or None, not ", mask->kind_name());
  bool unbatched = query.dim() == 2;
  if (query.dim() != 2 && query.dim() != 3)
    throw_error<ValueError>(op, " query must be 2-D or 3-D, got shape ", shape_str(query.shape()));
  if (key.dim() != query.dim() || value.dim() != query.dim())
    throw_error<ValueError>(op, " query, key and value must have the same number of dims, got ",
                            shape_str(query.shape()), ", ", shape_str(key.shape()), ", ",
                            shape_str(value.shape()));
  // Bring everything to [N, L, E].
  auto to_nle = [&](const Tensor& t) {
    if (unbatched) return t.unsqueeze(0);
    return batch_first ? t : t.transpose(0, 1);
  };
  Tensor q = to_nle(query), k = to_nle(key), v = to_nle(value);
  const int64_t E = embed_dim, H = num_heads, D = head_dim;
  if (q.size(2) != E || k.size(2) != kdim || v.size(2) != vdim)
    throw_error<ValueError>(op, " expected last dims ", E, " (query), ", kdim, " (key) and ", vdim,
                            " (value), got ", shape_str(query.shape()), ", ",
                            shape_str(key.shape()), ", ", shape_str(value.shape()));
  if (k.size(0) != q.size(0) || v.size(0) != q.size(0) || k.size(1) != v.size(1))
    throw_error<ValueError>(op, " batch or sequence sizes of query ", shape_str(query.shape()),
                            ", key ", shape_str(key.shape()), " and value ",
                            shape_str(value.shape()), " do not match");
  const int64_t N = q.size(0), L = q.size(1), S = k.size(1);

  const Tensor& b = in_proj_bias;
  // q's 1 / sqrt(D) is folded into its projection's weight and bias: a pass over them instead
  // of over q [N, L, E] (the same bits when D is a power of 4, as 16)
  const double scale = std::sqrt(static_cast<double>(D));
  auto proj = [&](const Tensor& x, int64_t i) {  // [N, T, in] -> [N, T, E]
    const Param* separate[] = {&q_proj_weight, &k_proj_weight, &v_proj_weight};
    Tensor wi = in_proj_weight.defined() ? in_proj_weight->slice(0, i * E, (i + 1) * E)
                                         : separate[i]->get();
    Tensor bi = b.defined() ? b.slice(0, i * E, (i + 1) * E) : Tensor();
    if (i == 0) {
      wi = wi / scale;
      if (bi.defined()) bi = bi / scale;
    }
    return linear(x, wi, bi);
  };
  auto heads = [&](const Tensor& y) {  // [N, T, E] -> [N, T, H, D] -> [N, H, T, D]
    return y.reshape({N, y.size(1), H, D}).transpose(1, 2);
  };
  Tensor qh, kh, vh;
  if (in_proj_weight.defined() && query.is_same(key) && key.is_same(value) && !bias_k.defined()) {
    // Self-attention (one tensor as query, key and value): one [3E, E] product instead of three
    // [E, E] ones (the same dot products), with only q's rows of the weight scaled. Each head's
    // q, k and v are strided views of it, which the products below take as they are (matmul's
    // two batch dims, N and H).
    const Tensor& w = in_proj_weight;
    Tensor ws = cat({w.slice(0, 0, E) / scale, w.slice(0, E, 3 * E)});
    Tensor bs = b.defined() ? cat({b.slice(0, 0, E) / scale, b.slice(0, E, 3 * E)}) : b;
    Tensor qkv = linear(q, ws, bs)
                     .reshape({N, L, 3, H, D})   // [N, L, 3E]
                     .permute({0, 3, 2, 1, 4});  // [N, H, 3, L, D]
    qh = qkv.select(2, 0);
    kh = qkv.select(2, 1);
    vh = qkv.select(2, 2);
  } else {
    Tensor kp = proj(k, 1), vp = proj(v, 2);
    if (bias_k.defined()) {
      kp = cat({kp, bias_k->expand({N, 1, E})}, 1);
      vp = cat({vp, bias_v->expand({N, 1, E})}, 1);
    }
    qh = heads(proj(q, 0));
    kh = heads(kp);
    vh = heads(vp);
  }
  if (add_zero_attn) {
    kh = cat({kh, zeros({N, H, 1, D}, kh.dtype())}, 2);
    vh = cat({vh, zeros({N, H, 1, D}, vh.dtype())}, 2);
  }
  // the keys bias_k and add_zero_attn appended, which no mask covers
  const int64_t extra = kh.size(2) - S;
  auto widen = [&](const Tensor& m) { return extra ? pad(m, {0, extra}) : m; };
  // the additive masks, each broadcasting to the scores [N, H, L, S + extra]
  std::vector<Tensor> masks;
  if (!attn_mask.is_none()) {
    Tensor m = additive_mask(attn_mask.tensor(), "attn_mask", query.dtype());
    if (m.dim() == 2) {
      if (m.shape() != Shape{L, S})
        throw_error<ValueError>(op, " attn_mask should have shape ", shape_str(Shape{L, S}),
                                ", got ", shape_str(m.shape()));
      masks.push_back(widen(m));
    } else if (m.dim() == 3) {
      if (m.shape() != Shape{N * H, L, S})
        throw_error<ValueError>(op, " attn_mask should have shape ", shape_str(Shape{N * H, L, S}),
                                ", got ", shape_str(m.shape()));
      masks.push_back(widen(m).reshape({N, H, L, S + extra}));
    } else {
      throw_error<ValueError>(op, " attn_mask must be 2-D or 3-D, got shape ",
                              shape_str(m.shape()));
    }
  }
  if (!key_padding_mask.is_none()) {
    Tensor m = additive_mask(key_padding_mask.tensor(), "key_padding_mask", query.dtype());
    Shape want = unbatched ? Shape{S} : Shape{N, S};
    if (m.shape() != want)
      throw_error<ValueError>(op, " key_padding_mask should have shape ", shape_str(want), ", got ",
                              shape_str(m.shape()));
    masks.push_back(widen(m).reshape({N, 1, 1, S + extra}));
  }
  const double p = is_training() ? dropout : 0.0;
  Tensor out, attn;  // [N, H, L, D], and the weights [N, H, L, S + extra] if needed
  if (!need_weights) {
    // q is scaled already: scale 1 leaves the scores as the products
    std::optional<Tensor> mask;
    if (!masks.empty()) mask = masks.size() == 1 ? masks[0] : masks[0] + masks[1];
    out = scaled_dot_product_attention(qh, kh, vh, mask, p, false, 1.0);
  } else {
    Tensor scores = matmul(qh, kh.transpose(-2, -1));
    for (const Tensor& m : masks) scores = scores + m;
    attn = softmax(scores, -1);
    if (p > 0.0) attn = td::dropout(attn, p);
    out = matmul(attn, vh);
  }
  out = out.transpose(1, 2).reshape({N, L, E});  // [N, L, E]
  out = out_proj->forward(out);
  if (unbatched)
    out = out.squeeze(0);
  else if (!batch_first)
    out = out.transpose(0, 1);

  Value weights;
  if (need_weights) {
    Tensor a = average_attn_weights ? mean(attn, {1}) : attn;  // [N, L, S] or [N, H, L, S]
    if (unbatched) a = a.squeeze(0);
    weights = Value(a);
  }
  return Value(ValueList{Value(out), weights});
}

std::string MultiheadAttention::extra_repr() const { return ""; }

}  // namespace td::nn
