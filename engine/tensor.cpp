#include "engine/tensor.h"

#include <algorithm>
#include <string>

#include "engine/dispatch.h"
#include "engine/kernels/kernels.h"
#include "engine/ops.h"

namespace td {

void TensorImpl::sync_logical() {
  tagged_shape.clear();
  tagged_strides.clear();
  if (tags.empty()) return;
  for (size_t p = 0; p < pshape.size(); ++p) {
    bool tagged = std::any_of(tags.begin(), tags.end(),
                              [&](const BatchTag& t) { return t.pdim == static_cast<int64_t>(p); });
    if (tagged) continue;
    tagged_shape.push_back(pshape[p]);
    tagged_strides.push_back(pstrides[p]);
  }
}

int64_t storage_extent(const Shape& shape, const Strides& strides) {
  int64_t extent = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return 0;
    extent += (shape[i] - 1) * strides[i];
  }
  return extent;
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, DType dtype, Shape shape,
                            Strides strides, int64_t offset) {
  if (!storage) throw_error<ValueError>("[from_storage] the storage is null");
  if (shape.size() != strides.size())
    throw_error<ValueError>("[from_storage] shape ", shape, " and strides ", strides,
                            " have different lengths");
  check_sizes("from_storage", shape);
  // the lowest and highest element offsets, with overflow checked: all must be in the storage
  const auto item = static_cast<int64_t>(dtype_size(dtype));
  int64_t lo = offset, hi = offset;
  bool overflow = false;
  if (shape_numel(shape) > 0)
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t reach = 0;  // from the first element of dim d to its last
      if (__builtin_mul_overflow(shape[d] - 1, strides[d], &reach))
        overflow = true;
      else if (reach < 0)
        overflow |= __builtin_add_overflow(lo, reach, &lo);
      else
        overflow |= __builtin_add_overflow(hi, reach, &hi);
    }
  int64_t end = 0;
  overflow |= __builtin_add_overflow(hi, 1, &end) || __builtin_mul_overflow(end, item, &end);
  if (shape_numel(shape) > 0 &&
      (overflow || lo < 0 || static_cast<uint64_t>(end) > storage->nbytes()))
    throw_error<ValueError>("[from_storage] shape ", shape, ", strides ", strides, " and offset ",
                            offset, " of ", dtype_name(dtype), " reach outside a storage of ",
                            storage->nbytes(), " bytes");
  return from_storage_unchecked(std::move(storage), dtype, std::move(shape), std::move(strides),
                                offset);
}

Tensor Tensor::from_storage_unchecked(std::shared_ptr<Storage> storage, DType dtype, Shape shape,
                                      Strides strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->dtype = dtype;
  impl->offset = offset;
  impl->pshape = std::move(shape);
  impl->pstrides = std::move(strides);
  return Tensor(std::move(impl));
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  check_sizes("empty", shape);
  const int64_t n = shape_numel(shape);
  const int64_t item = static_cast<int64_t>(dtype_size(dtype));
  if (n > (int64_t{1} << 62) / item)  // also keeps the allocator's rounding from wrapping
    throw_error<RuntimeError>("[alloc] cannot allocate ", n, " elements of ", dtype_name(dtype),
                              " for shape ", shape, " (too many bytes)");
  std::shared_ptr<Storage> storage;
  try {
    storage = make_storage(static_cast<size_t>(n * item));
  } catch (const std::bad_alloc&) {
    throw_error<RuntimeError>("[alloc] cannot allocate ", n * item, " bytes for shape ", shape,
                              " of ", dtype_name(dtype), " (out of memory)");
  }
  return from_storage_unchecked(std::move(storage), dtype, shape, contiguous_strides(shape));
}

void Tensor::throw_undefined() {
  throw_error<UndefinedTensorError>("[tensor] use of an undefined tensor");
}

bool Tensor::is_contiguous() const {
  const auto& s = shape();
  const auto& st = strides();
  int64_t expected = 1;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == 1) continue;
    if (st[i] != expected) return false;
    expected *= s[i];
  }
  return true;
}

