// Reading NumPy's .npy and .npz files (numpy_files.h): the header's dict literal parsed by hand
// (only what np.save writes), checked against the limits before any data is touched.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#ifdef TD_HAVE_LIBZIP
#include <zip.h>
#endif

#include "engine/limits.h"
#include "engine/ops.h"
#include "modules/file_elements.h"
#include "modules/file_sets.h"
#include "modules/numpy_files.h"

namespace td {

namespace {

constexpr size_t kMaxHeader = 65536;  // np.save writes under 200 bytes; NumPy reads 10000
constexpr size_t kMaxDims = 64;
constexpr size_t kMaxMembers = 100000;

struct NpyHeader {
  std::string descr;
  bool fortran = false;
  Shape shape;
};

// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } and its spacing variants.
NpyHeader parse_header(std::string_view h, const std::string& what) {
  auto fail = [&](const std::string& why) -> void {
    throw_error<ValueError>("[load_npy] ", what, ": bad header (", why, ")");
  };
  size_t i = 0;
  auto skip = [&] {
    while (i < h.size() && (h[i] == ' ' || h[i] == '\n' || h[i] == '\t')) ++i;
  };
  auto expect = [&](char c) {
    skip();
    if (i >= h.size() || h[i] != c) fail(std::string("expected '") + c + "'");
    ++i;
  };
  auto string = [&]() {
    skip();
    if (i >= h.size() || (h[i] != '\'' && h[i] != '"')) fail("expected a quoted string");
    const char q = h[i++];
    const size_t end = h.find(q, i);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string s(h.substr(i, end - i));
    i = end + 1;
    return s;
  };
  auto integer = [&]() {
    skip();
    int64_t v = 0;
    size_t digits = 0;
    while (i < h.size() && h[i] >= '0' && h[i] <= '9') {
      if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("a dimension overflows");
      v = v * 10 + (h[i++] - '0');
      ++digits;
    }
    if (i < h.size() && h[i] == 'L') ++i;  // Python 2's long
    if (!digits) fail("expected a dimension");
    return v;
  };
  NpyHeader out;
  bool have_descr = false, have_order = false, have_shape = false;
  expect('{');
  skip();
  while (i < h.size() && h[i] != '}') {
    const std::string key = string();
    expect(':');
    skip();
    if (key == "descr") {
      if (i < h.size() && h[i] == '[') fail("structured dtypes are not supported");
      out.descr = string();
      have_descr = true;
    } else if (key == "fortran_order") {
      if (h.substr(i, 4) == "True") {
        out.fortran = true, i += 4;
      } else if (h.substr(i, 5) == "False") {
        out.fortran = false, i += 5;
      } else {
        fail("fortran_order must be True or False");
      }
      have_order = true;
    } else if (key == "shape") {
      expect('(');
      skip();
      while (i < h.size() && h[i] != ')') {
        if (out.shape.size() >= kMaxDims) fail("more than 64 dims");
        out.shape.push_back(integer());
        skip();
        if (i < h.size() && h[i] == ',') ++i;
        skip();
      }
      expect(')');
      have_shape = true;
    } else {
      fail("unknown key '" + key.substr(0, 64) + "'");
    }
    skip();
    if (i < h.size() && h[i] == ',') ++i;
    skip();
  }
  expect('}');
  if (!have_descr || !have_order || !have_shape)
    fail("it needs 'descr', 'fortran_order' and 'shape'");
  return out;
}

// The file's element type, by its descr ('<f4', '|b1', ...).
const detail::FileElement& source_type(const std::string& descr, const std::string& what) {
  if (descr.size() >= 2 && descr[1] == 'O')
    throw_error<ValueError>("[load_npy] ", what,
                            ": object arrays are not supported (they hold a pickle)");
  const char order = descr.empty() ? ' ' : descr[0];
  if (order == '>')
    throw_error<ValueError>("[load_npy] ", what, ": big-endian data ('", descr,
                            "') is not supported; np.save an array of the native little-endian "
                            "dtype");
  static const std::pair<const char*, const char*> table[] = {
      {"f4", "F32"}, {"f8", "F64"}, {"f2", "F16"}, {"i8", "I64"}, {"i4", "I32"},
      {"i2", "I16"}, {"i1", "I8"},  {"u1", "U8"},  {"b1", "BOOL"}};
  if (order == '<' || order == '|' || order == '=')
    for (const auto& [name, code] : table) {
      const detail::FileElement* e = detail::file_element(code);
      if (descr.substr(1) == name && (e->nbytes == 1 || order != '|')) return *e;
    }
  throw_error<ValueError>("[load_npy] ", what, ": unsupported dtype '", descr,
                          "' (supported: <f4, <f8, <i8, |b1, <f2, <i4, <i2, |i1, |u1)");
}

// A whole file, up to the memory budget.
std::string read_file(const char* op, const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw_error<ValueError>("[", op, "] '", path, "': is a directory");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw_error<ValueError>("[", op, "] '", path, "': cannot open the file");
  const uint64_t budget = static_cast<uint64_t>(memory_budget());
  std::string bytes, block;
  while (f) {
    block.resize(1 << 20);
    f.read(block.data(), static_cast<std::streamsize>(block.size()));
    block.resize(static_cast<size_t>(f.gcount()));
    if (bytes.size() + block.size() > budget)
      throw_error<ValueError>("[", op, "] '", path, "': more data than the memory budget of ",
                              budget, " bytes");
    bytes += block;
  }
  return bytes;
}

// What an .npy file's header says: the array's shape, order and element type, and where its
// data starts. `b` holds at least the header (the data is not needed).
struct NpyLayout {
  NpyHeader header;
  const detail::FileElement* type;
  uint64_t data_start;
  int64_t numel;
};
NpyLayout npy_layout(std::string_view b, const std::string& what) {
  auto fail = [&](auto&&... why) { throw_error<ValueError>("[load_npy] ", what, ": ", why...); };
  if (b.size() < 10 || b.substr(0, 6) != "\x93NUMPY")
    fail("not an .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(b[6]);
  if (major < 1 || major > 3) fail("unsupported .npy version ", major);
  const size_t lenbytes = major == 1 ? 2 : 4;
  if (b.size() < 8 + lenbytes) fail("file is truncated in the header length");
  uint64_t hlen = 0;
  for (size_t k = 0; k < lenbytes; ++k)
    hlen |= uint64_t{static_cast<unsigned char>(b[8 + k])} << (8 * k);
  if (hlen > kMaxHeader) fail("header length ", hlen, " is beyond the limit of ", kMaxHeader);
  const size_t start = 8 + lenbytes;
  if (hlen > b.size() - start)
    fail("header length ", hlen, " runs beyond the end of the file (", b.size(), " bytes)");
  NpyLayout l{parse_header(b.substr(start, hlen), what), nullptr, start + hlen, 1};
  l.type = &source_type(l.header.descr, what);
  for (int64_t d : l.header.shape)
    if (__builtin_mul_overflow(l.numel, d, &l.numel)) fail("shape ", l.header.shape, " overflows");
  return l;
}

// A ValueError unless the file's data_bytes are what the layout's array needs.
void check_npy_data(const NpyLayout& l, uint64_t data_bytes, const std::string& what) {
  uint64_t want = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(l.numel), l.type->nbytes, &want) ||
      want != data_bytes)
    throw_error<ValueError>("[load_npy] ", what, ": shape ", l.header.shape, " of '",
                            l.header.descr, "' needs ", want, " data bytes, the file holds ",
                            data_bytes);
}

}  // namespace

