#include "engine/dtype.h"

#include <ostream>

namespace td {

// fits (dtype.h) counts on a long double that holds every int64 exactly: x86's 80-bit and
// aarch64's 128-bit ones do; where long double is double (MSVC, 32-bit ARM) it would not.
static_assert(std::numeric_limits<long double>::digits >= 64);

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::Int64: return 8;
    case DType::Float32: return 4;
    case DType::Float64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int64: return "int64";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "?";
}

bool is_floating(DType t) { return t == DType::Float32 || t == DType::Float64; }

DType promote_types(DType a, DType b) { return a > b ? a : b; }

DType promote_with_scalar(DType t, bool scalar_is_floating) {
  if (scalar_is_floating && !is_floating(t)) return DType::Float32;
  if (!scalar_is_floating && t == DType::Bool) return DType::Int64;
  return t;
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << "td." << dtype_name(t); }

}  // namespace td
