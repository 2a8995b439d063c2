// Reading a safetensors file into a TensorDict (the format: safetensors_format.h): the header
// checked against its limits before any data is read, the entries' dtypes converted, the nested
// dicts and their batch sizes restored. One path for the whole file and for a range of sets
// (of the batch dims, or of an input's dims): they differ only in which bytes of each entry
// they read.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "engine/limits.h"
#include "engine/ops.h"
#include "modules/file_elements.h"
#include "modules/file_sets.h"
#include "modules/safetensors_format.h"
#include "modules/tensordict.h"

namespace td {

namespace {
// std::map-based: nlohmann's ordered_json finds a key by a linear search, quadratic over a header
// of many entries; the order of the entries is recorded while parsing.
using json = nlohmann::json;
using detail::st_dtype;

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

// A header's limits, beyond which a file is refused before the work it would cost. A valid header
// nests three deep (root, entry, shape); PyTorch's keys are short and a few parts deep.
constexpr uint64_t kMaxHeader = 100'000'000;  // the reference reader's
constexpr int kMaxJsonDepth = 64;
constexpr size_t kMaxKeyBytes = 4096;
constexpr size_t kMaxEntries = 1'000'000;
constexpr size_t kMaxDims = 64;  // of a shape or a batch size

// Whether the JSON text nests arrays and objects deeper than `limit` (outside strings): checked
// before parsing, since nlohmann's values copy and compare recursively.
bool nests_deeper_than(std::string_view s, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// The keys of a valid JSON object's text in order, and those of its "__metadata__" object.
void key_order(std::string_view s, std::vector<std::string>& top, std::vector<std::string>& meta) {
  std::vector<char> open;  // '{' or '[' of each enclosing container
  bool expect_key = false, in_meta = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') {
      size_t j = i + 1;
      while (j < s.size() && s[j] != '"') j += s[j] == '\\' ? 2 : 1;
      if (expect_key && (open.size() == 1 || (open.size() == 2 && in_meta))) {
        std::string k = json::parse(s.substr(i, j - i + 1)).get<std::string>();
        if (open.size() == 1) {
          in_meta = k == "__metadata__";
          top.push_back(std::move(k));
        } else {
          meta.push_back(std::move(k));
        }
      }
      expect_key = false;
      i = j;
    } else if (c == '{' || c == '[') {
      open.push_back(c);
      expect_key = c == '{';
    } else if (c == '}' || c == ']') {
      open.pop_back();
      expect_key = false;
    } else if (c == ',') {
      expect_key = !open.empty() && open.back() == '{';
    }
  }
}

// The dot-separated parts of a key, or an empty vector when a part is empty.
std::vector<std::string_view> key_parts(std::string_view key) {
  std::vector<std::string_view> parts;
  size_t begin = 0;
  while (true) {
    const size_t dot = key.find('.', begin);
    const size_t end = dot == std::string_view::npos ? key.size() : dot;
    if (end == begin) return {};
    parts.push_back(key.substr(begin, end - begin));
    if (dot == std::string_view::npos) return parts;
    begin = dot + 1;
  }
}

// Throws a load's ValueErrors, naming the op and the file.
struct FileError {
  const char* op;
  const std::string& path;
  template <class... A>
  [[noreturn]] void operator()(A&&... what) const {
    throw_error<ValueError>("[", op, "] '", path, "': ", std::forward<A>(what)...);
  }
};

// Up to count bytes of f into out (fewer where the file ends).
void read_some(std::istream& f, std::string& out, uint64_t count) {
  out.resize(count);
  f.read(out.data(), static_cast<std::streamsize>(count));
  out.resize(static_cast<size_t>(f.gcount()));
}

// A header's JSON and the order of its keys, which json's std::map forgets.
struct Header {
  uint64_t length = 0;  // of the JSON text: the data starts at byte 8 + length
  json value;
  std::vector<std::string> order, meta_order;
};

// The header at the start of f, checked before any data is read: a device or a stray file
// (/dev/zero, a huge non-safetensors file) is refused without reading it whole. The size of a
// regular file bounds the header; a pipe's cannot, so there the format's own limit of 100 MB does.
Header read_header(std::istream& f, std::optional<uint64_t> file_size, const FileError& fail) {
  std::string len;
  read_some(f, len, 8);
  if (len.size() < 8)
    fail("file is truncated: ", len.size(), " bytes, less than the 8-byte header length");
  Header h;
  uint64_t& n = h.length;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<unsigned char>(len[i])} << (8 * i);
  if (file_size && n > *file_size - 8)
    fail("header length ", n, " runs beyond the end of the file (", *file_size, " bytes)");
  if (n > kMaxHeader) fail("header length ", n, " is beyond the format's limit of 100 MB");
  std::string head;
  read_some(f, head, n);
  if (head.size() < n)
    fail("header length ", n, " runs beyond the end of the file (", 8 + head.size(), " bytes)");
  // as the reference reader: the JSON starts the header; a raw NUL is never valid JSON (nlohmann
  // would stop reading there and take NUL padding or trailing bytes)
  if (!head.empty() && head.front() != '{')
    fail("the header is not a JSON object: it does not start with '{'");
  if (nests_deeper_than(head, kMaxJsonDepth))
    fail("the header's JSON nests deeper than ", kMaxJsonDepth, " levels");
  h.value = head.find('\0') == std::string::npos ? json::parse(head, nullptr, false)
                                                 : json(json::value_t::discarded);
  if (h.value.is_discarded() || !h.value.is_object()) fail("the header is not valid JSON");
  key_order(head, h.order, h.meta_order);
  if (h.value.size() > kMaxEntries)
    fail("the header has ", h.value.size(), " entries, beyond the limit of ", kMaxEntries);
  return h;
}

