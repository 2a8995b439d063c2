#pragma once
// Embedding: a lookup table, weight [num_embeddings, embedding_dim] drawn from N(0, 1).
#include "modules/module.h"

namespace td::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  Tensor forward(const Tensor& input);  // int64 indices -> [..., embedding_dim]

  int64_t num_embeddings, embedding_dim;
  Param weight;

 protected:
  std::string extra_repr() const override;
};

}  // namespace td::nn