bool Tensor::shares_storage(const Tensor& o) const {
  return defined() && o.defined() && storage() == o.storage();
}

static void check_readable(const Tensor& t, const char* op) {
  if (t.is_batched())
    throw_error<RuntimeError>(
        "[", op, "] cannot read the data of a batched tensor of per-set shape ", t.shape(),
        " inside vmap: its value differs per set, so data-dependent control flow is not "
        "supported; compute it with tensor ops (e.g. where) instead");
}

void* Tensor::raw_data() const {
  check_readable(*this, "data");
  return static_cast<char*>(impl().storage->data()) +
         impl().offset * static_cast<int64_t>(dtype_size(dtype()));
}

template <class T>
T* Tensor::data() const {
  if (dtype_of<T>() != dtype())
    throw_error<TypeError>("[data] requested ", dtype_name(dtype_of<T>()), " data of a ",
                           dtype_name(dtype()), " tensor");
  return static_cast<T*>(raw_data());
}

namespace {

// v as T, or a RuntimeError when it does not fit T, as libtorch's item<T> checks. S is a dtype's
// type, T any arithmetic one.
template <class T, class S>
T checked_convert(S v, const char* op) {
  if (!fits<T>(v))
    throw_error<RuntimeError>("[", op, "] value ", v, " cannot be converted to ", type_label<T>(),
                              " without overflow");
  return static_cast<T>(v);
}

}  // namespace

template <class T>
T Tensor::item() const {
  check_readable(*this, "item");
  if (numel() != 1)
    throw_error<RuntimeError>("[item] a tensor of shape ", shape(), " has ", numel(),
                              " elements; item() needs exactly one");
  return visit_dtype(dtype(), [&](auto v) {
    using S = decltype(v);
    return checked_convert<T>(*static_cast<const S*>(raw_data()), "item");
  });
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  check_readable(*this, "to_vector");
  // element by element from the stored dtype, checked as item<T>() checks its one element
  return visit_dtype(dtype(), [&](auto v) {
    using S = decltype(v);
    const Tensor c = contiguous();
    const S* p = static_cast<const S*>(c.raw_data());
    const auto n = static_cast<size_t>(c.numel());
    if constexpr (std::is_same_v<S, T> || (std::is_floating_point_v<S> &&
                                           std::is_floating_point_v<T> && sizeof(T) >= sizeof(S))) {
      return std::vector<T>(p, p + n);  // the same type, or a wider floating one: always fits
    } else {
      std::vector<T> out;
      out.reserve(n);
      for (size_t i = 0; i < n; ++i) out.push_back(checked_convert<T>(p[i], "to_vector"));
      return out;
    }
  });
}

#define TD_INSTANTIATE(T)              \
  template T* Tensor::data<T>() const; \
  template T Tensor::item<T>() const;  \
  template std::vector<T> Tensor::to_vector<T>() const;
TD_INSTANTIATE(bool)
TD_INSTANTIATE(int64_t)
TD_INSTANTIATE(float)
TD_INSTANTIATE(double)
#undef TD_INSTANTIATE
// item and to_vector for the other arithmetic types (converted from the stored dtype)
#define TD_INSTANTIATE_OUT(T)         \
  template T Tensor::item<T>() const; \
  template std::vector<T> Tensor::to_vector<T>() const;
TD_INSTANTIATE_OUT(char)
TD_INSTANTIATE_OUT(signed char)
TD_INSTANTIATE_OUT(unsigned char)
TD_INSTANTIATE_OUT(short)
TD_INSTANTIATE_OUT(unsigned short)
TD_INSTANTIATE_OUT(int)
TD_INSTANTIATE_OUT(unsigned int)
TD_INSTANTIATE_OUT(long long)
TD_INSTANTIATE_OUT(unsigned long)
TD_INSTANTIATE_OUT(unsigned long long)
TD_INSTANTIATE_OUT(long double)
#undef TD_INSTANTIATE_OUT