namespace detail {

Tensor parse_npy(std::string_view b, const std::string& what) {
  const NpyLayout l = npy_layout(b, what);
  const detail::FileElement& t = *l.type;
  const std::string_view data = b.substr(l.data_start);
  check_npy_data(l, data.size(), what);
  check_memory_budget("load_npy", l.numel, static_cast<int64_t>(dtype_size(t.dtype)), "elements");
  // Fortran order: the data is the transpose's, in C order
  Shape stored = l.header.shape;
  if (l.header.fortran) std::reverse(stored.begin(), stored.end());
  Tensor out = Tensor::empty(stored, t.dtype);
  if (l.numel > 0) detail::convert_file_elements(t, data.data(), out.raw_data(), l.numel);
  if (!l.header.fortran || l.header.shape.size() < 2) return out;
  IntList dims;
  for (int64_t d = static_cast<int64_t>(stored.size()) - 1; d >= 0; --d) dims.push_back(d);
  return out.permute(dims).contiguous();
}

}  // namespace detail

Tensor load_npy(const std::string& path) {
  return detail::parse_npy(read_file("load_npy", path), "'" + path + "'");
}

Tensor load_npy_input(const std::string& path, SetRange sets, int64_t num_sets, int64_t dim,
                      int64_t ndims) {
  const std::string what = "'" + path + "'";
  detail::check_set_args("[load_npy_input] " + what, sets, num_sets, dim, ndims);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw_error<ValueError>("[load_npy_input] ", what, ": is a directory");
  if (!std::filesystem::is_regular_file(path, ec))
    throw_error<ValueError>("[load_npy_input] ", what,
                            ": is not a regular file, which a range of sets is read from (by "
                            "seeking in it)");
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw_error<ValueError>("[load_npy_input] ", what, ": cannot open the file");
  std::string head(std::min<uint64_t>(file_size, 12 + kMaxHeader), '\0');
  f.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(f.gcount()));
  const NpyLayout l = npy_layout(head, what);
  check_npy_data(l, file_size - std::min<uint64_t>(l.data_start, file_size), what);
  const std::string label = "[load_npy_input] " + what;
  const detail::SetRuns runs =
      detail::set_runs(l.header.shape, l.type->nbytes, sets, num_sets, dim, ndims, label);
  if (l.header.fortran) {  // the sets' bytes are scattered: read whole and slice
    const Tensor t = load_npy(path);
    return t.flatten(dim, dim + ndims - 1).narrow(dim, sets.begin, sets.size()).contiguous();
  }
  check_memory_budget("load_npy_input", static_cast<int64_t>(runs.bytes()), 1, "bytes");
  Tensor out = Tensor::empty(runs.shape, l.type->dtype);
  if (out.numel() == 0) return out;
  std::string buffer(runs.bytes(), '\0');
  if (!detail::read_set_runs(f, l.data_start, runs, buffer.data()))
    throw_error<ValueError>(label, ": the file ends before its header says");
  detail::convert_file_elements(*l.type, buffer.data(), out.raw_data(), out.numel());
  return out;
}