// The whole data section of a pipe or device (a regular file's entries are read one by one),
// up to the memory budget.
std::string read_stream_data(std::istream& f, const FileError& fail) {
  const uint64_t budget = static_cast<uint64_t>(memory_budget());
  std::string bytes, block;
  try {
    while (f) {
      read_some(f, block, 1 << 20);
      if (bytes.size() + block.size() > budget)
        fail("more data than the memory budget of ", budget, " bytes (not a regular file)");
      bytes += block;
    }
  } catch (const ValueError&) {
    throw;
  } catch (const std::exception& e) {
    fail("cannot read the data: ", e.what());
  }
  return bytes;
}

struct Item {
  std::string key, dtype;
  const detail::FileElement* type = nullptr;
  Shape shape;
  uint64_t begin, end;  // data offsets
};

// A header's entries, checked against the size of the data, and td's metadata.
struct Entries {
  std::vector<Item> items;
  Shape meta_batch;  // td.batch_size
  bool has_meta_batch = false;
  std::vector<std::pair<std::string, Shape>> nested_batch;  // in the order saved: parents first
};

// The entries of h (whose JSON it frees): their keys, dtypes, shapes and data offsets checked,
// the offsets tiling the data_size bytes of data exactly.
Entries check_entries(Header& h, uint64_t data_size, const FileError& fail) {
  // a key given twice keeps its first place and its last value, as a JSON object's reader does
  auto dedup = [](std::vector<std::string>& keys) {
    std::unordered_map<std::string_view, bool> seen;
    std::vector<std::string> out;
    for (auto& k : keys)
      if (seen.emplace(k, true).second) out.push_back(std::move(k));
    keys = std::move(out);
  };
  auto check_key = [&](const std::string& key) {
    if (key.size() > kMaxKeyBytes)
      fail("key ", quote_key(key), " is longer than the limit of ", kMaxKeyBytes, " bytes");
    if (std::count(key.begin(), key.end(), '.') >= static_cast<std::ptrdiff_t>(kMaxKeyParts))
      fail("key ", quote_key(key), " has more than ", kMaxKeyParts, " dot-separated parts");
  };
  Entries out;
  std::vector<Item>& items = out.items;
  const json& header = h.value;
  dedup(h.order);
  for (const std::string& key : h.order) {
    const auto found = header.find(key);
    if (found == header.end()) fail("the header is not valid JSON");  // cannot happen
    const json& v = found.value();
    if (key == "__metadata__") {
      if (!v.is_object()) fail("__metadata__ is not an object");
      if (v.size() > kMaxEntries)
        fail("__metadata__ has ", v.size(), " entries, beyond the limit of ", kMaxEntries);
      const std::string prefix = "td.batch_size.";  // then a nested dict's key
      dedup(h.meta_order);
      for (const std::string& k : h.meta_order) {
        const auto m = v.find(k);
        if (m == v.end()) continue;  // cannot happen
        if (!m.value().is_string())
          fail("__metadata__ ", quote_key(k),
               " is not a string (the format maps strings to strings)");
        if (k != "td.batch_size" && k.rfind(prefix, 0) != 0) continue;
        Shape shape;
        try {
          const std::string& text = m.value().get_ref<const std::string&>();
          if (std::count(text.begin(), text.end(), ',') >= static_cast<std::ptrdiff_t>(kMaxDims))
            throw ValueError("too many dims");
          shape = parse_shape_str(text);
        } catch (const std::exception&) {
          fail("__metadata__ has a malformed ", quote_key(k));
        }
        if (k == "td.batch_size") {
          out.meta_batch = shape;
          out.has_meta_batch = true;
        } else {
          out.nested_batch.emplace_back(k.substr(prefix.size()), shape);
          check_key(out.nested_batch.back().first);
        }
      }
      continue;
    }
    check_key(key);
    const std::string qkey = quote_key(key);
    if (!v.is_object()) fail("entry ", qkey, " is not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) fail("entry ", qkey, " has no dtype");
    if (!v.contains("shape") || !v["shape"].is_array()) fail("entry ", qkey, " has no shape");
    if (v["shape"].size() > kMaxDims)
      fail("entry ", qkey, " has ", v["shape"].size(), " dims, beyond the limit of ", kMaxDims);
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2 || !v["data_offsets"][0].is_number_unsigned() ||
        !v["data_offsets"][1].is_number_unsigned())
      fail("entry ", qkey, " has no valid data_offsets [begin, end]");
    Item item;
    item.key = key;
    item.dtype = v["dtype"].get<std::string>();
    item.type = detail::file_element(item.dtype);
    if (!item.type)
      fail("entry ", qkey, " has unknown dtype ", quote_key(item.dtype),
           " (supported: F32, F64, I64, BOOL, F16, BF16, I32, I16, I8, U8)");
    uint64_t numel = 1;
    // a zero dim anywhere makes the entry empty, whatever the other dims ([2, 3, 0] needs no data)
    const bool empty =
        std::any_of(v["shape"].begin(), v["shape"].end(), [](const json& d) { return d == 0; });
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) fail("entry ", qkey, " has a bad shape");
      uint64_t s = d.get<uint64_t>();
      if (s > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (!empty && numel > data_size / s + 1))
        fail("entry ", qkey, " has a shape larger than the file");
      numel *= s;
      item.shape.push_back(static_cast<int64_t>(s));
    }
    item.begin = v["data_offsets"][0].get<uint64_t>();
    item.end = v["data_offsets"][1].get<uint64_t>();
    if (item.begin > item.end || item.end > data_size)
      fail("entry ", qkey, " has data_offsets [", item.begin, ", ", item.end,
           "] out of range of the ", data_size, " data bytes");
    uint64_t need = 0;  // numel * element size, which may not fit 64 bits
    const bool too_many = __builtin_mul_overflow(numel, item.type->nbytes, &need);
    if (too_many || need > data_size || item.end - item.begin != need)
      fail("entry ", qkey, " has ", item.end - item.begin, " data bytes but shape ",
           shape_str(item.shape), " of ", item.dtype, " needs ",
           too_many ? std::string("more than 2^64") : std::to_string(need));
    items.push_back(std::move(item));
  }
  h.value = json();
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
      fail("the data of ", quote_key(sorted[i - 1]->key), " [", sorted[i - 1]->begin, ", ",
           sorted[i - 1]->end, ") and ", quote_key(sorted[i]->key), " [", sorted[i]->begin, ", ",
           sorted[i]->end, ") overlap");
    if (sorted[i]->begin > covered)
      fail("data bytes [", covered, ", ", sorted[i]->begin, ") belong to no entry");
    covered = sorted[i]->end;
  }
  if (covered != data_size)
    fail("data bytes [", covered, ", ", data_size, ") after the last entry belong to no entry");
  return out;
}