// ---- methods: thin forwards to the ops ----

Tensor Tensor::view(const Shape& s) const {
  return call_op1(OpId::view, {*this}, SizesAttrs{.sizes = s});
}
Tensor Tensor::reshape(const Shape& s) const {
  return call_op1(OpId::reshape, {*this}, SizesAttrs{.sizes = s});
}
Tensor Tensor::permute(const IntList& dims) const {
  return call_op1(OpId::permute, {*this}, DimsAttrs{.dims = dims});
}
Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  return call_op1(OpId::transpose, {*this}, TransposeAttrs{.dim0 = d0, .dim1 = d1});
}
Tensor Tensor::t() const {
  if (dim() > 2) throw_error<ValueError>("[t] expects a tensor of <= 2 dims, got ", shape());
  return dim() < 2 ? *this : transpose(0, 1);
}
Tensor Tensor::unsqueeze(int64_t d) const {
  return call_op1(OpId::unsqueeze, {*this}, DimAttrs{.dim = d});
}
Tensor Tensor::squeeze() const { return call_op1(OpId::squeeze, {*this}, DimsAttrs{}); }
Tensor Tensor::squeeze(int64_t d) const {
  return call_op1(OpId::squeeze, {*this}, DimsAttrs{.dims = {d}});
}
Tensor Tensor::expand(const Shape& s) const {
  return call_op1(OpId::expand, {*this}, SizesAttrs{.sizes = s});
}
Tensor Tensor::select(int64_t d, int64_t index) const {
  return call_op1(OpId::select, {*this}, SelectAttrs{.dim = d, .index = index});
}
Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step) const {
  const SliceAttrs a{
      .dim = d, .start = start.value_or(0), .end = end.value_or(INT64_MAX), .step = step};
  return call_op1(OpId::slice, {*this}, a);
}
Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  if (dim() == 0) throw_error<IndexError>("[narrow] cannot be applied to a 0-dim tensor");
  d = normalize_dim("narrow", d, dim());
  int64_t n = size(d);
  if (start < 0) start += n;
  if (start < 0 || length < 0 || length > n - start)  // not start + length: it may overflow
    throw_error<IndexError>("[narrow] start ", start, " and length ", length,
                            " out of range for dim ", d, " of shape ", shape());
  return slice(d, start, start + length, 1);
}
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  return call_op1(OpId::flatten, {*this}, FlattenAttrs{.start_dim = start_dim, .end_dim = end_dim});
}
Tensor Tensor::unflatten(int64_t d, const Shape& sizes) const {
  return call_op1(OpId::unflatten, {*this}, UnflattenAttrs{.dim = d, .sizes = sizes});
}
Tensor Tensor::contiguous() const {
  if (!is_batched() && is_contiguous()) return *this;
  return call_op1(OpId::contiguous, {*this}, {});
}
Tensor Tensor::clone() const { return call_op1(OpId::clone, {*this}, {}); }
Tensor Tensor::to(DType dtype) const {
  if (!defined()) throw_error<UndefinedTensorError>("[to] of an undefined tensor");
  if (dtype == this->dtype()) return *this;
  return call_op1(OpId::to_dtype, {*this}, CastAttrs{.dtype = dtype});
}

