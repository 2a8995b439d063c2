#pragma once
// TensorDict: a nested, insertion-ordered map of tensors whose leaves share leading batch dims
// (the parameter store of functional_vmap). Dotted keys ("0.weight") address nested entries.
#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "engine/tensor.h"

namespace td {
namespace nn {
class Module;
}

// Sets [begin, end) of a stacked ensemble, counted over its batch dims flattened (row-major).
struct SetRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// Options of TensorDict::from_modules (at namespace scope so that `= {}` defaults compile).
struct FromModulesOptions {
  bool expand_identical = false;  // a tensor shared by every module is expanded, not copied
};

// Options of TensorDict::load_torch.
struct LoadTorchOptions {
  // The entry holding the state_dict in a checkpoint dict such as {"model": sd, "epoch": 3}
  // ("model"; dotted "a.b" for deeper). Empty: the file's dict itself when every value is a
  // tensor, else its one entry that is a dict of tensors (a ValueError listing them if several).
  std::string key;
};

// Options of TensorDict::load_stacked.
struct LoadStackedOptions {
  bool expand_identical = false;  // a tensor equal in every file is kept once, expanded
  std::string key;                // LoadTorchOptions::key of the .pt files
};

class TensorDict {
 public:
  using Entry = std::variant<Tensor, TensorDict>;

  explicit TensorDict(Shape batch_size = {});
  // {{"weight", w}, {"bias", b}} with a batch size.
  TensorDict(std::initializer_list<std::pair<std::string, Tensor>> items, Shape batch_size = {});

  const Shape& batch_size() const { return batch_size_; }
  int64_t batch_dims() const { return static_cast<int64_t>(batch_size_.size()); }
  // Changes the batch size; every leaf must have it as leading dims (ValueError otherwise).
  void set_batch_size(Shape batch_size);

  // Sets a leaf or a nested dict; dotted keys create the intermediate dicts. The entry's leading
  // dims must match batch_size() (ValueError naming the key and both shapes).
  void set(const std::string& key, Tensor value);
  void set(const std::string& key, TensorDict value);
  Tensor get(const std::string& key) const;                  // KeyError
  const TensorDict& get_dict(const std::string& key) const;  // KeyError / TypeError
  bool contains(const std::string& key) const;
  bool erase(const std::string& key);
  size_t size() const { return entries_.size(); }  // top-level entries
  bool empty() const { return entries_.empty(); }

  // Top-level keys; include_nested adds dotted keys of nested entries, leaves_only drops the
  // keys of nested dicts.
  std::vector<std::string> keys(bool include_nested = false, bool leaves_only = false) const;
  // Every leaf with its dotted key, in insertion order.
  std::vector<std::pair<std::string, Tensor>> leaves() const;
  const std::vector<std::pair<std::string, Entry>>& items() const { return entries_; }

  // Indexing on the first batch dim (IndexError; ValueError when there is no batch dim).
  TensorDict operator[](int64_t i) const;
  TensorDict slice(int64_t start, int64_t end, int64_t step = 1) const;
  // Stacks dicts of equal structure along a new leading batch dim.
  static TensorDict stack(const std::vector<TensorDict>& dicts, int64_t dim = 0);
  // Reshapes the batch dims (leaves keep their per-set dims); -1 allowed.
  TensorDict reshape(const Shape& batch_size) const;
  // Merges all batch dims into one.
  TensorDict flatten_batch() const;
  TensorDict apply(const std::function<Tensor(const Tensor&)>& f) const;  // same batch size
  TensorDict apply(const std::function<Tensor(const Tensor&)>& f, Shape new_batch_size) const;
  TensorDict clone() const;

  // ---- modules (module_params.cpp) ----
  using FromModulesOptions = td::FromModulesOptions;
  // The parameters and buffers of m, nested by submodule, sharing their storage; submodules
  // holding none have no entry.
  static TensorDict from_module(const nn::Module& m);
  static TensorDict from_modules(const std::vector<const nn::Module*>& modules,
                                 FromModulesOptions options = {});
  template <class Range>
  static TensorDict from_modules(const Range& modules, FromModulesOptions options = {}) {
    std::vector<const nn::Module*> ptrs;
    for (const auto& m : modules) ptrs.push_back(&*m);
    return from_modules(ptrs, options);
  }
  // from_modules({a, b}) with a, b shared_ptr<Linear> (or any module pointers of one type)...
  template <class P>
  static TensorDict from_modules(std::initializer_list<P> modules,
                                 FromModulesOptions options = {}) {
    std::vector<const nn::Module*> ptrs;
    for (const auto& m : modules) ptrs.push_back(&*m);
    return from_modules(ptrs, options);
  }
  // ...or of mixed types, as shared_ptr<Module>.
  static TensorDict from_modules(std::initializer_list<std::shared_ptr<nn::Module>> modules,
                                 FromModulesOptions options = {}) {
    std::vector<const nn::Module*> ptrs;
    for (const auto& m : modules) ptrs.push_back(m.get());
    return from_modules(ptrs, options);
  }
  // Puts this dict's tensors into m; the guard restores m's own tensors when destroyed.
  class ModuleGuard;
  [[nodiscard]] ModuleGuard to_module(nn::Module& m) const;