// A tensor for an entry (of its dtype in td): of its shape, or of its range of sets'.
Tensor new_tensor(const Item& item, const Shape& shape, const FileError& fail) {
  try {
    return Tensor::empty(shape, item.type->dtype);
  } catch (const std::exception& e) {  // an empty shape whose other dims overflow int64
    fail("entry ", quote_key(item.key), ": ", e.what());
  }
}

// numel elements of an entry at src into dst, converted; src may be dst where the dtypes are the
// same (read in place). Only 0/1 are valid bools.
void copy_elements(const Item& item, const char* src, void* dst, int64_t numel,
                   const FileError& fail) {
  if (item.dtype != st_dtype(item.type->dtype)) {
    detail::convert_file_elements(*item.type, src, dst, numel);
    return;
  }
  if (src != dst) std::memcpy(dst, src, static_cast<size_t>(numel) * item.type->nbytes);
  if (item.type->dtype == DType::Bool) {
    const auto* b = static_cast<const unsigned char*>(dst);
    for (int64_t i = 0; i < numel; ++i)
      if (b[i] > 1) fail("entry ", quote_key(item.key), " holds a BOOL byte other than 0 or 1");
  }
}
}  // namespace

// Which sets a load reads: of the batch dims, flattened (ndims 0), or an input's num_sets sets at
// dims [dim, dim + ndims).
struct TensorDict::SetsToRead {
  SetRange sets;
  int64_t num_sets = 0, dim = 0, ndims = 0;
};

