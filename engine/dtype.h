#pragma once
// Element types and PyTorch's type promotion.
#include <cmath>
#include <cstdint>
#include <iosfwd>
#include <limits>
#include <string>
#include <type_traits>

namespace td {

enum class DType : uint8_t { Bool, Int64, Float32, Float64 };

constexpr DType kFloat32 = DType::Float32;
constexpr DType kFloat64 = DType::Float64;
constexpr DType kInt64 = DType::Int64;
constexpr DType kBool = DType::Bool;

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "float32", ...
bool is_floating(DType t);
// PyTorch's promotion between two dtypes: bool < int64 < float32 < float64. Operands of
// different ranks follow result_type (engine/ops.h): a 0-d tensor or a scalar does not widen a
// dimensioned tensor of its category.
DType promote_types(DType a, DType b);
// A tensor combined with a Python-like scalar: an integral tensor with a floating scalar
// becomes the default float (float32); otherwise the tensor's type wins.
DType promote_with_scalar(DType t, bool scalar_is_floating);
std::ostream& operator<<(std::ostream& os, DType t);

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<bool>() { return DType::Bool; }
template <>
constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <>
constexpr DType dtype_of<float>() { return DType::Float32; }
template <>
constexpr DType dtype_of<double>() { return DType::Float64; }

// The arithmetic type T as messages name it: "int32", "uint8", "float", "double".
template <class T>
std::string type_label() {
  if constexpr (std::is_floating_point_v<T>)
    return sizeof(T) == 4 ? "float" : sizeof(T) == 8 ? "double" : "long double";
  else
    return (std::is_signed_v<T> ? "int" : "uint") + std::to_string(8 * sizeof(T));
}

// Whether v converts to the arithmetic type T without overflow (as c10's checked conversions):
// an integer T takes (min - 1, max + 1), the conversion truncating toward zero, and no NaN; a
// floating T any non-finite value or one within its range; bool anything. A long double holds
// every int64 exactly.
template <class T, class S>
bool fits(S v) {
  if constexpr (std::is_same_v<T, S> || std::is_same_v<T, bool>) {
    return true;
  } else {
    const auto x = static_cast<long double>(v);
    if constexpr (std::is_floating_point_v<T>)
      return !std::isfinite(x) || std::fabs(x) <= std::numeric_limits<T>::max();
    else
      return x > static_cast<long double>(std::numeric_limits<T>::min()) - 1 &&
             x < static_cast<long double>(std::numeric_limits<T>::max()) + 1;
  }
}

// Calls f(T{}) with T the C++ type of dtype t.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Bool: return f(bool{});
    case DType::Int64: return f(int64_t{});
    case DType::Float32: return f(float{});
    case DType::Float64: break;
  }
  return f(double{});
}

}  // namespace td
