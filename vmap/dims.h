#pragma once
// Dims: the in_dims or out_dims of one argument or output of vmap, as a pytree prefix (torch's and
// JAX's): a dim, or None (std::nullopt, shared), applies to every leaf below it; a list or a dict
// of Dims gives each element of a list or dict its own and must match that structure.
//
//   .in_dims = {0, std::nullopt}             // argument 0 mapped at dim 0, argument 1 shared
//   .in_dims = {{0, std::nullopt}}           // argument 0 is a list: its first entry mapped
//   .out_dims = {0, {1, Dims::dict({{"a", 0}})}}  // outputs: x, [y, {"a": z}]
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "modules/value.h"

namespace td {

class Dims {
 public:
  enum class Kind { Dim, List, Dict };
  using DictEntries = std::vector<std::pair<std::string, Dims>>;

  Dims() = default;  // dim 0
  template <std::integral T>
  requires(!std::is_same_v<T, bool>) Dims(T dim) : dim_(static_cast<int64_t>(dim)) {}
  Dims(std::nullopt_t) : dim_(std::nullopt) {}
  Dims(std::optional<int64_t> dim) : dim_(dim) {}
  Dims(std::initializer_list<Dims> list) : Dims(std::vector<Dims>(list)) {}
  explicit Dims(std::vector<Dims> list);
  // One per top-level output, as out_dims was declared before nested dims; empty is dim 0.
  Dims(const std::vector<std::optional<int64_t>>& list);
  // {"key": dims, ...} for a dict argument or output.
  static Dims dict(DictEntries entries);

  Kind kind() const { return kind_; }
  bool is_dim() const { return kind_ == Kind::Dim; }
  std::optional<int64_t> dim() const { return dim_; }  // of a Dim
  const std::vector<Dims>& list() const { return *list_; }
  const DictEntries& dict() const { return *dict_; }
  const Dims* find(const std::string& key) const;  // a Dict's entry, or nullptr
  // The same structure with every dim that is not None replaced by `dim`.
  Dims mapped_at(int64_t dim) const;

 private:
  Kind kind_ = Kind::Dim;
  std::optional<int64_t> dim_ = 0;
  std::shared_ptr<const std::vector<Dims>> list_;
  std::shared_ptr<const DictEntries> dict_;
};

// As Python prints a pytree of dims: 0, None, (0, None), {'a': 1}.
std::ostream& operator<<(std::ostream& os, const Dims& d);

// VmapOptions::in_dims: one Dims per positional argument. Converts from and to its former type
// (a nested entry does not convert back: ValueError).
struct DimsList : std::vector<Dims> {
  using std::vector<Dims>::vector;
  DimsList() = default;
  DimsList(const std::vector<std::optional<int64_t>>& dims)
      : std::vector<Dims>(dims.begin(), dims.end()) {}
  operator std::vector<std::optional<int64_t>>() const;
};

// FunctionalVmapOptions::in_dims: kwargs key -> Dims. Converts from and to its former type (a
// nested or None entry does not convert back: ValueError).
struct DimsByKey : std::map<std::string, Dims> {
  using std::map<std::string, Dims>::map;
  DimsByKey() = default;
  DimsByKey(const std::map<std::string, int64_t>& dims)
      : std::map<std::string, Dims>(dims.begin(), dims.end()) {}
  operator std::map<std::string, int64_t>() const;
};

// Where a leaf sits, for messages: "argument 0[1]['mask']". A root names the argument or output
// and the message that a structure mismatch starts with.
struct DimsPath {
  const DimsPath* parent = nullptr;
  size_t index = 0;
  const std::string* key = nullptr;  // a dict entry's
  const char* label = "value";       // a root's: "argument", "output"
  const char* mismatch =
      "[vmap] dims do not fit";  // a root's: "[vmap] in_dims is not compatible with ..."
  // A root whose first level is the outputs themselves: its children print as "output 1".
  bool children_are_roots = false;
  std::string str() const;
};

// ValueError naming the path: d (a list or a dict) does not match the structure of v.
[[noreturn]] void throw_dims_mismatch(const Value& v, const Dims& d, const DimsPath& path);

// Walks v and d together: calls leaf(value, dim, path, named) for every leaf of v that is not a
// list or dict (a Tensor, a TensorDict, a number, None...) with the dim of d that covers it;
// `named` is false where that dim was given for a list or dict above the leaf (and `named` at
// the root), true where d names the leaf itself. A list or dict of dims must match v's list or
// dict there (throw_dims_mismatch). Returns v rebuilt from leaf's results, or nothing when leaf
// returns nothing.
template <class F>
using ZipDimsResult = std::conditional_t<
    std::is_void_v<std::invoke_result_t<std::remove_reference_t<F>&, const Value&,
                                        std::optional<int64_t>, const DimsPath&, bool>>,
    void, Value>;

namespace detail {
// zip_dims' visitor: carries the dims and path of the node being walked.
template <class F>
struct DimsZipper {
  F& leaf_fn;
  const Dims* d;
  const DimsPath* path;
  bool named;

  ZipDimsResult<F> leaf(const Value& v) {
    if (!d->is_dim()) throw_dims_mismatch(v, *d, *path);
    return leaf_fn(v, d->dim(), *path, named);
  }
  template <class Walk>
  ZipDimsResult<F> container(const Value& v, const Walk& children) {
    if (!d->is_dim()) {
      const bool fits =
          v.is_list()
              ? d->kind() == Dims::Kind::List && d->list().size() == v.list().size()
              : d->kind() == Dims::Kind::Dict && d->dict().size() == v.dict().items().size();
      if (!fits) throw_dims_mismatch(v, *d, *path);
    }
    return children();
  }
  template <class Walk>
  ZipDimsResult<F> child(const Value& parent, size_t i, const std::string* key, const Walk& walk) {
    const Dims* const pd = d;
    const DimsPath* const ppath = path;
    const bool pnamed = named;
    const DimsPath p{path, i, key};
    // a dim given for the list or dict spreads to its entries, which it does not name
    const bool spread = pd->is_dim();
    const Dims* dk = spread ? pd : key ? pd->find(*key) : &pd->list()[i];
    if (!dk) throw_dims_mismatch(parent, *pd, *ppath);
    d = dk;
    path = &p;
    named = !spread;
    struct Restore {  // the parent's state for its next entry
      DimsZipper& z;
      const Dims* d;
      const DimsPath* path;
      bool named;
      ~Restore() { z.d = d, z.path = path, z.named = named; }
    } restore{*this, pd, ppath, pnamed};
    return walk();
  }
};
}  // namespace detail

template <class F>
ZipDimsResult<F> zip_dims(const Value& v, const Dims& d, const DimsPath& path, F&& leaf,
                          bool named = true) {
  detail::DimsZipper<std::remove_reference_t<F>> zipper{leaf, &d, &path, named};
  return walk_value(v, zipper);
}

}  // namespace td