TensorDict TensorDict::load_safetensors(const std::string& path, Shape batch_size) {
  return read_safetensors(path, std::move(batch_size), nullptr);
}

TensorDict TensorDict::load_safetensors_sets(const std::string& path, SetRange sets,
                                             Shape batch_size) {
  const SetsToRead to_read{sets};
  return read_safetensors(path, std::move(batch_size), &to_read);
}

TensorDict TensorDict::load_safetensors_input(const std::string& path, SetRange sets,
                                              int64_t num_sets, int64_t dim, int64_t ndims) {
  detail::check_set_args("[load_safetensors_input] '" + path + "'", sets, num_sets, dim, ndims);
  const SetsToRead to_read{sets, num_sets, dim, ndims};
  return read_safetensors(path, {}, &to_read);
}

std::vector<std::pair<std::string, Shape>> TensorDict::safetensors_entries(
    const std::string& path) {
  const FileError fail{"safetensors_entries", path};
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("is a directory");
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open the file");
  if (!std::filesystem::is_regular_file(path, ec))
    fail("is not a regular file, whose header alone can be read");
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  Header header = read_header(f, file_size, fail);
  std::vector<std::pair<std::string, Shape>> out;
  for (Item& item : check_entries(header, file_size - 8 - header.length, fail).items)
    out.emplace_back(std::move(item.key), std::move(item.shape));
  return out;
}

