#pragma once
// TransformerEncoderLayer and TransformerEncoder as torch.nn's (PyTorch 1.13, its reference
// path), written with engine ops and td's modules so that vmap batches them.
#include <memory>
#include <string>
#include <vector>

#include "modules/attention.h"
#include "modules/container.h"
#include "modules/dropout.h"
#include "modules/linear.h"
#include "modules/normalization.h"

namespace td::nn {

// Self-attention then a feed-forward block (linear1, activation, dropout, linear2), each with a
// residual and a LayerNorm: after it (norm_first = false) or before it. Submodules self_attn,
// linear1, dropout, linear2, norm1, norm2, dropout1, dropout2 in torch's order. activation is
// "relu" or "gelu". forward(src, src_mask=None, src_key_padding_mask=None): src [S, N, E] ([N, S,
// E] with batch_first) or unbatched [S, E]; the masks as MultiheadAttention's attn_mask and
// key_padding_mask.
class TransformerEncoderLayer : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override {
    return &typeid(TransformerEncoderLayer);
  }
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048,
                          double dropout = 0.1, const std::string& activation = "relu",
                          double layer_norm_eps = 1e-5, bool batch_first = false,
                          bool norm_first = false);
  Tensor forward(const Tensor& src, const Value& src_mask, const Value& src_key_padding_mask);
  // A copy with the same configuration, training mode and values in tensors of its own (as
  // Python's copy.deepcopy).
  std::shared_ptr<TransformerEncoderLayer> deep_copy() const;

  int64_t d_model, nhead, dim_feedforward;
  double dropout_p, layer_norm_eps;
  std::string activation;
  bool batch_first, norm_first;
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  std::shared_ptr<LayerNorm> norm1, norm2;

 private:
  Tensor self_attention_block(const Tensor& x, const Value& mask, const Value& padding);
  Tensor feed_forward_block(const Tensor& x);
};

// num_layers deep copies of encoder_layer (children layers.0, layers.1, ...) run in turn, then
// norm when given (child "norm"; any module whose forward takes one tensor). forward(src,
// mask=None, src_key_padding_mask=None).
class TransformerEncoder : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override {
    return &typeid(TransformerEncoder);
  }
  TransformerEncoder(const TransformerEncoderLayer& encoder_layer, int64_t num_layers,
                     std::shared_ptr<Module> norm = nullptr);
  Tensor forward(const Tensor& src, const Value& mask, const Value& src_key_padding_mask);

  int64_t num_layers;
  std::vector<std::shared_ptr<TransformerEncoderLayer>> layers;
  std::shared_ptr<Module> norm;  // nullptr when none
};

}  // namespace td::nn
