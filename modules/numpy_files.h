#pragma once
// NumPy's files: .npy (one array) and .npz (np.savez: a zip of .npy files, one per key).
// Read: little-endian (or byte-sized) float32, float64, int64 and bool arrays as they are, and
// float16, int32, int16, int8 and uint8 converted as load_safetensors converts them; C or
// Fortran order. Object arrays (a pickle), structured dtypes and big-endian data are refused, as
// are headers and sizes beyond the limits (a header over 64 KiB, more than 64 dims, data that
// does not match the shape or exceeds the memory budget), with a ValueError naming the file.
// Written: version 1.0 .npy files in C order; an .npz is stored uncompressed, as np.savez does.
// .npz needs td built with libzip (TD_TORCH_CHECKPOINTS); without it they are a RuntimeError.
#include <string>
#include <string_view>

#include "engine/tensor.h"
#include "modules/tensordict.h"

namespace td {

Tensor load_npy(const std::string& path);
// Sets [sets.begin, sets.end) of a per-set input in an .npy file: the array holds num_sets sets at
// dims [dim, dim + ndims) and becomes shape[:dim] + [sets.size()] + shape[dim + ndims:], reading
// only their bytes (one run per index of the dims before dim; a Fortran-order array is read whole
// and sliced). A ValueError naming the file, its shape, dim and the range when it has too few dims
// or other than num_sets sets there; a regular file only.
Tensor load_npy_input(const std::string& path, SetRange sets, int64_t num_sets, int64_t dim = 0,
                      int64_t ndims = 1);
void save_npy(const Tensor& t, const std::string& path);  // atomically, as save_safetensors
// Keys are the member names without ".npy" (dots nest, as in safetensors files).
TensorDict load_npz(const std::string& path);
void save_npz(const TensorDict& d, const std::string& path);
// Whether this td reads and writes .npz files (built with libzip).
bool npz_supported();

namespace detail {
// The array in an .npy file's bytes; `what` names it in errors ("'x.npy'", "'a' of 'f.npz'").
Tensor parse_npy(std::string_view bytes, const std::string& what);
// The bytes of an .npy file holding t (contiguous copy made as needed).
std::string encode_npy(const Tensor& t);
}  // namespace detail

}  // namespace td
