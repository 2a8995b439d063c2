#pragma once
// MultiheadAttention, written with engine ops only (matmul, softmax, views) so vmap batches it.
#include <memory>

#include "modules/linear.h"

namespace td::nn {

// in_proj_weight [3E, E] (Xavier-uniform), in_proj_bias [3E] (zeros), out_proj a Linear(E, E)
// whose bias is zeros. forward(query, key, value, key_padding_mask=None, need_weights=True,
// attn_mask=None, average_attn_weights=True) returns [output, weights] (weights None when
// need_weights is False). Inputs are [L, N, E] ([N, L, E] with batch_first) or unbatched [L, E].
// Masks: bool (True = not attended) or float (added to the scores); key_padding_mask [N, S],
// attn_mask [L, S] or [N * num_heads, L, S].
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     bool batch_first = false);
  Value forward(const Tensor& query, const Tensor& key, const Tensor& value,
                const Value& key_padding_mask, bool need_weights, const Value& attn_mask,
                bool average_attn_weights);

  int64_t embed_dim, num_heads, head_dim;
  double dropout;
  bool batch_first;
  Param in_proj_weight, in_proj_bias;
  std::shared_ptr<Linear> out_proj;

 protected:
  std::string extra_repr() const override;
};

}  // namespace td::nn
