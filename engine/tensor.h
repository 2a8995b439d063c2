#pragma once
// Tensor: a strided view of shared storage, optionally carrying vmap batch tags.
//
// A tensor's data is always a physical strided array. Batch tags mark some physical dims as
// vmap batch dims (level -> physical dim); every query (shape, dim, size, printing) shows the
// logical per-set view, i.e. the physical one without the tagged dims.
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "engine/dtype.h"
#include "engine/errors.h"
#include "engine/scalar.h"
#include "engine/shape.h"
#include "engine/small_vector.h"
#include "engine/storage.h"

namespace td {

struct BatchTag {
  int64_t level;  // vmap level id (nested levels have larger ids)
  int64_t pdim;  // physical dim
};
// Sorted by level. Nesting rarely goes deeper than a few levels, so no heap block per tensor.
using BatchTags = SmallVector<BatchTag, 3>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  Shape pshape;  // physical
  Strides pstrides;
  BatchTags tags;
  // Logical layout (physical without tagged dims); kept only when tagged.
  Shape tagged_shape;
  Strides tagged_strides;
  const Shape& shape() const { return tags.empty() ? pshape : tagged_shape; }
  const Strides& strides() const { return tags.empty() ? pstrides : tagged_strides; }
  // Recomputes the logical shape and strides from the physical ones and the tags.
  void sync_logical();
};

