#pragma once
// safetensors files: 8-byte little-endian header length N, N bytes of JSON
// {"key": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then data.
// td writes "__metadata__": {"td.batch_size": "[4]"} so that a load can restore the batch size,
// and "td.batch_size.KEY" for a nested dict KEY with batch dims beyond its parent's or with no
// tensor (which the entries alone would not bring back).
// These pieces of the format are shared by the reader (safetensors_load.cpp) and the writer
// (safetensors_save.cpp).
#include "engine/dtype.h"

namespace td::detail {

// The format's name of a td dtype.
inline const char* st_dtype(DType t) {
  switch (t) {
    case DType::Bool:
      return "BOOL";
    case DType::Int64:
      return "I64";
    case DType::Float32:
      return "F32";
    case DType::Float64:
      return "F64";
  }
  return "F32";
}

}  // namespace td::detail
