// safetensors files: 8-byte little-endian header length N, N bytes of JSON
// {"key": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then data.
// td writes "__metadata__": {"td.batch_size": "[4]"} so that a load can restore the batch size,
// and "td.batch_size.KEY" for a nested dict KEY with batch dims beyond its parent's or with no
// tensor (which the entries alone would not bring back).
#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "engine/ops.h"
#include "modules/tensordict.h"

namespace td {

namespace {
using json = nlohmann::ordered_json;

const char* st_dtype(DType t) {
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

float half_to_float(uint16_t h) {
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

struct SourceType {
  DType dtype;    // what td makes of it
  size_t nbytes;  // element size in the file
};

bool source_type(const std::string& name, SourceType& out) {
  static const std::pair<const char*, SourceType> table[] = {
      {"F32", {DType::Float32, 4}}, {"F64", {DType::Float64, 8}}, {"I64", {DType::Int64, 8}},
      {"BOOL", {DType::Bool, 1}},   {"F16", {DType::Float32, 2}}, {"BF16", {DType::Float32, 2}},
      {"I32", {DType::Int64, 4}},   {"I16", {DType::Int64, 2}},   {"I8", {DType::Int64, 1}},
      {"U8", {DType::Int64, 1}}};
  for (const auto& [n, t] : table)
    if (name == n) {
      out = t;
      return true;
    }
  return false;
}

// Converts n elements of file type `name` at src into dst (of the td dtype).
void convert(const std::string& name, const char* src, void* dst, int64_t n) {
  auto ld = [&](auto tag, int64_t i) {
    decltype(tag) v;
    std::memcpy(&v, src + i * sizeof(v), sizeof(v));
    return v;
  };
  if (name == "F16" || name == "BF16") {
    float* out = static_cast<float*>(dst);
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h = ld(uint16_t{}, i);
      if (name == "F16") {
        out[i] = half_to_float(h);
      } else {
        uint32_t bits = uint32_t{h} << 16;
        std::memcpy(&out[i], &bits, 4);
      }
    }
    return;
  }
  int64_t* out = static_cast<int64_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    if (name == "I32")
      out[i] = ld(int32_t{}, i);
    else if (name == "I16")
      out[i] = ld(int16_t{}, i);
    else if (name == "I8")
      out[i] = ld(int8_t{}, i);
    else
      out[i] = ld(uint8_t{}, i);
  }
}

// "[4, 2]" as a Shape prints -> {4, 2}; anything else ("[3abc]", "[4,]", "[-1]") is an error.
Shape parse_shape_str(const std::string& s) {
  auto bad = [] { return ValueError("bad batch_size"); };
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') throw bad();
  Shape out;
  const char* p = s.data() + 1;
  const char* end = s.data() + s.size() - 1;
  auto skip_spaces = [&] {
    while (p < end && *p == ' ') ++p;
  };
  skip_spaces();
  while (p < end) {
    int64_t v = 0;
    auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || v < 0) throw bad();
    out.push_back(v);
    p = next;
    skip_spaces();
    if (p == end) break;
    if (*p != ',') throw bad();
    ++p;
    skip_spaces();
    if (p == end) throw bad();
  }
  return out;
}
}  // namespace

void TensorDict::save_safetensors(const std::string& path) const {
  json header = json::object();
  std::vector<Tensor> datas;
  uint64_t offset = 0;
  for (const auto& [k, t] : leaves()) {
    if (k == "__metadata__")  // the format's own entry: the tensor would be lost
      throw_error<ValueError>("[save_safetensors] '", path,
                              "': a tensor cannot be named "
                              "'__metadata__', which the format reserves for its metadata");
    try {
      (void)json(k).dump();
    } catch (const json::type_error&) {
      throw_error<ValueError>("[save_safetensors] '", path, "': key '", k,
                              "' is not valid UTF-8, which the format's JSON header needs");
    }
    Tensor c = t.contiguous();
    uint64_t n = static_cast<uint64_t>(c.numel()) * dtype_size(c.dtype());
    header[k] = {{"dtype", st_dtype(c.dtype())},
                 {"shape", c.shape()},
                 {"data_offsets", {offset, offset + n}}};
    offset += n;
    datas.push_back(c);
  }
  std::ostringstream bs;
  bs << batch_size_;
  json meta = {{"format", "pt"}, {"td.batch_size", bs.str()}};
  const std::function<void(const TensorDict&, const std::string&)> note_nested =
      [&](const TensorDict& d, const std::string& prefix) {
        for (const auto& [k, e] : d.items())
          if (const auto* sub = std::get_if<TensorDict>(&e)) {
            // extra batch dims, or a dict without tensors, which the entries alone would lose
            if (sub->batch_dims() > d.batch_dims() || sub->leaves().empty()) {
              std::ostringstream s;
              s << sub->batch_size();
              meta["td.batch_size." + prefix + k] = s.str();
            }
            note_nested(*sub, prefix + k + ".");
          }
      };
  note_nested(*this, "");
  header["__metadata__"] = std::move(meta);
  std::string h = header.dump();
  while (h.size() % 8 != 0) h += ' ';  // as the Python package does: aligned data
  std::ofstream f(path, std::ios::binary);
  if (!f) throw_error<ValueError>("[save_safetensors] cannot open '", path, "' for writing");
  uint64_t n = h.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  f.write(reinterpret_cast<const char*>(len), 8);
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& c : datas) {
    size_t nb = static_cast<size_t>(c.numel()) * dtype_size(c.dtype());
    if (nb) f.write(static_cast<const char*>(c.raw_data()), static_cast<std::streamsize>(nb));
  }
  f.close();  // the last bytes are written here: a full disk shows only now
  if (f.fail()) throw_error<ValueError>("[save_safetensors] failed writing '", path, "'");
}

