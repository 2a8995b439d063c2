#include "modules/embedding.h"

#include "engine/ops.h"

namespace td::nn {

Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> pad)
    : num_embeddings(num), embedding_dim(dim) {
  if (num < 0 || dim < 0)
    throw_error<ValueError>("[Embedding] sizes must be >= 0, got ", num, ", ", dim);
  if (pad && (*pad >= num || *pad < -num))
    throw_error<ValueError>("[Embedding] padding_idx must be within num_embeddings (", num,
                            "), got ", *pad);
  if (pad) padding_idx = *pad < 0 ? *pad + num : *pad;
  Tensor w = randn({num, dim});
  if (padding_idx) w[*padding_idx].fill_(0.0);
  weight = register_parameter("weight", w);
  register_method("forward", &Embedding::forward, {"input"});
}

Tensor Embedding::forward(const Tensor& input) { return embedding(input, weight); }

std::string Embedding::extra_repr() const {
  return std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim) +
         (padding_idx ? ", padding_idx=" + std::to_string(*padding_idx) : "");
}

}  // namespace td::nn
