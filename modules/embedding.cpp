#include "modules/embedding.h"

#include "engine/ops.h"

namespace td::nn {

Embedding::Embedding(int64_t num, int64_t dim) : num_embeddings(num), embedding_dim(dim) {
  if (num < 0 || dim < 0)
    throw_error<ValueError>("[Embedding] sizes must be >= 0, got ", num, ", ", dim);
  weight = register_parameter("weight", randn({num, dim}));
  register_method("forward", &Embedding::forward, {"input"});
}

Tensor Embedding::forward(const Tensor& input) { return embedding(input, weight); }

std::string Embedding::extra_repr() const {
  return std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
}

}  // namespace td::nn
