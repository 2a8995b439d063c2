// Indexing by integer tensors: index_select picks slices along a dim, gather picks elements.
// Their inverse, the scatters of the Index family, are in scatter.cpp.
#include <algorithm>
#include <cstring>

#include "engine/ops.h"
#include "engine/ops/impls.h"

namespace td {
namespace {

void check_index_dtype(const char* op, const Tensor& index) {
  if (index.dtype() != DType::Int64)
    throw_error<TypeError>("[", op, "] index must be int64, got ", index.dtype(), " of ",
                           shape_word(), " ", index.shape());
}

}  // namespace

namespace impl {

void check_index_in_range(const char* op, int64_t v, int64_t size, int64_t dim) {
  if (v < 0 || v >= size)
    throw_error<IndexError>("[", op, "] index ", v, " is out of bounds for dim ", dim,
                            " with size ", size);
}

void check_scalar_index_select(const Shape& index) {
  if (shape_numel(index) != 1)
    throw_error<IndexError>("[index_select] a 0-d input takes exactly one index (the result is ",
                            "0-d), got index of ", shape_word(), " ", index);
}

std::vector<Tensor> index_select_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<DimAttrs>(OpId::index_select, attrs);
  const Tensor& x = in[0];
  const Tensor& index = in[1];
  check_index_dtype("index_select", index);
  if (index.dim() > 1)
    throw_error<ValueError>("[index_select] index must be 1-D, got ", shape_word(), " ",
                            index.shape());
  if (x.dim() == 0) {
    // as torch: dim 0 / -1 of a 0-d input has size 1, and the result is 0-d again
    normalize_dim("index_select", a.dim, 0);
    check_scalar_index_select(index.shape());
    for (int64_t v : index.to_vector<int64_t>()) check_index_in_range("index_select", v, 1, 0);
    return {x.clone()};
  }
  const int64_t dim = normalize_dim("index_select", a.dim, x.dim());
  const std::vector<int64_t> ids = index.to_vector<int64_t>();
  const int64_t size = x.size(dim);
  for (int64_t v : ids) check_index_in_range("index_select", v, size, dim);
  Shape shape = x.shape();
  shape[dim] = static_cast<int64_t>(ids.size());
  Tensor out = Tensor::empty(shape, x.dtype());
  count_kernel(KernelKind::Other);
  if (out.numel() == 0) return {out};
  // x contiguous as [outer, size, inner]: each picked slice is one block copy per outer row.
  Tensor xc = x.contiguous();
  const int64_t outer = shape_numel(Shape(shape.begin(), shape.begin() + dim));
  const int64_t inner = shape_numel(Shape(shape.begin() + dim + 1, shape.end()));
  const size_t es = dtype_size(x.dtype());
  const size_t block = static_cast<size_t>(inner) * es;
  const char* src = static_cast<const char*>(xc.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  const int64_t n = static_cast<int64_t>(ids.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(dst + (o * n + i) * block, src + (o * size + ids[i]) * block, block);
  return {out};
}

std::vector<Tensor> gather_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<DimAttrs>(OpId::gather, attrs);
  const Tensor& x = in[0];
  const Tensor& index = in[1];
  check_index_dtype("gather", index);
  // as torch, a 0-d input or index counts as 1-D of size 1: gather(5, 0, [0, 0]) is [5, 5]
  if (std::max<int64_t>(index.dim(), 1) != std::max<int64_t>(x.dim(), 1))
    throw_error<ValueError>("[gather] index of ", shape_word(), " ", index.shape(),
                            " must have as many dims as input of ", shape_word(), " ", x.shape());
  if (x.dim() != index.dim()) {
    normalize_dim("gather", a.dim, x.dim());
    const Tensor flat[] = {x.reshape({x.numel()}), index.reshape({index.numel()})};
    return {gather_impl(flat, DimAttrs{.dim = 0})[0].reshape(index.shape())};
  }
  const int64_t nd = x.dim();
  const int64_t dim = normalize_dim("gather", a.dim, nd);
  for (int64_t d = 0; d < nd; ++d)
    if (d != dim && index.size(d) > x.size(d))
      throw_error<ValueError>("[gather] index of ", shape_word(), " ", index.shape(),
                              " is larger than input of ", shape_word(), " ", x.shape(), " at dim ",
                              d);
  Tensor out = Tensor::empty(index.shape(), x.dtype());
  count_kernel(KernelKind::Other);
  if (out.numel() == 0) return {out};
  const std::vector<int64_t> ids = index.to_vector<int64_t>();
  const int64_t size = nd == 0 ? 1 : x.size(dim);
  for (int64_t v : ids) check_index_in_range("gather", v, size, dim);
  const Strides& st = x.strides();
  const Shape& is = index.shape();
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* op = out.data<T>();
    std::vector<int64_t> pos(nd, 0);
    for (size_t k = 0; k < ids.size(); ++k) {
      int64_t off = 0;
      for (int64_t d = 0; d < nd; ++d) off += (d == dim ? ids[k] : pos[d]) * st[d];
      op[k] = xp[off];
      for (int64_t d = nd - 1; d >= 0; --d) {  // row-major increment of pos over index's shape
        if (++pos[d] < is[d]) break;
        pos[d] = 0;
      }
    }
  });
  return {out};
}

}  // namespace impl

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return call_op1(OpId::index_select, {x, index}, DimAttrs{.dim = dim});
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  return call_op1(OpId::gather, {x, index}, DimAttrs{.dim = dim});
}

}  // namespace td