#ifdef TD_HAVE_LIBZIP
bool npz_supported() { return true; }

TensorDict load_npz(const std::string& path) {
  auto fail = [&](auto&&... why) { throw_error<ValueError>("[load_npz] '", path, "': ", why...); };
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("is a directory");
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY, &err);
  if (!z) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, err);
    std::string why = zip_error_strerror(&ze);
    zip_error_fini(&ze);
    fail("cannot open as a zip archive (", why, ")");
  }
  struct Close {
    zip_t* z;
    ~Close() { zip_discard(z); }
  } close{z};
  const zip_int64_t n = zip_get_num_entries(z, 0);
  if (n < 0 || static_cast<uint64_t>(n) > kMaxMembers)
    fail(n, " members, beyond the limit of ", kMaxMembers);
  const uint64_t budget = static_cast<uint64_t>(memory_budget());
  uint64_t total = 0;
  TensorDict out;
  for (zip_int64_t k = 0; k < n; ++k) {
    zip_stat_t st;
    if (zip_stat_index(z, static_cast<zip_uint64_t>(k), 0, &st) != 0 ||
        !(st.valid & ZIP_STAT_NAME) || !(st.valid & ZIP_STAT_SIZE))
      fail("cannot read member ", k, " (", zip_strerror(z), ")");
    std::string name = st.name;
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".npy") != 0)
      fail("member ", quote_key(name), " is not an .npy file");
    name.resize(name.size() - 4);
    if (st.size > budget - std::min(total, budget))
      fail("member ", quote_key(name), " of ", st.size, " bytes is beyond the memory budget of ",
           budget, " bytes");
    total += st.size;
    std::string bytes(static_cast<size_t>(st.size), '\0');
    zip_file_t* f = zip_fopen_index(z, static_cast<zip_uint64_t>(k), 0);
    if (!f) fail("cannot open member ", quote_key(name), " (", zip_strerror(z), ")");
    const zip_int64_t got = zip_fread(f, bytes.data(), st.size);
    const std::string why = got < 0 ? zip_file_strerror(f) : "";
    zip_fclose(f);
    if (got < 0 || static_cast<zip_uint64_t>(got) != st.size)
      fail("cannot read member ", quote_key(name), got < 0 ? " (" + why + ")" : " (truncated)");
    if (out.contains(name)) fail("member ", quote_key(name), " appears twice");
    out.set(name, detail::parse_npy(bytes, quote_key(name) + " of '" + path + "'"));
  }
  return out;
}
#else
bool npz_supported() { return false; }

TensorDict load_npz(const std::string& path) {
  throw_error<RuntimeError>("[load_npz] '", path,
                            "': td was built without libzip (TD_TORCH_CHECKPOINTS=OFF or libzip "
                            "not found), which .npz files need");
}
#endif

}  // namespace td
