#pragma once
// Embedding: a lookup table, weight [num_embeddings, embedding_dim] drawn from N(0, 1).
#include <optional>

#include "modules/module.h"

namespace td::nn {

class Embedding : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Embedding); }
  // padding_idx (negative counts from the end) starts as a zero row; without autograd that is
  // all it changes: the row is looked up as any other.
  // max_norm: as torch, forward first rescales in place each looked-up row of the weight whose
  // norm_type-norm exceeds max_norm to that norm (each set's own rows under functional_vmap).
  Embedding(int64_t num_embeddings, int64_t embedding_dim,
            std::optional<int64_t> padding_idx = std::nullopt,
            std::optional<double> max_norm = std::nullopt, double norm_type = 2.0);
  Tensor forward(const Tensor& input);  // int64 indices -> [..., embedding_dim]

  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;  // in [0, num_embeddings), as torch stores it
  std::optional<double> max_norm;
  double norm_type;
  Param weight;

 protected:
  std::string extra_repr() const override;

 private:
  void renorm_looked_up_rows(const Tensor& input) const;
};

}  // namespace td::nn
