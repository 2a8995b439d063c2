// embedding: rows of a weight table picked by int64 indices.
#include "engine/ops.h"
#include "engine/ops/impls.h"

namespace td {
namespace impl {

void throw_embedding_index(int64_t v, const char* kind, const Shape& w) {
  throw_error<IndexError>("[embedding] index ", v, " is out of range for ", w[0],
                          " embeddings (weight of ", kind, " ", w, ")");
}

std::vector<Tensor> embedding_impl(std::span<const Tensor> in, const OpAttrs&) {
  const Tensor& idx = in[0];
  const Tensor& w = in[1];
  if (idx.dtype() != DType::Int64)
    throw_error<TypeError>("[embedding] indices must be int64, got ", idx.dtype(), " of ",
                           shape_word(), " ", idx.shape());
  if (w.dim() != 2)
    throw_error<ValueError>("[embedding] weight must be 2-D [num_embeddings, dim], got ",
                            w.shape());
  const int64_t e = w.size(0), d = w.size(1);
  std::vector<int64_t> ids = idx.to_vector<int64_t>();
  for (int64_t v : ids)
    if (v < 0 || v >= e) throw_embedding_index(v, shape_word(), w.shape());
  Shape shape = idx.shape();
  shape.push_back(d);
  Tensor out = Tensor::empty(shape, w.dtype());
  count_kernel(KernelKind::Other);
  if (out.numel() == 0) return {out};
  const int64_t s0 = w.stride(0), s1 = w.stride(1);
  visit_dtype(w.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* wp = w.data<T>();
    T* op = out.data<T>();
    for (size_t i = 0; i < ids.size(); ++i)
      for (int64_t j = 0; j < d; ++j)
        op[static_cast<int64_t>(i) * d + j] = wp[ids[i] * s0 + j * s1];
  });
  return {out};
}

}  // namespace impl

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  return call_op1(OpId::embedding, {indices, weight});
}

}  // namespace td