  // ---- safetensors files ----
  void save_safetensors(const std::string& path) const;
  // Dotted keys become nesting. An empty batch_size takes the one td saved in the file's
  // metadata (td.batch_size), if any.
  static TensorDict load_safetensors(const std::string& path, Shape batch_size = {});
  // Only sets [sets.begin, sets.end) of a stacked file whose batch dims are batch_size, or else
  // the file's td.batch_size: load_safetensors(path).flatten_batch().slice(begin, end), batch
  // size [sets.size()] (nested dicts keep their extra batch dims after it), but reading only
  // those sets' bytes of each entry (one seek and read per entry), so that the memory budget
  // applies to them, not to the file. The header is checked as by the whole load; BOOL bytes
  // only where read. The file must be a regular one (it is seeked in). A ValueError when there
  // is no batch size or the range is not within [0, sets of the batch size].
  // (A template only so that `load_safetensors(path, {2, 3})` stays a batch size.)
  template <std::same_as<SetRange> Sets>
  static TensorDict load_safetensors(const std::string& path, Sets sets, Shape batch_size = {}) {
    return load_safetensors_sets(path, sets, std::move(batch_size));
  }
  // Sets [sets.begin, sets.end) of a per-set input file (batch size [] in the result): every
  // entry holds num_sets sets at dims [dim, dim + ndims) (row-major) and becomes shape[:dim] +
  // [sets.size()] + shape[dim + ndims:], reading one run of bytes per index of the dims before
  // dim. A ValueError naming the file, the entry, its shape, dim and the range when an entry has
  // too few dims or other than num_sets sets there. A regular file only, as above.
  static TensorDict load_safetensors_input(const std::string& path, SetRange sets, int64_t num_sets,
                                           int64_t dim = 0, int64_t ndims = 1);
  // The keys and shapes of a safetensors file's entries in the file's order, from its header
  // alone (checked as load_safetensors checks it).
  static std::vector<std::pair<std::string, Shape>> safetensors_entries(const std::string& path);

  // ---- PyTorch checkpoints (torch_checkpoint_load.cpp) ----
  // A torch.save file (the zip format of PyTorch 1.6 and later) holding a state_dict; dotted
  // keys become nesting. Only tensors, dicts and plain values are read: any other object in the
  // pickle is refused (a ValueError naming it), never run, as torch.load(weights_only=True).
  // Half and bfloat16 become float32, smaller ints int64. A td built without libzip throws a
  // RuntimeError (torch_checkpoints_supported()).
  static TensorDict load_torch(const std::string& path, const LoadTorchOptions& options = {});
  // A safetensors or .pt file, told apart by their first bytes.
  static TensorDict load_file(const std::string& path, const LoadTorchOptions& options = {});
  // Whether load_file reads the file as a PyTorch checkpoint (else as safetensors).
  static bool is_torch_file(const std::string& path);
  // Stacks per-member files (one per ensemble member, each as load_file reads it) into one dict
  // with batch size [N], as from_modules stacks modules: every file must hold the same keys
  // with the same shapes and dtypes (a ValueError naming the file and the key).
  static TensorDict load_stacked(const std::vector<std::string>& paths,
                                 const LoadStackedOptions& options = {});

 private:
  // What a safetensors load reads of each entry (safetensors_load.cpp); nullptr: all of it.
  struct SetsToRead;
  static TensorDict read_safetensors(const std::string& path, Shape batch_size,
                                     const SetsToRead* sets);
  static TensorDict load_safetensors_sets(const std::string& path, SetRange sets, Shape batch_size);
  // A dict nesting dotted keys, with an index per level (TensorDict::set searches entries one
  // by one); `fail` reports a key that clashes or has an empty part and must throw.
  static TensorDict from_dotted(std::vector<std::pair<std::string, Tensor>> leaves,
                                const std::function<void(const std::string&)>& fail);
  // f applied to every leaf, the result with batch_size batch (apply, indexing, slicing).
  static TensorDict map_dict(const TensorDict& d, const std::function<Tensor(const Tensor&)>& f,
                             const Shape& batch);

  Shape batch_size_;
  std::vector<std::pair<std::string, Entry>> entries_;
};

class TensorDict::ModuleGuard {
 public:
  ModuleGuard(nn::Module& m, std::vector<std::pair<std::string, Tensor>> saved);
  ModuleGuard(ModuleGuard&& o) noexcept;
  ModuleGuard(const ModuleGuard&) = delete;
  ~ModuleGuard();  // restores

 private:
  nn::Module* module_;
  std::vector<std::pair<std::string, Tensor>> saved_;
};

std::ostream& operator<<(std::ostream& os, const TensorDict& td);

// Whether this td reads .pt files (built with libzip, TD_TORCH_CHECKPOINTS).
bool torch_checkpoints_supported();

}  // namespace td
