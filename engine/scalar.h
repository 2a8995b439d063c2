#pragma once
// Scalar: a plain number operand (libtorch's c10::Scalar). It remembers whether it was given as
// a bool, an integer or a floating value, because PyTorch's type promotion follows the C++ (or
// Python) type of a scalar, not its value: arange(3) * 2.0 is float32, arange(3) * 2 is int64.
#include <cstdint>
#include <type_traits>

#include "engine/dtype.h"
#include "engine/errors.h"

namespace td {

template <class T>
concept Arithmetic = std::is_arithmetic_v<T>;

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Integral, Floating };

  Scalar() : Scalar(int64_t{0}) {}
  template <Arithmetic T>
  Scalar(T v) {  // NOLINT(google-explicit-constructor): implicit, as c10::Scalar
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = Kind::Bool;
      i_ = v ? 1 : 0;
      d_ = static_cast<double>(i_);
    } else if constexpr (std::is_integral_v<T>) {
      // td's integers are int64: a larger unsigned value would wrap (torch: "Overflow when
      // unpacking long")
      if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t))
        if (v > static_cast<T>(INT64_MAX))
          throw_error<RuntimeError>("[Scalar] ", v, " does not fit int64, td's integer scalars");
      kind_ = Kind::Integral;
      i_ = static_cast<int64_t>(v);
      d_ = static_cast<double>(v);
    } else {
      kind_ = Kind::Floating;
      d_ = static_cast<double>(v);
      i_ = 0;
    }
  }

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_integral() const { return kind_ == Kind::Integral; }  // bool excluded
  bool is_floating_point() const { return kind_ == Kind::Floating; }
  double to_double() const { return d_; }
  // Exact for bool and integral scalars; truncates a floating one.
  int64_t to_int() const { return kind_ == Kind::Floating ? static_cast<int64_t>(d_) : i_; }
  // The default dtype of the scalar's category: bool, int64 or float32.
  DType dtype() const {
    return kind_ == Kind::Bool ? DType::Bool
                               : (kind_ == Kind::Integral ? DType::Int64 : DType::Float32);
  }

 private:
  Kind kind_;
  int64_t i_;
  double d_;
};

}  // namespace td
