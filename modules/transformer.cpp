#include "modules/transformer.h"

#include <typeinfo>

#include "engine/ops.h"

namespace td::nn {

namespace {
// The masks are Values so that None can be passed by keyword; anything else must be a tensor.
void check_masks(const char* op, const Value& mask, const char* mask_name, const Value& padding) {
  for (const auto& [m, name] :
       {std::pair{&mask, mask_name}, std::pair{&padding, "src_key_padding_mask"}})
    if (!m->is_none() && !m->is_tensor())
      throw_error<TypeError>(op, " ", name, " must be a Tensor or None, not ", m->kind_name());
  // torch asserts this before anything else
  if (padding.is_tensor()) {
    const DType d = padding.tensor().dtype();
    if (d != kBool && !is_floating(d))
      throw_error<TypeError>(op,
                             " only bool and floating types of src_key_padding_mask are "
                             "supported, got ",
                             dtype_name(d));
  }
}

// Each module's own training mode, as a deep copy keeps it: train() sets the whole subtree, so
// parents first, then each child.
void copy_modes(const Module& from, Module& to) {
  to.train(from.is_training());
  auto a = from.named_children(), b = to.named_children();
  for (size_t i = 0; i < a.size(); ++i) copy_modes(*a[i].second, *b[i].second);
}
}  // namespace

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d, int64_t h, int64_t ff, double p,
                                                 const std::string& act, double eps, bool bf,
                                                 bool nf)
    : d_model(d),
      nhead(h),
      dim_feedforward(ff),
      dropout_p(p),
      layer_norm_eps(eps),
      activation(act),
      batch_first(bf),
      norm_first(nf) {
  const char* op = "[TransformerEncoderLayer]";
  if (d <= 0 || h <= 0 || d % h != 0)
    throw_error<ValueError>(op, " d_model (", d, ") must be positive and divisible by nhead (", h,
                            ")");
  if (ff <= 0) throw_error<ValueError>(op, " dim_feedforward must be positive, got ", ff);
  if (!(p >= 0.0 && p <= 1.0))
    throw_error<ValueError>(op, " dropout must be between 0 and 1, got ", p);
  if (act != "relu" && act != "gelu")
    throw_error<ValueError>(op, " activation should be \"relu\" or \"gelu\", not \"", act, "\"");
  // torch's registration order, which is the order of the parameter names
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(d, h, p, true, bf));
  linear1 = register_module("linear1", std::make_shared<Linear>(d, ff));
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
  linear2 = register_module("linear2", std::make_shared<Linear>(ff, d));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(d, eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(d, eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(p));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(p));
  register_method("forward", &TransformerEncoderLayer::forward,
                  {"src", "src_mask", "src_key_padding_mask"},
                  {{"src_mask", Value()}, {"src_key_padding_mask", Value()}});
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Value& src_mask,
                                        const Value& src_key_padding_mask) {
  const char* op = "[TransformerEncoderLayer]";
  check_masks(op, src_mask, "src_mask", src_key_padding_mask);
  if (src.dim() != 2 && src.dim() != 3)
    throw_error<ValueError>(op, " src must be 2-D (unbatched) or 3-D, got shape ",
                            shape_str(src.shape()));
  if (src.size(-1) != d_model)
    throw_error<ValueError>(op, " src's last dim must be d_model (", d_model, "), got shape ",
                            shape_str(src.shape()));
  Tensor x = src;
  if (norm_first) {
    x = x + self_attention_block(norm1->forward(x), src_mask, src_key_padding_mask);
    return x + feed_forward_block(norm2->forward(x));
  }
  x = norm1->forward(x + self_attention_block(x, src_mask, src_key_padding_mask));
  return norm2->forward(x + feed_forward_block(x));
}

Tensor TransformerEncoderLayer::self_attention_block(const Tensor& x, const Value& mask,
                                                     const Value& padding) {
  Value r = self_attn->forward(x, x, x, padding, false, mask, true);
  return dropout1->forward(r[0].tensor());
}

Tensor TransformerEncoderLayer::feed_forward_block(const Tensor& x) {
  // linear_relu applies the ReLU as the GEMM stores its output: the same values, one pass less
  Tensor h = activation == "relu" ? linear_relu(x, linear1->weight, linear1->bias)
                                  : gelu(linear1->forward(x));
  return dropout2->forward(linear2->forward(dropout->forward(h)));
}

std::shared_ptr<TransformerEncoderLayer> TransformerEncoderLayer::deep_copy() const {
  auto out = std::make_shared<TransformerEncoderLayer>(d_model, nhead, dim_feedforward, dropout_p,
                                                       activation, layer_norm_eps, batch_first,
                                                       norm_first);
  auto from = named_slots(), to = out->named_slots();
  for (size_t i = 0; i < from.size(); ++i) to[i].second->value = from[i].second->value.clone();
  copy_modes(*this, *out);
  return out;
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& layer, int64_t n,
                                       std::shared_ptr<Module> norm_module)
    : num_layers(n), norm(std::move(norm_module)) {
  if (n <= 0) throw_error<ValueError>("[TransformerEncoder] num_layers must be positive, got ", n);
  auto list = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < n; ++i) {
    layers.push_back(layer.deep_copy());
    list->push_back(layers.back());
  }
  if (norm) register_module("norm", norm);
  register_method("forward", &TransformerEncoder::forward, {"src", "mask", "src_key_padding_mask"},
                  {{"mask", Value()}, {"src_key_padding_mask", Value()}});
}

Tensor TransformerEncoder::forward(const Tensor& src, const Value& mask,
                                   const Value& src_key_padding_mask) {
  check_masks("[TransformerEncoder]", mask, "mask", src_key_padding_mask);
  Tensor out = src;
  for (const auto& layer : layers) out = layer->forward(out, mask, src_key_padding_mask);
  if (!norm) return out;
  Value r = (*norm)({out});
  if (!r.is_tensor())
    throw_error<TypeError>("[TransformerEncoder] norm must return a Tensor, got ", r.kind_name());
  return r.tensor();
}

}  // namespace td::nn
