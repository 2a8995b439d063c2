// Writing NumPy's .npy and .npz files (numpy_files.h).
#include <string>

#ifdef TD_HAVE_LIBZIP
#include <zip.h>
#endif

#include "engine/ops.h"
#include "modules/file_write.h"
#include "modules/numpy_files.h"

namespace td {

namespace detail {

std::string encode_npy(const Tensor& t) {
  const char* descr = "<f4";
  switch (t.dtype()) {
    case DType::Float32:
      break;
    case DType::Float64:
      descr = "<f8";
      break;
    case DType::Int64:
      descr = "<i8";
      break;
    case DType::Bool:
      descr = "|b1";
      break;
  }
  std::string shape = "(";
  for (int64_t d : t.shape()) shape += std::to_string(d) + (t.dim() == 1 ? ",)" : ", ");
  if (t.dim() != 1) {
    if (t.dim() > 1) shape.resize(shape.size() - 2);
    shape += ")";
  }
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // np.save pads with spaces and ends with a newline so that the data starts on 64 bytes
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  const Tensor c = t.contiguous();
  const size_t nbytes = static_cast<size_t>(c.numel()) * dtype_size(c.dtype());
  if (nbytes) out.append(static_cast<const char*>(c.raw_data()), nbytes);
  return out;
}

}  // namespace detail

void save_npy(const Tensor& t, const std::string& path) {
  const std::string bytes = detail::encode_npy(t);
  write_file_atomically("save_npy", path, {{bytes.data(), bytes.size()}});
}

#ifdef TD_HAVE_LIBZIP
void save_npz(const TensorDict& d, const std::string& path) {
  auto fail = [&](const std::string& what, zip_t* z) {
    const std::string why = z ? zip_strerror(z) : "";
    if (z) zip_discard(z);
    throw_error<RuntimeError>("[save_npz] ", what, " '", path, "'", why.empty() ? "" : ": ", why);
  };
  int err = 0;
  // libzip writes a new file beside the target and renames it over it when closing
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!z) fail("cannot open for writing", nullptr);
  std::vector<std::string> blobs;  // libzip reads the buffers when it closes the archive
  const auto leaves = d.leaves();
  blobs.reserve(leaves.size());
  for (const auto& [key, t] : leaves) {
    blobs.push_back(detail::encode_npy(t));
    zip_source_t* src = zip_source_buffer(z, blobs.back().data(), blobs.back().size(), 0);
    if (!src) fail("cannot add '" + key + "' to", z);
    const zip_int64_t i =
        zip_file_add(z, (key + ".npy").c_str(), src, ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8);
    if (i < 0) {
      zip_source_free(src);
      fail("cannot add '" + key + "' to", z);
    }
    if (zip_set_file_compression(z, static_cast<zip_uint64_t>(i), ZIP_CM_STORE, 0) != 0)
      fail("cannot store '" + key + "' in", z);
  }
  if (zip_close(z) != 0) fail("failed writing", z);
}
#else
void save_npz(const TensorDict&, const std::string& path) {
  throw_error<RuntimeError>("[save_npz] '", path,
                            "': td was built without libzip (TD_TORCH_CHECKPOINTS=OFF or libzip "
                            "not found), which .npz files need");
}
#endif

}  // namespace td
