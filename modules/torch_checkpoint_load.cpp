// Reading PyTorch checkpoints (torch.save's zip format, PyTorch 1.6 and later): NAME/data.pkl
// holds the pickled objects, NAME/data/KEY each storage's raw little-endian bytes. The pickle runs
// in the restricted unpickler (pickle_reader.h) with the few names a state_dict needs; tensors
// are rebuilt from their storages as views (offset, sizes, strides) checked to lie inside them.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "engine/limits.h"
#include "modules/file_elements.h"
#include "modules/pickle_reader.h"
#include "modules/tensordict.h"

#ifdef TD_HAVE_LIBZIP
#include <zip.h>
#endif

namespace td {

namespace {
using detail::PickleValue;
using Kind = PickleValue::Kind;

// A file's first bytes: a zip archive's local header, or safetensors' JSON after its length.
enum class FileKind { Zip, Safetensors, LegacyTorch, Unknown };
FileKind sniff(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char b[9] = {};
  f.read(b, 9);
  const auto n = f.gcount();
  if (n >= 4 && std::memcmp(b, "PK\x03\x04", 4) == 0) return FileKind::Zip;
  // before the pickle's test: a header length of 0x2?80 bytes starts like a pickle, and no
  // pickle has '{' (not an opcode) at byte 8
  if (n == 9 && b[8] == '{') return FileKind::Safetensors;
  if (n >= 2 && static_cast<unsigned char>(b[0]) == 0x80 && b[1] >= 2 && b[1] <= 5)
    return FileKind::LegacyTorch;  // a bare pickle: torch.save before 1.6, or the legacy format
  return FileKind::Unknown;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

bool TensorDict::is_torch_file(const std::string& path) {
  switch (sniff(path)) {
    case FileKind::Zip:
    case FileKind::LegacyTorch:
      return true;
    case FileKind::Safetensors:
      return false;
    case FileKind::Unknown:
      break;
  }
  // by name, so that the loader's own error says what is wrong with the file
  return ends_with(path, ".pt") || ends_with(path, ".pth") || ends_with(path, ".bin");
}

TensorDict TensorDict::load_file(const std::string& path, const LoadTorchOptions& options) {
  return is_torch_file(path) ? load_torch(path, options) : load_safetensors(path);
}

#ifndef TD_HAVE_LIBZIP

bool torch_checkpoints_supported() { return false; }

TensorDict TensorDict::load_torch(const std::string& path, const LoadTorchOptions&) {
  throw_error<RuntimeError>("[load_torch] '", path,
                            "': this td was built without libzip, so it cannot read PyTorch .pt "
                            "files (install libzip-dev and rebuild with TD_TORCH_CHECKPOINTS)");
}

#else

bool torch_checkpoints_supported() { return true; }

namespace {

// The pickle's storage types and their elements
struct StorageType {
  const char* name;  // torch.<name>
  const char* code;  // safetensors' name of the element
};
constexpr StorageType kStorageTypes[] = {{"FloatStorage", "F32"}, {"DoubleStorage", "F64"},
                                         {"HalfStorage", "F16"},  {"BFloat16Storage", "BF16"},
                                         {"LongStorage", "I64"},  {"IntStorage", "I32"},
                                         {"ShortStorage", "I16"}, {"CharStorage", "I8"},
                                         {"ByteStorage", "U8"},   {"BoolStorage", "BOOL"}};

const detail::FileElement* storage_type(const std::string& module, const std::string& name) {
  if (module != "torch") return nullptr;
  for (const auto& t : kStorageTypes)
    if (name == t.name) return detail::file_element(t.code);
  return nullptr;
}

constexpr size_t kMaxDims = 64;  // of a tensor, as safetensors' loader
constexpr size_t kMaxKeyBytes = 4096;
constexpr size_t kMaxEntries = 1'000'000;
constexpr uint64_t kMaxPickleBytes = uint64_t{1} << 30;
constexpr int kMaxFindDepth = 16;  // nested dicts searched for key (a cycle must end)

struct StorageRecord {
  std::string key;
  const detail::FileElement* type;
  int64_t numel;
  std::optional<std::string> bytes;  // read when a tensor first needs it
};

struct TensorRef {
  size_t storage;
  int64_t offset;
  Shape shape;
  Strides strides;
};

class ZipArchive {
 public:
  ZipArchive(const std::string& path, const std::function<void(std::string)>& fail) : fail_(fail) {
    int err = 0;
    zip_ = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (!zip_) {
      zip_error_t e;
      zip_error_init_with_code(&e, err);
      std::string msg = zip_error_strerror(&e);
      zip_error_fini(&e);
      fail("not a readable zip archive (" + msg + ")");
    }
  }
  ~ZipArchive() { zip_discard(zip_); }
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;

  int64_t entries() const { return zip_get_num_entries(zip_, 0); }
  std::string name(int64_t i) const {
    const char* n = zip_get_name(zip_, static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW);
    return n ? n : "";
  }
  std::optional<int64_t> find(const std::string& name) const {
    const zip_int64_t i = zip_name_locate(zip_, name.c_str(), ZIP_FL_ENC_RAW);
    return i < 0 ? std::nullopt : std::optional<int64_t>(i);
  }
  uint64_t size(int64_t i) const {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(zip_, static_cast<zip_uint64_t>(i), 0, &st) != 0 ||
        !(st.valid & ZIP_STAT_SIZE))
      fail_("cannot read the size of record '" + name(i) + "'");
    return st.size;
  }
  // The record's bytes, its size checked against `limit` and the memory budget first; a short
  // or corrupt record (CRC) is an error.
  std::string read(int64_t i, uint64_t limit) const {
    const uint64_t n = size(i);
    const std::string what = "record '" + name(i) + "'";
    if (n > limit || n > static_cast<uint64_t>(memory_budget()))
      fail_(what + " of " + std::to_string(n) + " bytes is beyond the limit of " +
            std::to_string(std::min<uint64_t>(limit, memory_budget())) + " bytes");
    zip_file_t* f = zip_fopen_index(zip_, static_cast<zip_uint64_t>(i), 0);
    if (!f) fail_("cannot open " + what + ": " + zip_strerror(zip_));
    std::string out(n, '\0');
    uint64_t got = 0;
    std::string error;
    while (got < n) {
      const zip_int64_t r = zip_fread(f, out.data() + got, n - got);
      if (r < 0) {
        error = zip_file_strerror(f);
        break;
      }
      if (r == 0) break;
      got += static_cast<uint64_t>(r);
    }
    char extra;
    if (error.empty() && got == n && zip_fread(f, &extra, 1) < 0)  // reaches the CRC check
      error = zip_file_strerror(f);
    zip_fclose(f);
    if (!error.empty()) fail_("cannot read " + what + ": " + error);
    if (got != n)
      fail_(what + " is truncated: " + std::to_string(got) + " of " + std::to_string(n) + " bytes");
    return out;
  }

 private:
  zip_t* zip_ = nullptr;
  std::function<void(std::string)> fail_;
};

// Copies the view (offset, shape, strides) of a storage of type `code` into dst (td dtype).
template <class Src, class Dst, class Conv>
void gather(const char* src, Dst* dst, const TensorRef& r, int64_t numel, Conv conv) {
  const size_t nd = r.shape.size();
  std::vector<int64_t> idx(nd, 0);
  int64_t at = r.offset;
  for (int64_t k = 0; k < numel; ++k) {
    Src v;
    std::memcpy(&v, src + at * static_cast<int64_t>(sizeof(Src)), sizeof(Src));
    dst[k] = conv(v);
    for (size_t d = nd; d-- > 0;) {  // odometer over the dims, last fastest
      at += r.strides[d];
      if (++idx[d] < r.shape[d]) break;
      at -= r.strides[d] * r.shape[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

TensorDict TensorDict::load_torch(const std::string& path, const LoadTorchOptions& options) {
  const std::function<void(std::string)> fail = [&](std::string what) {
    throw_error<ValueError>("[load_torch] '", path, "': ", what);
  };
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("is a directory");
  if (!std::ifstream(path, std::ios::binary)) fail("cannot open the file");
  if (sniff(path) == FileKind::LegacyTorch)
    fail(
        "a torch.save file in the legacy format (before PyTorch 1.6, or "
        "_use_new_zipfile_serialization=False), which td does not read: save it again with "
        "a newer PyTorch");
  ZipArchive zip(path, fail);

  // NAME/data.pkl names the archive's directory, which every record shares
  const int64_t n_entries = zip.entries();
  std::string prefix;
  for (int64_t i = 0; i < n_entries; ++i) {
    const std::string name = zip.name(i);
    const size_t slash = name.find('/');
    if (slash != std::string::npos && slash > 0 && name.substr(slash) == "/data.pkl") {
      if (!prefix.empty()) fail("the archive holds two data.pkl records");
      prefix = name.substr(0, slash + 1);
    }
  }
  if (prefix.empty()) fail("no data.pkl record: a zip archive, but not one torch.save wrote");
  if (const auto order = zip.find(prefix + "byteorder")) {
    const std::string b = zip.read(*order, 64);
    if (b != "little") fail("the storages are stored " + b + "-endian; td reads little-endian");
  }
  const std::string pickle = zip.read(*zip.find(prefix + "data.pkl"), kMaxPickleBytes);

  // ---- the pickle, with the names a state_dict needs ----
  std::vector<StorageRecord> storages;
  std::map<std::string, size_t> storage_by_key;
  std::vector<TensorRef> tensors;
  int64_t tensor_bytes = 0;
  enum { kOrderedDict, kRebuildTensor, kRebuildParameter };
  auto which = [](const PickleValue& g) {
    const std::string& s = g.str();
    return s == "collections OrderedDict"           ? kOrderedDict
           : s == "torch._utils _rebuild_tensor_v2" ? kRebuildTensor
                                                    : kRebuildParameter;
  };
  detail::PickleArena arena;
  // Ext values: tensors are their index; storages their index + kStorageExt
  constexpr int64_t kStorageExt = int64_t{1} << 40;
  auto int_of = [&](const PickleValue& v, const char* what) {
    if (v.kind != Kind::Int || v.i < 0) fail(std::string("a tensor's ") + what + " is not a size");
    return v.i;
  };
  auto ints_of = [&](const PickleValue& v, const char* what) {
    if (v.kind != Kind::Tuple) fail(std::string("a tensor's ") + what + " is not a tuple");
    if (v.items().size() > kMaxDims)
      fail("a tensor has " + std::to_string(v.items().size()) + " dims, beyond the limit of " +
           std::to_string(kMaxDims));
    std::vector<int64_t> out;
    for (const auto& x : v.items()) out.push_back(int_of(x, what));
    return out;
  };
  detail::PickleHooks hooks;
  hooks.allow_global = [](const std::string& module, const std::string& name) {
    return (module == "collections" && name == "OrderedDict") ||
           (module == "torch._utils" &&
            (name == "_rebuild_tensor_v2" || name == "_rebuild_parameter")) ||
           storage_type(module, name);
  };
  hooks.reduce = [&](const PickleValue& callable, const PickleValue& args) -> PickleValue {
    const auto& a = args.items();
    if (callable.str().rfind("torch ", 0) == 0)
      fail("a storage type (" + callable.str().substr(6) + ") is called, not persisted");
    switch (which(callable)) {
      case kOrderedDict:
        if (!a.empty()) fail("OrderedDict is called with arguments");
        return arena.make(Kind::Dict);
      case kRebuildParameter:  // (tensor, requires_grad, backward_hooks)
        if (a.size() != 3 || a[0].kind != Kind::Ext || a[0].i >= kStorageExt)
          fail("_rebuild_parameter is not given a tensor");
        return a[0];
      case kRebuildTensor:
        break;
    }
    // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
    if (a.size() < 6 || a.size() > 7 || a[0].kind != Kind::Ext || a[0].i < kStorageExt)
      fail("_rebuild_tensor_v2 is not given a storage and 5 or 6 more arguments");
    TensorRef r;
    r.storage = static_cast<size_t>(a[0].i - kStorageExt);
    r.offset = int_of(a[1], "storage offset");
    const std::vector<int64_t> shape = ints_of(a[2], "size"), strides = ints_of(a[3], "stride");
    if (shape.size() != strides.size())
      fail("a tensor has " + std::to_string(shape.size()) + " sizes but " +
           std::to_string(strides.size()) + " strides");
    r.shape.assign(shape.begin(), shape.end());
    r.strides.assign(strides.begin(), strides.end());
    // every element inside the storage: offset + sum((size - 1) * stride) < numel
    const StorageRecord& s = storages[r.storage];
    const bool empty = std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d == 0; });
    int64_t last = r.offset, numel = 1;
    bool overflow = false;
    for (size_t d = 0; d < shape.size() && !empty; ++d) {
      int64_t span = 0;
      overflow |= __builtin_mul_overflow(shape[d] - 1, strides[d], &span) ||
                  __builtin_add_overflow(last, span, &last) ||
                  __builtin_mul_overflow(numel, shape[d], &numel);
    }
    if (!empty && (overflow || last >= s.numel))
      fail("a tensor of shape " + shape_str(r.shape) + ", strides " + shape_str(r.strides) +
           " at offset " + std::to_string(r.offset) + " runs beyond its storage '" + s.key +
           "' of " + std::to_string(s.numel) + " elements");
    if (tensors.size() >= kMaxEntries)
      fail("more than " + std::to_string(kMaxEntries) + " tensors");
    // a few bytes of pickle rebuild a tensor of 64 dims: its header counts against the budget
    tensor_bytes += 2 * (r.shape.size() * 16 + sizeof(TensorRef));
    if (tensor_bytes > memory_budget())
      fail("the tensors' headers need more than the memory budget of " +
           std::to_string(memory_budget()) + " bytes");
    tensors.push_back(std::move(r));
    PickleValue v;
    v.kind = Kind::Ext;
    v.i = static_cast<int64_t>(tensors.size() - 1);
    return v;
  };
  hooks.build = [&](const PickleValue& obj, const PickleValue& state) {
    // an OrderedDict's __dict__ (a state_dict's _metadata: module versions, not needed)
    if (obj.kind != Kind::Dict || state.kind != Kind::Dict)
      fail(std::string("BUILD of a ") + detail::kind_name(obj.kind) +
           " (only a state_dict's metadata is expected)");
  };
  hooks.persistent_load = [&](const PickleValue& pid) -> PickleValue {
    // ('storage', torch.<Type>Storage, key, location, numel)
    const auto bad = [&] {
      fail("a persistent id that is not ('storage', type, key, device, numel)");
    };
    if (pid.kind != Kind::Tuple || pid.items().size() != 5) bad();
    const auto& a = pid.items();
    if (a[0].kind != Kind::String || a[0].str() != "storage" || a[1].kind != Kind::Global ||
        a[2].kind != Kind::String || a[3].kind != Kind::String || a[4].kind != Kind::Int ||
        a[4].i < 0)
      bad();
    const std::string& g = a[1].str();
    const size_t space = g.find(' ');
    const detail::FileElement* type = storage_type(g.substr(0, space), g.substr(space + 1));
    if (!type) fail("a storage of type '" + g + "', not a storage type");
    const std::string& key = a[2].str();
    if (key.empty() || key.size() > 256 || key.find('\0') != std::string::npos)
      fail("a storage key " + quote_key(key) + " that names no record");
    auto [it, fresh] = storage_by_key.emplace(key, storages.size());
    if (fresh) {
      if (storages.size() >= kMaxEntries)
        fail("more than " + std::to_string(kMaxEntries) + " storages");
      storages.push_back({key, type, a[4].i, std::nullopt});
    } else if (storages[it->second].type != type || storages[it->second].numel != a[4].i) {
      fail("storage '" + key + "' is given two types or sizes");
    }
    PickleValue v;
    v.kind = Kind::Ext;
    v.i = static_cast<int64_t>(it->second) + kStorageExt;
    return v;
  };
  const PickleValue root =
      detail::read_pickle(pickle, arena, hooks, "[load_torch] '" + path + "': data.pkl");

  // ---- the state_dict: the root, the entry `key`, or the root's one dict of tensors ----
  auto is_tensor = [&](const PickleValue& v) { return v.kind == Kind::Ext && v.i < kStorageExt; };
  auto is_state_dict = [&](const PickleValue& v) {
    if (v.kind != Kind::Dict) return false;
    const auto& it = v.items();
    for (size_t k = 0; k < it.size(); k += 2)
      if (it[k].kind != Kind::String || !is_tensor(it[k + 1])) return false;
    return true;
  };
  auto lookup = [&](const PickleValue& dict, const std::string& key) -> const PickleValue* {
    if (dict.kind != Kind::Dict) return nullptr;
    const auto found = dict.node->index.find("s" + key);
    return found == dict.node->index.end() ? nullptr : &dict.items()[found->second + 1];
  };
  auto top_keys = [&](const PickleValue& dict) {
    std::vector<std::string> out;
    for (size_t k = 0; k < dict.items().size(); k += 2)
      if (dict.items()[k].kind == Kind::String) out.push_back(dict.items()[k].str());
    return out;
  };
  if (root.kind != Kind::Dict)
    fail(std::string("the file holds a ") + detail::kind_name(root.kind) +
         ", not a state_dict (a dict of tensors)");
  const PickleValue* sd = nullptr;
  if (!options.key.empty()) {
    sd = lookup(root, options.key);
    // a dotted key walks nested dicts when no entry has the whole name
    if (!sd) {
      const PickleValue* at = &root;
      size_t begin = 0;
      for (int depth = 0; at; ++depth) {
        const size_t dot = options.key.find('.', begin);
        at = depth < kMaxFindDepth ? lookup(*at, options.key.substr(begin, dot - begin)) : nullptr;
        if (dot == std::string::npos) break;
        begin = dot + 1;
      }
      sd = at;
    }
    if (!sd)
      fail("has no entry " + quote_key(options.key) + "; its keys: " + quoted_list(top_keys(root)));
    if (!is_state_dict(*sd))
      fail("entry " + quote_key(options.key) + " is not a state_dict (a dict of tensors)");
  } else if (is_state_dict(root)) {
    sd = &root;
  } else {
    std::vector<std::string> found;
    for (size_t k = 0; k < root.items().size(); k += 2)
      if (root.items()[k].kind == Kind::String && is_state_dict(root.items()[k + 1]) &&
          !root.items()[k + 1].items().empty()) {
        found.push_back(root.items()[k].str());
        sd = &root.items()[k + 1];
      }
    if (found.size() != 1)
      fail(found.empty() ? "holds no state_dict: neither the file's dict nor any of its entries " +
                               quoted_list(top_keys(root)) + " is a dict of tensors"
                         : "holds several state_dicts, " + quoted_list(found) +
                               ": pick one (LoadTorchOptions::key, tdvmap's --params-key)");
  }

  // ---- the tensors, each copied out of its storage; one view read twice stays one tensor ----
  const auto& items = sd->items();
  if (items.size() / 2 > kMaxEntries)
    fail("the state_dict has more than " + std::to_string(kMaxEntries) + " entries");
  int64_t total_bytes = 0;
  std::map<std::tuple<size_t, int64_t, Shape, Strides>, Tensor> made;
  std::vector<std::pair<std::string, Tensor> > leaves;
  for (size_t k = 0; k < items.size(); k += 2) {
    const std::string& key = items[k].str();
    if (key.size() > kMaxKeyBytes)
      fail("key " + quote_key(key) + " is longer than the limit of " +
           std::to_string(kMaxKeyBytes) + " bytes");
    if (std::count(key.begin(), key.end(), '.') >= static_cast<std::ptrdiff_t>(kMaxKeyParts))
      fail("key " + quote_key(key) + " has more than " + std::to_string(kMaxKeyParts) +
           " dot-separated parts");
    const TensorRef& r = tensors[static_cast<size_t>(items[k + 1].i)];
    auto [it, fresh] = made.emplace(std::tuple(r.storage, r.offset, r.shape, r.strides), Tensor());
    if (fresh) {
      StorageRecord& s = storages[r.storage];
      const int64_t numel = shape_numel(r.shape);  // checked against int64 overflow above
      // a view may repeat elements (stride 0): the copies are what the budget must hold
      check_memory_budget("load_torch", numel, static_cast<int64_t>(dtype_size(s.type->dtype)),
                          "elements of a tensor");
      total_bytes += numel * static_cast<int64_t>(dtype_size(s.type->dtype));
      check_memory_budget("load_torch", total_bytes, 1, "bytes of tensors and storages");
      if (!s.bytes) {
        const auto rec = zip.find(prefix + "data/" + s.key);
        if (!rec)
          fail("the storage of " + quote_key(key) + ", record 'data/" + s.key + "', is missing");
        s.bytes = zip.read(*rec, std::numeric_limits<uint64_t>::max());
        total_bytes += static_cast<int64_t>(s.bytes->size());
        check_memory_budget("load_torch", total_bytes, 1, "bytes of tensors and storages");
        const uint64_t size = s.bytes->size();
        if (size % s.type->nbytes || size / s.type->nbytes != static_cast<uint64_t>(s.numel))
          fail("storage '" + s.key + "' has " + std::to_string(size) + " bytes, not the " +
               std::to_string(s.numel) + " elements of " + s.type->code + " the pickle says");
      }
      Tensor t;
      try {
        t = Tensor::empty(r.shape, s.type->dtype);
      } catch (const std::exception& e) {  // an empty shape whose other dims overflow int64
        fail("entry " + quote_key(key) + ": " + e.what());
      }
      const char* src = s.bytes->data();
      void* dst = t.raw_data();
      if (s.type->dtype == DType::Bool) {  // only 0 and 1 are bools
        bool bad = false;
        gather<uint8_t>(src, static_cast<bool*>(dst), r, numel, [&](uint8_t v) {
          bad |= v > 1;
          return v != 0;
        });
        if (bad) fail("entry " + quote_key(key) + " holds a bool byte other than 0 or 1");
      } else {
        detail::visit_file_element(*s.type, [&](auto src_tag, auto* dst_tag, auto conv) {
          gather<decltype(src_tag)>(src, static_cast<decltype(dst_tag)>(dst), r, numel, conv);
        });
      }
      it->second = t;
    }
    leaves.emplace_back(key, it->second);
  }
  return from_dotted(std::move(leaves), [&](const std::string& what) { fail(what); });
}

#endif  // TD_HAVE_LIBZIP

}  // namespace td
