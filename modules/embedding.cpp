#include "modules/embedding.h"

#include <cmath>

#include "engine/ops.h"

namespace td::nn {

Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> pad,
                     std::optional<double> max_n, double p)
    : num_embeddings(num), embedding_dim(dim), max_norm(max_n), norm_type(p) {
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

Tensor Embedding::forward(const Tensor& input) {
  if (max_norm) renorm_looked_up_rows(input);
  return embedding(input, weight);
}

// Ops only (no data-dependent branch), so vmap batches it: the rows in use are a mask from
// comparing every index with every row number; the others are multiplied by exactly 1.
void Embedding::renorm_looked_up_rows(const Tensor& input) const {
  const Tensor w = weight.get();
  const Tensor idx = input.reshape({input.numel(), 1});
  const Tensor used = any(eq(idx, arange(num_embeddings, kInt64)), 0);
  Tensor norms;
  if (norm_type == 2.0)
    norms = sqrt(sum(mul(w, w), 1));
  else if (norm_type == 1.0)
    norms = sum(abs(w), 1);
  else if (std::isinf(norm_type) && norm_type > 0)
    norms = amax(abs(w), 1);
  else
    norms = pow(sum(pow(abs(w), norm_type), 1), 1.0 / norm_type);
  const Tensor scale = where(logical_and(used, gt(norms, *max_norm)),
                             div(full({}, *max_norm, w.dtype()), add(norms, 1e-7)), 1.0);
  mul_(w, scale.unsqueeze(1).to(w.dtype()));
}

std::string Embedding::extra_repr() const {
  return std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim) +
         (padding_idx ? ", padding_idx=" + std::to_string(*padding_idx) : "") +
         (max_norm ? ", max_norm=" + repr_double(*max_norm) : "") +
         (norm_type != 2.0 ? ", norm_type=" + repr_double(norm_type) : "");
}

}  // namespace td::nn
