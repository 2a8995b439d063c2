#pragma once
// The element types td's file loaders read (safetensors, .npy/.npz, torch.save), named by
// safetensors' codes, and what td makes of each: floats of 16 bits become float32, integers of
// fewer than 64 bits become int64 (td computes in float32, float64, int64 and bool).
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "engine/dtype.h"

namespace td::detail {

inline float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float bfloat16_to_float(uint16_t h) {
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

struct FileElement {
  const char* code;  // safetensors' name
  DType dtype;       // td's
  size_t nbytes;     // in the file
};

inline constexpr FileElement kFileElements[] = {
    {"F32", DType::Float32, 4}, {"F64", DType::Float64, 8}, {"F16", DType::Float32, 2},
    {"BF16", DType::Float32, 2}, {"I64", DType::Int64, 8},  {"I32", DType::Int64, 4},
    {"I16", DType::Int64, 2},    {"I8", DType::Int64, 1},   {"U8", DType::Int64, 1},
    {"BOOL", DType::Bool, 1}};

// nullptr for a code td does not read
inline const FileElement* file_element(std::string_view code) {
  for (const auto& e : kFileElements)
    if (code == e.code) return &e;
  return nullptr;
}

// Calls f(Src{}, (Dst*)nullptr, conv) with the element's C type in the file, td's C type and the
// conversion of one value, so that a loader's loop (contiguous or strided) is written once.
template <class F>
void visit_file_element(const FileElement& e, F&& f) {
  const std::string_view c = e.code;
  auto same = [](auto v) { return v; };
  auto widen = [](auto v) { return static_cast<int64_t>(v); };
  if (c == "F32")
    f(float{}, static_cast<float*>(nullptr), same);
  else if (c == "F64")
    f(double{}, static_cast<double*>(nullptr), same);
  else if (c == "F16")
    f(uint16_t{}, static_cast<float*>(nullptr), half_to_float);
  else if (c == "BF16")
    f(uint16_t{}, static_cast<float*>(nullptr), bfloat16_to_float);
  else if (c == "I64")
    f(int64_t{}, static_cast<int64_t*>(nullptr), same);
  else if (c == "I32")
    f(int32_t{}, static_cast<int64_t*>(nullptr), widen);
  else if (c == "I16")
    f(int16_t{}, static_cast<int64_t*>(nullptr), widen);
  else if (c == "I8")
    f(int8_t{}, static_cast<int64_t*>(nullptr), widen);
  else if (c == "U8")
    f(uint8_t{}, static_cast<int64_t*>(nullptr), widen);
  else  // BOOL: the loaders check for bytes other than 0 and 1 where the format demands it
    f(uint8_t{}, static_cast<bool*>(nullptr), [](uint8_t v) { return v != 0; });
}

// n contiguous little-endian elements at src into dst (of e.dtype)
inline void convert_file_elements(const FileElement& e, const char* src, void* dst, int64_t n) {
  visit_file_element(e, [&](auto src_tag, auto* dst_tag, auto conv) {
    using Src = decltype(src_tag);
    using Dst = std::remove_pointer_t<decltype(dst_tag)>;
    if constexpr (std::is_same_v<Src, Dst>) {
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(Src));
      return;
    }
    auto* out = static_cast<Dst*>(dst);
    for (int64_t i = 0; i < n; ++i) {
      Src v;
      std::memcpy(&v, src + i * static_cast<int64_t>(sizeof(Src)), sizeof(Src));
      out[i] = conv(v);
    }
  });
}

}  // namespace td::detail