class Tensor {
 public:
  Tensor() = default;  // undefined: stands for an absent optional tensor
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  // A tensor over storage with the given physical layout and no tags: a ValueError unless the
  // storage exists, shape and strides have one entry per dim, sizes are not negative and every
  // element lies in the storage.
  static Tensor from_storage(std::shared_ptr<Storage> storage, DType dtype, Shape shape,
                             Strides strides, int64_t offset = 0);
  // from_storage without the checks, for the engine's own views of its tensors.
  static Tensor from_storage_unchecked(std::shared_ptr<Storage> storage, DType dtype, Shape shape,
                                       Strides strides, int64_t offset = 0);
  // A fresh contiguous, uninitialised tensor.
  static Tensor empty(const Shape& shape, DType dtype = DType::Float32);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape(); }
  const Shape& sizes() const { return shape(); }
  const Strides& strides() const { return impl().strides(); }
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t d) const { return shape()[normalize_dim("size", d, dim())]; }
  int64_t stride(int64_t d) const { return strides()[normalize_dim("stride", d, dim())]; }
  int64_t numel() const { return shape_numel(shape()); }
  DType dtype() const { return impl().dtype; }
  int64_t offset() const { return impl().offset; }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  bool shares_storage(const Tensor& o) const;

  // Element pointer at offset(); RuntimeError on a batched tensor or a wrong T.
  template <class T>
  T* data() const;
  void* raw_data() const;

  // batch tags (engine-internal view; vmap/ is the user)
  bool is_batched() const { return defined() && !impl_->tags.empty(); }
  const BatchTags& batch_tags() const { return impl().tags; }
  int64_t max_level() const { return is_batched() ? impl_->tags.back().level : 0; }
  const Shape& physical_shape() const { return impl().pshape; }
  const Strides& physical_strides() const { return impl().pstrides; }
  const TensorImpl& impl() const {
    if (!impl_) throw_undefined();
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // views (share storage, never copy)
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;  // copies only when a view is impossible
  Tensor permute(const IntList& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;  // 2-D transpose
  Tensor unsqueeze(int64_t d) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t d) const;
  Tensor expand(const Shape& shape) const;  // -1 keeps a size
  Tensor expand_as(const Tensor& o) const { return expand(o.shape()); }
  Tensor select(int64_t d, int64_t index) const;
  Tensor slice(int64_t d, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1) const;
  Tensor narrow(int64_t d, int64_t start, int64_t length) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t d, const Shape& sizes) const;
  Tensor operator[](int64_t index) const { return select(0, index); }

  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;

  // reductions and math as methods, as in PyTorch
  Tensor sum(const IntList& dims = {}, bool keepdim = false) const;
  Tensor mean(const IntList& dims = {}, bool keepdim = false) const;
  template <SingleDim I>
  Tensor sum(I dim, bool keepdim = false) const {
    return sum(IntList{static_cast<int64_t>(dim)}, keepdim);
  }
  template <SingleDim I>
  Tensor mean(I dim, bool keepdim = false) const {
    return mean(IntList{static_cast<int64_t>(dim)}, keepdim);
  }
  Tensor var(const IntList& dims = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor std(const IntList& dims = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor amax(const IntList& dims = {}, bool keepdim = false) const;
  Tensor amin(const IntList& dims = {}, bool keepdim = false) const;
  Tensor all(const IntList& dims = {}, bool keepdim = false) const;
  Tensor any(const IntList& dims = {}, bool keepdim = false) const;
  template <SingleDim I>
  Tensor var(I dim, bool unbiased = true, bool keepdim = false) const {
    return var(IntList{static_cast<int64_t>(dim)}, unbiased, keepdim);
  }
  template <SingleDim I>
  Tensor std(I dim, bool unbiased = true, bool keepdim = false) const {
    return std(IntList{static_cast<int64_t>(dim)}, unbiased, keepdim);
  }
  template <SingleDim I>
  Tensor amax(I dim, bool keepdim = false) const {
    return amax(IntList{static_cast<int64_t>(dim)}, keepdim);
  }
  template <SingleDim I>
  Tensor amin(I dim, bool keepdim = false) const {
    return amin(IntList{static_cast<int64_t>(dim)}, keepdim);
  }
  template <SingleDim I>
  Tensor all(I dim, bool keepdim = false) const {
    return all(IntList{static_cast<int64_t>(dim)}, keepdim);
  }
  template <SingleDim I>
  Tensor any(I dim, bool keepdim = false) const {
    return any(IntList{static_cast<int64_t>(dim)}, keepdim);
  }
  Tensor max() const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor pow(Scalar exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max) const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor neg() const;
  Tensor relu() const;
  Tensor matmul(const Tensor& o) const;
  // the operators as methods, as libtorch's x.add(y)
  Tensor add(const Tensor& o) const;
  Tensor sub(const Tensor& o) const;
  Tensor mul(const Tensor& o) const;
  Tensor div(const Tensor& o) const;
  Tensor add(Scalar o) const;
  Tensor sub(Scalar o) const;
  Tensor mul(Scalar o) const;
  Tensor div(Scalar o) const;

  // in place
  Tensor& add_(const Tensor& o);
  Tensor& mul_(const Tensor& o);
  Tensor& sub_(const Tensor& o);
  Tensor& div_(const Tensor& o);
  Tensor& add_(Scalar o);
  Tensor& mul_(Scalar o);
  Tensor& sub_(Scalar o);
  Tensor& div_(Scalar o);
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(Scalar value);
  // the same through a const handle (a module's Param, `lin->weight->fill_(0.5)`): the storage
  // is written, the handle is not
  const Tensor& add_(const Tensor& o) const;
  const Tensor& mul_(const Tensor& o) const;
  const Tensor& sub_(const Tensor& o) const;
  const Tensor& div_(const Tensor& o) const;
  const Tensor& add_(Scalar o) const;
  const Tensor& mul_(Scalar o) const;
  const Tensor& sub_(Scalar o) const;
  const Tensor& div_(Scalar o) const;
  const Tensor& copy_(const Tensor& src) const;
  const Tensor& fill_(Scalar value) const;
  // x += y etc.: the in-place ops above (x's dtype and shape are kept)
  Tensor& operator+=(const Tensor& o) { return add_(o); }
  Tensor& operator-=(const Tensor& o) { return sub_(o); }
  Tensor& operator*=(const Tensor& o) { return mul_(o); }
  Tensor& operator/=(const Tensor& o) { return div_(o); }
  Tensor& operator+=(Scalar o) { return add_(o); }
  Tensor& operator-=(Scalar o) { return sub_(o); }
  Tensor& operator*=(Scalar o) { return mul_(o); }
  Tensor& operator/=(Scalar o) { return div_(o); }

  // data out, converted to any arithmetic T; RuntimeError for a value T cannot hold (NaN or out
  // of range, as libtorch's item<T>), and on a batched tensor (inside vmap the value differs
  // per set)
  template <class T>
  T item() const;
  template <class T>
  std::vector<T> to_vector() const;

 private:
  [[noreturn]] static void throw_undefined();
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Number of elements of a physical layout between offset 0 and the furthest element (+1).
int64_t storage_extent(const Shape& shape, const Strides& strides);

}  // namespace td
