// Factories: fresh tensors from shapes, values and ranges (unbatched, but for a like-factory of
// a batched tensor).
#include <cmath>

#include "engine/dispatch.h"
#include "engine/ops.h"
#include "engine/ops/impls.h"

namespace td {
namespace {

void fill_value(const Tensor& t, Scalar value) {
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    // integral values go through int64 so that large ones stay exact
    const T v = value.is_floating_point() ? static_cast<T>(value.to_double())
                                          : static_cast<T>(value.to_int());
    const int64_t n = t.numel();
    for (int64_t i = 0; i < n; ++i) p[i] = v;
  });
}

}  // namespace

void impl::check_scalar_fits(const char* op, Scalar value, DType dtype) {
  if (!value.is_floating_point()) return;
  const double v = value.to_double();
  if (!visit_dtype(dtype, [v](auto tag) { return fits<decltype(tag)>(v); }))
    throw_error<RuntimeError>("[", op, "] value ", v, " cannot be converted to ", dtype,
                              " without overflow");
}

Tensor empty(const Shape& shape, DType dtype) {
  check_sizes("empty", shape);
  return Tensor::empty(shape, dtype);
}

Tensor full(const Shape& shape, Scalar value, std::optional<DType> dtype) {
  check_sizes("full", shape);
  const DType dt = dtype.value_or(value.dtype());
  impl::check_scalar_fits("full", value, dt);
  Tensor t = Tensor::empty(shape, dt);
  fill_value(t, value);
  return t;
}

Tensor zeros(const Shape& shape, DType dtype) {
  check_sizes("zeros", shape);
  return full(shape, 0.0, dtype);
}
Tensor ones(const Shape& shape, DType dtype) {
  check_sizes("ones", shape);
  return full(shape, 1.0, dtype);
}
// Inside vmap a like-factory of a batched tensor is batched as it is (as in PyTorch), so the
// result can take per-set values in place: a clone keeps the batch tags, then it is filled.
Tensor full_like(const Tensor& t, Scalar value) {
  if (!t.is_batched()) return full(t.shape(), value, t.dtype());
  Tensor out = t.clone();
  fill_(out, value);
  return out;
}
Tensor empty_like(const Tensor& t) {
  return t.is_batched() ? full_like(t, 0.0) : empty(t.shape(), t.dtype());
}
Tensor zeros_like(const Tensor& t) { return full_like(t, 0.0); }
Tensor ones_like(const Tensor& t) { return full_like(t, 1.0); }

Tensor arange(Scalar end, std::optional<DType> dtype) { return arange(0, end, 1, dtype); }

namespace {

// An int64 range as torch's: start, end and step are taken as int64 first (a floating one
// truncated toward zero, so arange(0.5, 3.9, 1.5, kInt64) is arange(0, 3, 1)) and the values
// are stepped in int64, exact beyond 2^53.
Tensor arange_int64(Scalar start_s, Scalar end_s, Scalar step_s) {
  auto to_int = [&](Scalar v) {
    if (v.is_floating_point() && !fits<int64_t>(v.to_double()))
      throw_error<ValueError>("[arange] bound or step ", v.to_double(),
                              " does not fit an int64 range");
    return v.to_int();
  };
  const int64_t start = to_int(start_s), end = to_int(end_s), step = to_int(step_s);
  if (step == 0)
    throw_error<ValueError>("[arange] step must be nonzero (an int64 range truncates step ",
                            step_s.to_double(), " to 0)");
  if ((step > 0 && end < start) || (step < 0 && end > start))
    throw_error<ValueError>("[arange] upper bound and lower bound inconsistent with step sign: ",
                            "start=", start, " end=", end, " step=", step, " (as int64)");
  // the distance in 128 bits: end - start can overflow int64
  const __int128 dist = static_cast<__int128>(end) - start;
  const __int128 count = (dist + step - (step > 0 ? 1 : -1)) / step;  // ceil(dist / step)
  if (count >= (__int128{1} << 62))
    throw_error<ValueError>("[arange] too many elements: start=", start, " end=", end,
                            " step=", step);
  const int64_t n = static_cast<int64_t>(count);
  Tensor t = empty({n}, DType::Int64);
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    p[i] = static_cast<int64_t>(start + static_cast<__int128>(i) * step);
  return t;
}

}  // namespace

Tensor arange(Scalar start_s, Scalar end_s, Scalar step_s, std::optional<DType> dtype_opt) {
  const bool floating =
      start_s.is_floating_point() || end_s.is_floating_point() || step_s.is_floating_point();
  const DType dtype = dtype_opt.value_or(floating ? DType::Float32 : DType::Int64);
  const double start = start_s.to_double(), end = end_s.to_double(), step = step_s.to_double();
  if (step == 0) throw_error<ValueError>("[arange] step must be nonzero");
  if (!std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    throw_error<ValueError>("[arange] start, end and step must be finite, got ", start, ", ", end,
                            " and ", step);
  if (dtype == DType::Bool) throw_error<TypeError>("[arange] bool dtype is not supported");
  if (dtype == DType::Int64) return arange_int64(start_s, end_s, step_s);
  if ((end - start) * step < 0)
    throw_error<ValueError>("[arange] upper bound and lower bound inconsistent with step sign: ",
                            "start=", start, " end=", end, " step=", step);
  const double count = std::ceil((end - start) / step);
  if (!(count < 9.2e18))
    throw_error<ValueError>("[arange] too many elements: start=", start, " end=", end,
                            " step=", step);
  const int64_t n = static_cast<int64_t>(count);
  Tensor t = empty({n}, dtype);
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
  return t;
}

template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& shape) {
  check_sizes("tensor", shape);
  if (shape_numel(shape) != static_cast<int64_t>(values.size()))
    throw_error<ValueError>("[tensor] ", values.size(), " values do not fill shape ",
                            shape_str(shape), " (", shape_numel(shape), " elements)");
  Tensor t = Tensor::empty(shape, dtype_of<T>());
  T* p = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}
template Tensor tensor<float>(const std::vector<float>&, const Shape&);
template Tensor tensor<double>(const std::vector<double>&, const Shape&);
template Tensor tensor<int64_t>(const std::vector<int64_t>&, const Shape&);
template Tensor tensor<bool>(const std::vector<bool>&, const Shape&);

Tensor tensor(std::initializer_list<float> values, const Shape& shape) {
  return tensor(std::vector<float>(values), shape);
}
Tensor tensor(std::initializer_list<float> values) { return tensor(std::vector<float>(values)); }

Tensor scalar_tensor(double value, DType dtype) { return full({}, value, dtype); }

// Combined with `like` by result_type's tiers, this 0-d tensor gives result_type({like}, {value}):
// it has exactly that dtype, which is never below like's category.
Tensor wrap_scalar(Scalar value, const Tensor& like) {
  const DType t = !like.defined()   ? value.dtype()
                  : value.is_bool() ? like.dtype()  // bool is the lowest category
                                    : promote_with_scalar(like.dtype(), value.is_floating_point());
  Tensor s = Tensor::empty({}, t);
  if (t == DType::Int64 && !value.is_floating_point()) {
    *s.data<int64_t>() = value.to_int();  // exact beyond 2^53
    return s;
  }
  // A wrapped number is cast without full's range check, as torch's: float32 + 1e300 is inf.
  const double v = value.to_double();
  visit_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>)
      *s.data<T>() = fits<T>(v) ? static_cast<T>(v) : static_cast<T>(std::copysign(HUGE_VAL, v));
    else
      *s.data<T>() = static_cast<T>(v);  // bool (an integral t takes integral values only)
  });
  return s;
}

}  // namespace td
