#pragma once
// MultiheadAttention, written with engine ops only (matmul, softmax, views) so vmap batches it.
#include <memory>
#include <optional>

#include "modules/linear.h"

namespace td::nn {

// in_proj_weight [3E, E] (Xavier-uniform), in_proj_bias [3E] (zeros), out_proj a Linear(E, E)
// whose bias is zeros. With a kdim or vdim other than E, q_proj_weight [E, E], k_proj_weight
// [E, kdim] and v_proj_weight [E, vdim] replace in_proj_weight. add_bias_kv: bias_k and bias_v
// [1, 1, E] (Xavier-normal) end the projected keys and values; add_zero_attn: a zero key and
// value end them after that, as in torch. forward(query, key, value, key_padding_mask=None,
// need_weights=True, attn_mask=None, average_attn_weights=True) returns [output, weights] (weights
// None when need_weights is False). Inputs are [L, N, E] ([N, L, E] with batch_first) or unbatched
// [L, E]. Masks: bool (True = not attended) or float (added to the scores); key_padding_mask [N,
// S], attn_mask [L, S] or [N * num_heads, L, S].
// Self-attention (query, key and value one tensor) projects with one [3E, E] product.
class MultiheadAttention : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override {
    return &typeid(MultiheadAttention);
  }
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     bool batch_first = false, bool add_bias_kv = false, bool add_zero_attn = false,
                     std::optional<int64_t> kdim = std::nullopt,
                     std::optional<int64_t> vdim = std::nullopt);
  Value forward(const Tensor& query, const Tensor& key, const Tensor& value,
                const Value& key_padding_mask, bool need_weights, const Value& attn_mask,
                bool average_attn_weights);

  int64_t embed_dim, num_heads, head_dim, kdim, vdim;
  double dropout;
  bool batch_first, add_zero_attn;
  Param in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight, in_proj_bias;
  Param bias_k, bias_v;
  std::shared_ptr<Linear> out_proj;

 protected:
  std::string extra_repr() const override;
};

}  // namespace td::nn
