// Fuzz target: TensorDict::load_torch on arbitrary bytes. Input starting with "PK" is the .pt file
// itself (libzip's parsing, the records); anything else is a data.pkl, put into an archive with
// records "0" to "7" of 64 bytes each, so that mutations reach the unpickler and the tensor
// views instead of dying at the zip's CRC. Any td exception is a clean refusal; a crash, a
// sanitizer report, another exception type or a hang is a finding.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/fuzz/fuzz_file.h"

#ifdef TD_HAVE_LIBZIP
#include <zip.h>
#endif

namespace {

#ifdef TD_HAVE_LIBZIP
// A stored (uncompressed) archive of data.pkl and the records, built in memory by libzip.
std::string archive_of(const uint8_t* pkl, size_t size) {
  static char records[8][64];
  static const bool filled = [] {
    for (int r = 0; r < 8; ++r)
      for (int i = 0; i < 64; ++i) records[r][i] = static_cast<char>((r + i) % 2);
    return true;
  }();
  (void)filled;
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(nullptr, 0, 0, &err);
  zip_t* z = src ? zip_open_from_source(src, ZIP_TRUNCATE, &err) : nullptr;
  if (!z) __builtin_trap();
  zip_source_keep(src);
  auto add = [&](const std::string& name, const void* p, size_t n) {
    zip_source_t* s = zip_source_buffer(z, p, n, 0);
    const zip_int64_t i = zip_file_add(z, name.c_str(), s, ZIP_FL_OVERWRITE);
    if (i < 0) __builtin_trap();
    zip_set_file_compression(z, static_cast<zip_uint64_t>(i), ZIP_CM_STORE, 0);
  };
  add("archive/data.pkl", pkl, size);
  for (int r = 0; r < 8; ++r) add("archive/data/" + std::to_string(r), records[r], 64);
  if (zip_close(z) != 0) __builtin_trap();
  std::string out;
  zip_stat_t st;
  if (zip_source_stat(src, &st) != 0 || zip_source_open(src) != 0) __builtin_trap();
  out.resize(st.size);
  if (zip_source_read(src, out.data(), st.size) != static_cast<zip_int64_t>(st.size))
    __builtin_trap();
  zip_source_close(src);
  zip_source_free(src);
  zip_error_fini(&err);
  return out;
}
#endif
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path;
#ifdef TD_HAVE_LIBZIP
  if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
    path = td::fuzz::as_file(data, size);
  } else {
    const std::string zip = archive_of(data, size);
    path = td::fuzz::as_file(reinterpret_cast<const uint8_t*>(zip.data()), zip.size());
  }
#else
  path = td::fuzz::as_file(data, size);
#endif
  try {
    const td::TensorDict d = td::TensorDict::load_torch(path);
    // what a caller does next: walk the keys, read every leaf
    for (const auto& [key, t] : d.leaves()) {
      if (d.get(key).numel() != t.numel()) __builtin_trap();
      if (t.numel() > 0 && t.numel() < 4096) (void)t.sum().item<double>();
    }
    (void)d.keys(true, false);
  } catch (const td::ValueError&) {
  } catch (const td::KeyError&) {
  } catch (const td::TypeError&) {
  } catch (const td::IndexError&) {
  } catch (const td::RuntimeError&) {
  }
  return 0;
}