Tensor Tensor::sum(const IntList& dims, bool keepdim) const {
  return td::sum(*this, dims, keepdim);
}
Tensor Tensor::mean(const IntList& dims, bool keepdim) const {
  return td::mean(*this, dims, keepdim);
}
Tensor Tensor::var(const IntList& dims, bool unbiased, bool keepdim) const {
  return td::var(*this, dims, unbiased, keepdim);
}
Tensor Tensor::std(const IntList& dims, bool unbiased, bool keepdim) const {
  return td::std(*this, dims, unbiased, keepdim);
}
Tensor Tensor::amax(const IntList& dims, bool keepdim) const {
  return td::amax(*this, dims, keepdim);
}
Tensor Tensor::amin(const IntList& dims, bool keepdim) const {
  return td::amin(*this, dims, keepdim);
}
Tensor Tensor::all(const IntList& dims, bool keepdim) const {
  return td::all(*this, dims, keepdim);
}
Tensor Tensor::any(const IntList& dims, bool keepdim) const {
  return td::any(*this, dims, keepdim);
}
Tensor Tensor::max() const { return td::max(*this); }
Tensor Tensor::min() const { return td::min(*this); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  return td::max(*this, dim, keepdim);
}
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const {
  return td::min(*this, dim, keepdim);
}
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  return td::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const {
  return td::argmin(*this, dim, keepdim);
}
Tensor Tensor::softmax(int64_t dim) const { return td::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return td::log_softmax(*this, dim); }
Tensor Tensor::pow(Scalar exponent) const { return td::pow(*this, exponent); }
Tensor Tensor::pow(const Tensor& exponent) const { return td::pow(*this, exponent); }
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return td::clamp(*this, min, max);
}
Tensor Tensor::tanh() const { return td::tanh(*this); }
Tensor Tensor::sigmoid() const { return td::sigmoid(*this); }
Tensor Tensor::abs() const { return td::abs(*this); }
Tensor Tensor::exp() const { return td::exp(*this); }
Tensor Tensor::log() const { return td::log(*this); }
Tensor Tensor::sqrt() const { return td::sqrt(*this); }
Tensor Tensor::neg() const { return td::neg(*this); }
Tensor Tensor::relu() const { return td::relu(*this); }
Tensor Tensor::matmul(const Tensor& o) const { return td::matmul(*this, o); }
Tensor Tensor::add(const Tensor& o) const { return td::add(*this, o); }
Tensor Tensor::sub(const Tensor& o) const { return td::sub(*this, o); }
Tensor Tensor::mul(const Tensor& o) const { return td::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return td::div(*this, o); }
Tensor Tensor::add(Scalar o) const { return td::add(*this, o); }
Tensor Tensor::sub(Scalar o) const { return td::sub(*this, o); }
Tensor Tensor::mul(Scalar o) const { return td::mul(*this, o); }
Tensor Tensor::div(Scalar o) const { return td::div(*this, o); }

Tensor& Tensor::add_(const Tensor& o) { return td::add_(*this, o); }
Tensor& Tensor::mul_(const Tensor& o) { return td::mul_(*this, o); }
Tensor& Tensor::copy_(const Tensor& src) { return td::copy_(*this, src); }
Tensor& Tensor::sub_(const Tensor& o) { return td::sub_(*this, o); }
Tensor& Tensor::div_(const Tensor& o) { return td::div_(*this, o); }
Tensor& Tensor::add_(Scalar o) { return td::add_(*this, o); }
Tensor& Tensor::mul_(Scalar o) { return td::mul_(*this, o); }
Tensor& Tensor::sub_(Scalar o) { return td::sub_(*this, o); }
Tensor& Tensor::div_(Scalar o) { return td::div_(*this, o); }
Tensor& Tensor::fill_(Scalar value) { return td::fill_(*this, value); }
const Tensor& Tensor::add_(const Tensor& o) const { return td::add_(*this, o); }
const Tensor& Tensor::mul_(const Tensor& o) const { return td::mul_(*this, o); }
const Tensor& Tensor::copy_(const Tensor& src) const { return td::copy_(*this, src); }
const Tensor& Tensor::sub_(const Tensor& o) const { return td::sub_(*this, o); }
const Tensor& Tensor::div_(const Tensor& o) const { return td::div_(*this, o); }
const Tensor& Tensor::add_(Scalar o) const { return td::add_(*this, o); }
const Tensor& Tensor::mul_(Scalar o) const { return td::mul_(*this, o); }
const Tensor& Tensor::sub_(Scalar o) const { return td::sub_(*this, o); }
const Tensor& Tensor::div_(Scalar o) const { return td::div_(*this, o); }
const Tensor& Tensor::fill_(Scalar value) const { return td::fill_(*this, value); }

}  // namespace td
