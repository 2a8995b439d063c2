#include "modules/attention.h"

#include <cmath>
#include <limits>

#include "engine/ops.h"

namespace td::nn {

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, double p, bool with_bias, bool bf)
    : embed_dim(e), num_heads(h), head_dim(h > 0 ? e / h : 0), dropout(p), batch_first(bf) {
  if (e <= 0 || h <= 0 || e % h != 0)
    throw_error<ValueError>("[MultiheadAttention] embed_dim (", e,
                            ") must be positive and divisible by num_heads (", h, ")");
  if (!(p >= 0.0 && p <= 1.0))
    throw_error<ValueError>("[MultiheadAttention] dropout must be between 0 and 1, got ", p);
  double bound = std::sqrt(6.0 / static_cast<double>(e + 3 * e));  // xavier_uniform_
  in_proj_weight = register_parameter("in_proj_weight", rand({3 * e, e}) * (2 * bound) - bound);
  if (with_bias) in_proj_bias = register_parameter("in_proj_bias", zeros({3 * e}));
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
  if (q.size(2) != E || k.size(2) != E || v.size(2) != E)
    throw_error<ValueError>(op, " expected embed_dim ", E, " as the last dim, got ",
                            shape_str(query.shape()), ", ", shape_str(key.shape()), ", ",
                            shape_str(value.shape()));
  if (k.size(0) != q.size(0) || v.size(0) != q.size(0) || k.size(1) != v.size(1))
    throw_error<ValueError>(op, " batch or sequence sizes of query ", shape_str(query.shape()),
                            ", key ", shape_str(key.shape()), " and value ",
                            shape_str(value.shape()), " do not match");
  const int64_t N = q.size(0), L = q.size(1), S = k.size(1);

  const Tensor& w = in_proj_weight;
  const Tensor& b = in_proj_bias;
  auto proj = [&](const Tensor& x, int64_t i) {
    Tensor wi = w.slice(0, i * E, (i + 1) * E);
    Tensor bi = b.defined() ? b.slice(0, i * E, (i + 1) * E) : Tensor();
    // [N, T, E] -> [N, T, H, D] -> [N, H, T, D]
    Tensor y = linear(x, wi, bi);
    return y.reshape({N, x.size(1), H, D}).transpose(1, 2);
  };
  Tensor qh = proj(q, 0), kh = proj(k, 1), vh = proj(v, 2);
  qh = qh / std::sqrt(static_cast<double>(D));
  Tensor scores = matmul(qh, kh.transpose(-2, -1));  // [N, H, L, S]

  if (!attn_mask.is_none()) {
    Tensor m = additive_mask(attn_mask.tensor(), "attn_mask", query.dtype());
    if (m.dim() == 2) {
      if (m.shape() != Shape{L, S})
        throw_error<ValueError>(op, " attn_mask should have shape ", shape_str(Shape{L, S}),
                                ", got ", shape_str(m.shape()));
      scores = scores + m;
    } else if (m.dim() == 3) {
      if (m.shape() != Shape{N * H, L, S})
        throw_error<ValueError>(op, " attn_mask should have shape ", shape_str(Shape{N * H, L, S}),
                                ", got ", shape_str(m.shape()));
      scores = scores + m.reshape({N, H, L, S});
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
    scores = scores + m.reshape({N, 1, 1, S});
  }
  Tensor attn = softmax(scores, -1);
  if (dropout > 0.0) attn = td::dropout(attn, dropout, is_training());
  Tensor out = matmul(attn, vh).transpose(1, 2).reshape({N, L, E});  // [N, L, E]
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
