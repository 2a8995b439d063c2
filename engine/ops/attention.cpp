// scaled_dot_product_attention, composed of ops that batch natively (matmul, mul, where, add,
// softmax, dropout), so that a vmapped call stays one batched call.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

#include "engine/ops.h"

namespace td {
namespace {

// The leading dims of shapes a and b broadcast into `out` (NumPy rules); false if they do not.
bool broadcast_into(Shape& out, const Shape& a) {
  const size_t n = std::max(out.size(), a.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - out.size() ? 1 : out[i - (n - out.size())];
    const int64_t y = i < n - a.size() ? 1 : a[i - (n - a.size())];
    if (x != y && x != 1 && y != 1) return false;
    r[i] = x == 1 ? y : x;
  }
  out = r;
  return true;
}

Shape leading(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask, double dropout_p,
                                    bool is_causal, std::optional<double> scale) {
  const bool has_mask = attn_mask.has_value() && attn_mask->defined();
  auto shapes = [&] {
    std::ostringstream os;
    auto one = [&](const char* name, const Tensor& t) {
      os << name;
      if (t.defined())
        os << t.shape();
      else
        os << "undefined";
    };
    one(" (query ", q);
    one(", key ", k);
    one(", value ", v);
    if (has_mask) one(", attn_mask ", *attn_mask);
    os << ")";
    return os.str();
  };
  const char* op = "[scaled_dot_product_attention] ";
  if (!q.defined() || !k.defined() || !v.defined())
    throw_error<ValueError>(op, "query, key and value must be defined tensors", shapes());
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2)
    throw_error<ValueError>(op,
                            "query, key and value need at least 2 dims ([..., L, E], "
                            "[..., S, E], [..., S, Ev])",
                            shapes());
  if (!is_floating(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw_error<TypeError>(op, "query, key and value must have one floating dtype, got ",
                           dtype_name(q.dtype()), ", ", dtype_name(k.dtype()), " and ",
                           dtype_name(v.dtype()), shapes());
  const int64_t L = q.size(-2), S = k.size(-2), E = q.size(-1);
  if (k.size(-1) != E)
    throw_error<ValueError>(op, "query and key must have the same last dim (E)", shapes());
  if (v.size(-2) != S)
    throw_error<ValueError>(op, "key and value must have the same number of keys (dim -2)",
                            shapes());
  Shape batch = leading(q);
  if (!broadcast_into(batch, leading(k)) || !broadcast_into(batch, leading(v)))
    throw_error<ValueError>(op, "the leading dims of query, key and value do not broadcast",
                            shapes());
  if (!(dropout_p >= 0 && dropout_p <= 1))
    throw_error<ValueError>(op, "dropout_p must be in [0, 1], got ", dropout_p, shapes());
  if (is_causal && has_mask)
    throw_error<ValueError>(op, "takes attn_mask or is_causal, not both", shapes());
  if (attn_mask.has_value() && !attn_mask->defined())
    throw_error<ValueError>(op, "attn_mask is an undefined tensor (pass {} for none)", shapes());
  if (has_mask) {
    const Tensor& m = *attn_mask;
    if (m.dtype() != kBool && !is_floating(m.dtype()))
      throw_error<TypeError>(op, "attn_mask must be bool or floating, got ", dtype_name(m.dtype()),
                             shapes());
    Shape scores = batch;
    scores.push_back(L);
    scores.push_back(S);
    Shape b = scores;
    if (!broadcast_into(b, m.shape()) || b != scores)
      throw_error<ValueError>(op, "attn_mask does not broadcast to the scores' shape ", scores,
                              shapes());
  }

  const double factor = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(E));
  Tensor scores = matmul(q, k.transpose(-2, -1));
  if (factor != 1.0) scores = mul(scores, factor);
  // the masks as an additive bias (0 or -inf), as torch's reference adds its attn_bias: cheaper
  // than a masked_fill over the scores
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor zero = zeros({}, scores.dtype());
  if (is_causal) {  // query i sees keys j <= i
    Tensor later = lt(arange(L).unsqueeze(1), arange(S).unsqueeze(0));
    scores = add(scores, where(later, -inf, zero));
  } else if (has_mask) {
    const Tensor& m = *attn_mask;
    scores = add(scores, m.dtype() == kBool ? where(m, zero, -inf) : m.to(scores.dtype()));
  }
  // a row with every key masked is all -inf: softmax gives NaN, as torch's math path
  Tensor attn = softmax(scores, -1);
  if (dropout_p > 0) attn = dropout(attn, dropout_p, true);
  return matmul(attn, v);
}

}  // namespace td