TensorDict TensorDict::load_safetensors(const std::string& path, Shape batch_size) {
  auto fail = [&](auto&&... what) {
    throw_error<ValueError>("[load_safetensors] '", path, "': ", what...);
  };
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("is a directory");
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open the file");
  // The header first, checked before any data is read: a device or a stray file (/dev/zero,
  // a huge non-safetensors file) is refused without reading it whole. The size of a regular file
  // bounds the header; a pipe's cannot, so there the format's own limit of 100 MB does.
  const auto file_size = std::filesystem::is_regular_file(path, ec)
                             ? std::optional<uint64_t>(std::filesystem::file_size(path, ec))
                             : std::nullopt;
  auto read = [&](std::string& out, uint64_t count) {
    out.resize(count);
    f.read(out.data(), static_cast<std::streamsize>(count));
    out.resize(static_cast<size_t>(f.gcount()));
  };
  std::string len;
  read(len, 8);
  if (len.size() < 8)
    fail("file is truncated: ", len.size(), " bytes, less than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<unsigned char>(len[i])} << (8 * i);
  constexpr uint64_t kMaxHeader = 100'000'000;
  if (file_size && n > *file_size - 8)
    fail("header length ", n, " runs beyond the end of the file (", *file_size, " bytes)");
  if (n > kMaxHeader) fail("header length ", n, " is beyond the format's limit of 100 MB");
  std::string head;
  read(head, n);
  if (head.size() < n)
    fail("header length ", n, " runs beyond the end of the file (", 8 + head.size(), " bytes)");
  // as the reference reader: the JSON starts the header; a raw NUL is never valid JSON (nlohmann
  // would stop reading there and take NUL padding or trailing bytes)
  if (!head.empty() && head.front() != '{')
    fail("the header is not a JSON object: it does not start with '{'");
  json header = head.find('\0') == std::string::npos ? json::parse(head, nullptr, false)
                                                     : json(json::value_t::discarded);
  if (header.is_discarded()) fail("the header is not valid JSON");
  std::string bytes;
  try {
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  } catch (const std::exception& e) {
    fail("cannot read the data: ", e.what());
  }
  const uint64_t data_size = bytes.size();
  const char* data = bytes.data();

  struct Item {
    std::string key, dtype;
    SourceType type;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Item> items;
  Shape meta_batch;
  bool has_meta_batch = false;
  std::vector<std::pair<std::string, Shape>> nested_batch;  // in the order saved: parents first
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "__metadata__") {
      if (!v.is_object()) fail("__metadata__ is not an object");
      const std::string prefix = "td.batch_size.";  // then a nested dict's key
      for (auto m = v.begin(); m != v.end(); ++m) {
        const std::string& k = m.key();
        if (!m.value().is_string())
          fail("__metadata__ '", k, "' is not a string (the format maps strings to strings)");
        if (k != "td.batch_size" && k.rfind(prefix, 0) != 0) continue;
        Shape shape;
        try {
          shape = parse_shape_str(m.value().get<std::string>());
        } catch (const std::exception&) {
          fail("__metadata__ has a malformed ", k);
        }
        if (k == "td.batch_size") {
          meta_batch = shape;
          has_meta_batch = true;
        } else {
          nested_batch.emplace_back(k.substr(prefix.size()), shape);
        }
      }
      continue;
    }
    if (!v.is_object()) fail("entry '", key, "' is not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) fail("entry '", key, "' has no dtype");
    if (!v.contains("shape") || !v["shape"].is_array()) fail("entry '", key, "' has no shape");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2 || !v["data_offsets"][0].is_number_unsigned() ||
        !v["data_offsets"][1].is_number_unsigned())
      fail("entry '", key, "' has no valid data_offsets [begin, end]");
    Item item;
    item.key = key;
    item.dtype = v["dtype"].get<std::string>();
    if (!source_type(item.dtype, item.type))
      fail("entry '", key, "' has unknown dtype '", item.dtype,
           "' (supported: F32, F64, I64, BOOL, F16, BF16, I32, I16, I8, U8)");
    uint64_t numel = 1;
    // a zero dim anywhere makes the entry empty, whatever the other dims ([2, 3, 0] needs no data)
    const bool empty =
        std::any_of(v["shape"].begin(), v["shape"].end(), [](const json& d) { return d == 0; });
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) fail("entry '", key, "' has a bad shape");
      uint64_t s = d.get<uint64_t>();
      if (s > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (!empty && numel > data_size / s + 1))
        fail("entry '", key, "' has a shape larger than the file");
      numel *= s;
      item.shape.push_back(static_cast<int64_t>(s));
    }
    item.begin = v["data_offsets"][0].get<uint64_t>();
    item.end = v["data_offsets"][1].get<uint64_t>();
    if (item.begin > item.end || item.end > data_size)
      fail("entry '", key, "' has data_offsets [", item.begin, ", ", item.end,
           "] out of range of the ", data_size, " data bytes");
    uint64_t need = 0;  // numel * element size, which may not fit 64 bits
    const bool too_many = __builtin_mul_overflow(numel, item.type.nbytes, &need);
    if (too_many || need > data_size || item.end - item.begin != need)
      fail("entry '", key, "' has ", item.end - item.begin, " data bytes but shape ",
           shape_str(item.shape), " of ", item.dtype, " needs ",
           too_many ? std::string("more than 2^64") : std::to_string(need));
    items.push_back(std::move(item));
  }
  // As the reference reader: the entries, by position, tile the data exactly, without overlaps,
  // holes or bytes after the last (an empty entry too must sit between two others, not inside one).
  std::vector<const Item*> sorted;
  for (const auto& i : items) sorted.push_back(&i);
  std::sort(sorted.begin(), sorted.end(), [](const Item* a, const Item* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  uint64_t covered = 0;  // data bytes [0, covered) belong to the entries seen
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i]->begin < covered)
      fail("the data of '", sorted[i - 1]->key, "' [", sorted[i - 1]->begin, ", ",
           sorted[i - 1]->end, ") and '", sorted[i]->key, "' [", sorted[i]->begin, ", ",
           sorted[i]->end, ") overlap");
    if (sorted[i]->begin > covered)
      fail("data bytes [", covered, ", ", sorted[i]->begin, ") belong to no entry");
    covered = sorted[i]->end;
  }
  if (covered != data_size)
    fail("data bytes [", covered, ", ", data_size, ") after the last entry belong to no entry");

  if (batch_size.empty() && has_meta_batch) batch_size = meta_batch;
  TensorDict out;
  for (const auto& item : items) {
    Tensor t;
    try {
      t = Tensor::empty(item.shape, item.type.dtype);
    } catch (const std::exception& e) {  // an empty shape whose other dims overflow int64
      fail("entry '", item.key, "': ", e.what());
    }
    int64_t numel = t.numel();
    if (numel > 0) {
      const char* src = data + item.begin;
      if (item.dtype == st_dtype(item.type.dtype)) {
        std::memcpy(t.raw_data(), src, item.end - item.begin);
        if (item.type.dtype == DType::Bool) {  // only 0/1 are valid bools
          auto* b = static_cast<unsigned char*>(t.raw_data());
          for (int64_t i = 0; i < numel; ++i)
            if (b[i] > 1) fail("entry '", item.key, "' holds a BOOL byte other than 0 or 1");
        }
      } else {
        convert(item.dtype, src, t.raw_data(), numel);
      }
    }
    if (out.contains(item.key)) fail("key '", item.key, "' clashes with a nested entry");
    try {
      out.set(item.key, t);
    } catch (const KeyError& e) {
      fail("key '", item.key, "' clashes with another entry: ", e.what());
    }
  }
  try {
    out.set_batch_size(batch_size);
  } catch (const ValueError& e) {
    fail(e.what());
  }
  // nested dicts' extra batch dims, where the saved root batch size is the one in use, and the
  // dicts that hold no tensor (which only the metadata names)
  const bool saved_root = !has_meta_batch || batch_size == meta_batch;
  for (const auto& [k, bs] : nested_batch) {
    TensorDict sub;
    try {
      const bool empty = !out.contains(k);
      if (!empty && !saved_root) continue;
      sub = empty ? TensorDict() : out.get_dict(k);
    } catch (const std::exception&) {
      fail("__metadata__ gives a batch size for '", k, "', which is not a nested dict");
    }
    try {
      sub.set_batch_size(saved_root ? bs : batch_size);
      out.set(k, std::move(sub));
    } catch (const std::exception& e) {
      fail("the batch size of '", k, "': ", e.what());
    }
  }
  return out;
}

}  // namespace td