TensorDict TensorDict::read_safetensors(const std::string& path, Shape batch_size,
                                        const SetsToRead* to_read) {
  const bool input = to_read && to_read->ndims > 0;
  const FileError fail{input ? "load_safetensors_input" : "load_safetensors", path};
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("is a directory");
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open the file");
  const auto file_size = std::filesystem::is_regular_file(path, ec)
                             ? std::optional<uint64_t>(std::filesystem::file_size(path, ec))
                             : std::nullopt;
  if (to_read && !file_size)
    fail("is not a regular file, which a range of sets is read from (by seeking in it)");
  Header header = read_header(f, file_size, fail);
  const uint64_t data_start = 8 + header.length;
  // A pipe or device is read whole (up to the memory budget); a regular file's entries are read
  // straight into their tensors.
  std::string data;
  if (!file_size) data = read_stream_data(f, fail);
  const uint64_t data_size = file_size ? *file_size - data_start : data.size();
  const uint64_t budget = static_cast<uint64_t>(memory_budget());
  if (!to_read && file_size && data_size > budget)
    fail(data_size, " data bytes are beyond the memory budget of ", budget, " bytes");
  const Entries entries = check_entries(header, data_size, fail);
  const std::vector<Item>& items = entries.items;
  if (!input && batch_size.empty() && entries.has_meta_batch) batch_size = entries.meta_batch;

  // The dict of the entries' tensors (in the order of items) nested by their keys, with batch
  // size `batch` and, where the saved batch size is the one in use, the nested dicts' saved ones.
  auto build = [&](std::vector<Tensor> tensors, const Shape& batch, bool saved_root) {
    // The nesting, built with an index per dict: TensorDict::set searches a dict's entries one by
    // one and copies the rest of a dotted key at every level, quadratic for many entries or parts.
    struct Node {
      TensorDict* dict;
      std::unordered_map<std::string_view, size_t> index;  // views of keys in owned_keys
      std::vector<std::unique_ptr<Node>> children;         // by entry position; null for a tensor
      std::optional<Shape> meta;                           // from td.batch_size.KEY
      bool only_meta = true;                               // no entry created it
    };
    TensorDict out;
    std::vector<std::unique_ptr<TensorDict>> dicts;  // the nested dicts while they are built
    Node root{&out, {}, {}, {}, false};
    std::deque<std::string> owned_keys;  // keeps every part's characters for the indexes
    // The node of dotted key `key`, creating the dicts on its way (and it, if `create`); nullptr
    // where a part names a tensor. `leaf` receives the last part.
    auto walk = [&](const std::string& key, bool create_last, bool by_entry,
                    std::string_view& leaf) -> Node* {
      owned_keys.push_back(key);
      std::vector<std::string_view> parts = key_parts(owned_keys.back());
      if (parts.empty()) fail("invalid key ", quote_key(key));
      Node* node = &root;
      const size_t last = create_last ? parts.size() : parts.size() - 1;
      for (size_t p = 0; p < last; ++p) {
        auto found = node->index.find(parts[p]);
        if (found == node->index.end()) {
          dicts.push_back(std::make_unique<TensorDict>());
          auto child = std::make_unique<Node>(Node{dicts.back().get(), {}, {}, {}, true});
          node->index.emplace(parts[p], node->children.size());
          node->dict->entries_.emplace_back(std::string(parts[p]), TensorDict());
          node->children.push_back(std::move(child));
          found = node->index.find(parts[p]);
        }
        Node* next = node->children[found->second].get();
        if (!next) return nullptr;
        if (by_entry) next->only_meta = false;
        node = next;
      }
      leaf = create_last ? std::string_view() : parts.back();
      return node;
    };
    for (size_t i = 0; i < items.size(); ++i) {
      const Item& item = items[i];
      std::string_view leaf;
      Node* node = walk(item.key, false, true, leaf);
      if (!node) fail("key ", quote_key(item.key), " clashes with another entry, a tensor");
      if (node->index.count(leaf))
        fail("key ", quote_key(item.key), " clashes with a nested entry");
      node->index.emplace(leaf, node->children.size());
      node->children.push_back(nullptr);
      node->dict->entries_.emplace_back(std::string(leaf), std::move(tensors[i]));
    }
    for (const auto& [k, bs] : entries.nested_batch) {
      std::string_view unused;
      Node* node = walk(k, true, false, unused);
      if (!node || node == &root)
        fail("__metadata__ gives a batch size for ", quote_key(k), ", which is not a nested dict");
      node->meta = bs;
    }
    // Moves the built dicts into their parents' entries, deepest first (depth is bounded by the
    // key limits).
    const std::function<void(Node&)> assemble = [&](Node& node) {
      for (size_t i = 0; i < node.children.size(); ++i)
        if (Node* c = node.children[i].get()) {
          assemble(*c);
          node.dict->entries_[i].second = std::move(*c->dict);
          c->dict = &std::get<TensorDict>(node.dict->entries_[i].second);
        }
    };
    assemble(root);
    try {
      out.set_batch_size(batch);
    } catch (const ValueError& e) {
      fail(e.what());
    }
    // nested dicts' extra batch dims, where the saved root batch size is the one in use, and the
    // dicts that hold no tensor (which only the metadata names); parents before their children
    std::vector<const std::string*> path_parts;  // of the dict nest() is in, for its errors
    const std::function<void(Node&)> nest = [&](Node& node) {
      for (size_t i = 0; i < node.children.size(); ++i) {
        Node* c = node.children[i].get();
        if (!c) continue;
        path_parts.push_back(&node.dict->entries_[i].first);
        if (c->meta && (c->only_meta || saved_root)) {
          TensorDict& sub = *c->dict;
          try {
            sub.set_batch_size(saved_root ? *c->meta : batch);
            const Shape &parent = node.dict->batch_size(), &own = sub.batch_size();
            if (own.size() < parent.size() ||
                !std::equal(parent.begin(), parent.end(), own.begin()))
              sub.set_batch_size(parent);
          } catch (const std::exception& e) {
            std::string k;
            for (const std::string* part : path_parts) k += (k.empty() ? "" : ".") + *part;
            fail("the batch size of ", quote_key(k), ": ", e.what());
          }
        }
        nest(*c);
        path_parts.pop_back();
      }
    };
    nest(root);
    return out;
  };
  const bool saved_root = !entries.has_meta_batch || batch_size == entries.meta_batch;

  // Each entry's runs of bytes read into a tensor of their shape (through a buffer where the
  // file's dtype is converted).
  auto read_entries = [&](const std::vector<detail::SetRuns>& runs) {
    std::vector<Tensor> tensors;
    tensors.reserve(items.size());
    std::string buffer;
    for (size_t i = 0; i < items.size(); ++i) {
      const Item& item = items[i];
      tensors.push_back(new_tensor(item, runs[i].shape, fail));
      const int64_t numel = tensors.back().numel();
      if (numel == 0) continue;
      char* dst = static_cast<char*>(tensors.back().raw_data());
      if (item.dtype != st_dtype(item.type->dtype)) {
        buffer.resize(runs[i].bytes());
        dst = buffer.data();
      }
      if (!detail::read_set_runs(f, data_start + item.begin, runs[i], dst))
        fail("cannot read the data of ", quote_key(item.key),
             ": the file ends before its header says");
      copy_elements(item, dst, tensors.back().raw_data(), numel, fail);
    }
    return tensors;
  };

  if (!to_read) {
    std::vector<Tensor> tensors;
    if (file_size) {
      std::vector<detail::SetRuns> whole(items.size());
      for (size_t i = 0; i < items.size(); ++i) {
        whole[i].shape = items[i].shape;
        whole[i].length = items[i].end - items[i].begin;
        whole[i].count = whole[i].length > 0 ? 1 : 0;
      }
      tensors = read_entries(whole);
    } else {
      for (const Item& item : items) {
        tensors.push_back(new_tensor(item, item.shape, fail));
        const int64_t numel = tensors.back().numel();
        if (numel > 0)
          copy_elements(item, data.data() + item.begin, tensors.back().raw_data(), numel, fail);
      }
    }
    return build(std::move(tensors), batch_size, saved_root);
  }

  // A range of the batch dims' sets: the whole load's dict is built (and checked) first, with
  // placeholders of the entries' shapes that hold no data, then its leaves are replaced by the
  // sets' as flatten_batch().slice() would replace them.
  const SetRange sets = to_read->sets;
  int64_t num_sets = to_read->num_sets, dim = to_read->dim, ndims = to_read->ndims;
  TensorDict whole;
  std::unordered_map<const TensorImpl*, size_t> item_of;  // a placeholder's position in items
  if (!input) {
    if (batch_size.empty())
      fail("no batch size to take sets [", sets.begin, ", ", sets.end,
           ") of: none is given and the file's metadata has no td.batch_size");
    const auto one = make_storage(8);
    std::vector<Tensor> placeholders;
    for (const Item& item : items) {
      try {
        check_sizes("empty", item.shape);  // as new_tensor checks the whole load's shapes
      } catch (const std::exception& e) {
        fail("entry ", quote_key(item.key), ": ", e.what());
      }
      placeholders.push_back(Tensor::from_storage_unchecked(one, item.type->dtype, item.shape,
                                                            Strides(item.shape.size(), 0)));
      item_of.emplace(&placeholders.back().impl(), item_of.size());
    }
    whole = build(std::move(placeholders), batch_size, saved_root);
    num_sets = shape_numel(batch_size);  // which fits int64: set_batch_size checked it
    ndims = static_cast<int64_t>(batch_size.size());
    if (sets.begin < 0 || sets.begin > sets.end || sets.end > num_sets)
      fail("sets [", sets.begin, ", ", sets.end, ") are not a range within the ", num_sets,
           " sets of batch size ", shape_str(batch_size));
  }
  std::vector<detail::SetRuns> runs;
  uint64_t total = 0;
  for (const Item& item : items) {
    runs.push_back(detail::set_runs(
        item.shape, item.type->nbytes, sets, num_sets, dim, ndims,
        detail::cat_str("[", fail.op, "] '", path, "': entry ", quote_key(item.key))));
    total += runs.back().bytes();
  }
  if (total > budget)
    fail(total, " data bytes of sets [", sets.begin, ", ", sets.end,
         ") are beyond the memory budget of ", budget, " bytes");
  std::vector<Tensor> tensors = read_entries(runs);
  if (input) return build(std::move(tensors), {}, false);
  return map_dict(whole, [&](const Tensor& p) { return tensors[item_of.at(&p.impl())]; },
                  {sets.size()});
}

}  // namespace td
