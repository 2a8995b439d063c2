#pragma once
// Value: what modules take and return. None | bool | int | double | string | Tensor |
// TensorDict | list | dict (string keys, insertion order). vmap batches every Tensor leaf.
#include <concepts>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "engine/tensor.h"

namespace td {

class TensorDict;
class Value;

using ValueList = std::vector<Value>;
// A dict with string keys in insertion order.
class ValueDict {
 public:
  ValueDict() = default;
  ValueDict(std::initializer_list<std::pair<std::string, Value>> items);
  bool contains(const std::string& key) const;
  const Value& at(const std::string& key) const;  // KeyError naming the key and the keys
  Value& operator[](const std::string& key);      // inserts None if absent
  void set(const std::string& key, Value v);      // replaces in place or appends
  bool erase(const std::string& key);
  // out of line: Value is incomplete here, which clang does not accept in vector<pair>::size
  size_t size() const;
  bool empty() const;
  std::vector<std::string> keys() const;
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
  std::vector<std::pair<std::string, Value>>& items() { return items_; }

 private:
  std::vector<std::pair<std::string, Value>> items_;
};

class Value {
 public:
  enum class Kind { None, Bool, Int, Double, String, Tensor, TensorDict, List, Dict };

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : v_(b) {}
  // any integer type (3, 3u, size_t, 3LL) is an int, any floating type a double
  // (an unsigned value above INT64_MAX is a ValueError: it would wrap)
  template <std::integral T>
  requires(!std::is_same_v<T, bool>) Value(T i) : v_(static_cast<int64_t>(i)) {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t))
      if (i > static_cast<T>(INT64_MAX)) throw_int_overflow(static_cast<uint64_t>(i));
  }
  template <std::floating_point T>
  Value(T d) : v_(static_cast<double>(d)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(Tensor t) : v_(std::move(t)) {}
  Value(TensorDict td);
  Value(ValueList l) : v_(std::make_shared<ValueList>(std::move(l))) {}
  Value(ValueDict d) : v_(std::make_shared<ValueDict>(std::move(d))) {}
  // a tuple, pair or vector (of anything a Value is made from) is a list, as Python's are
  template <class... Ts>
  Value(const std::tuple<Ts...>& t)
      : Value(std::apply([](const auto&... e) { return ValueList{Value(e)...}; }, t)) {}
  template <class A, class B>
  Value(const std::pair<A, B>& p) : Value(ValueList{Value(p.first), Value(p.second)}) {}
  template <class T>
  requires(!std::is_same_v<T, Value>) Value(const std::vector<T>& v) {
    ValueList l;
    l.reserve(v.size());
    for (const T& e : v) l.emplace_back(e);
    v_ = std::make_shared<ValueList>(std::move(l));
  }

  [[noreturn]] static void throw_int_overflow(uint64_t v);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  const char* kind_name() const;  // "None", "Tensor", ...
  bool is_none() const { return kind() == Kind::None; }
  bool is_tensor() const { return kind() == Kind::Tensor; }
  bool is_tensordict() const { return kind() == Kind::TensorDict; }
  bool is_list() const { return kind() == Kind::List; }
  bool is_dict() const { return kind() == Kind::Dict; }

  // Checked accessors: TypeError naming what the value holds.
  bool to_bool() const;
  int64_t to_int() const;
  double to_double() const;  // an int converts
  const std::string& str() const;
  const Tensor& tensor() const;
  const TensorDict& tensordict() const;
  const ValueList& list() const;
  ValueList& list();
  const ValueDict& dict() const;
  ValueDict& dict();

  // List and dict element access (TypeError if not a list / dict).
  const Value& operator[](size_t i) const;                // IndexError when out of range
  const Value& operator[](const std::string& key) const;  // KeyError

 private:
  std::variant<std::monostate, bool, int64_t, double, std::string, Tensor,
               std::shared_ptr<TensorDict>, std::shared_ptr<ValueList>, std::shared_ptr<ValueDict>>
      v_;
};

// One per level of every recursive walk of a Value: more than kMaxDepth levels is a
// ValueError. Values share their lists and dicts, so one can hold itself, and a walk would
// recurse until the stack overflowed (Python's pytree raises RecursionError alike).
class ValueDepthGuard {
 public:
  static constexpr int kMaxDepth = 1000;
  ValueDepthGuard();
  ~ValueDepthGuard();
  ValueDepthGuard(const ValueDepthGuard&) = delete;
  ValueDepthGuard& operator=(const ValueDepthGuard&) = delete;
};

// Python's repr: a list or dict that holds itself prints as [...] or {...}.
std::ostream& operator<<(std::ostream& os, const Value& v);
// A double as Python's repr writes it: 0.1, 1.0, 1e-05, 1e+16, 10000000000.0, nan, -inf.
std::string repr_double(double d);

// ---- walking a Value tree ----
//
// walk_value is the one recursion over lists and dicts: every walk of a Value goes through it,
// so every one has the depth guard. It goes depth first, in order, and calls on the visitor:
//   R leaf(const Value& x)                  every node that is not a list or dict (required)
//   R tensordict(const TensorDict& d)       a TensorDict node, in place of leaf (optional)
//   R container(const Value& v, Walk&& children)
//                                           a list or dict: children() walks its entries
//                                           (optional; checks v, or skips it by not calling)
//   R child(const Value& parent, size_t index, const std::string* key, Walk&& walk)
//                                           one entry (key: a dict's, else nullptr); walk()
//                                           walks it (optional; carries state along the walk)
// R is Value (the walk rebuilds v from the leaves' results) or void (it only visits).
template <class V>
using WalkResult = decltype(std::declval<V&>().leaf(std::declval<const Value&>()));

template <class V>
WalkResult<V> walk_value(const Value& v, V& visitor);

namespace detail {
template <class V>
struct WalkEntry {  // walks one entry of a list or dict
  const Value& x;
  V& visitor;
  WalkResult<V> operator()() const { return walk_value(x, visitor); }
};
template <class V>
struct WalkEntries {  // walks every entry of a list or dict, rebuilding it when R is Value
  const Value& v;
  V& visitor;
  WalkResult<V> operator()() const;
};
template <class V>
WalkResult<V> walk_entry(V& visitor, const Value& parent, size_t i, const std::string* key,
                         const Value& x) {
  if constexpr (requires(WalkEntry<V> w) { visitor.child(parent, i, key, w); })
    return visitor.child(parent, i, key, WalkEntry<V>{x, visitor});
  else
    return walk_value(x, visitor);
}
template <class V>
WalkResult<V> WalkEntries<V>::operator()() const {
  constexpr bool rebuild = !std::is_void_v<WalkResult<V>>;
  if (v.is_list()) {
    [[maybe_unused]] ValueList out;
    const ValueList& l = v.list();
    for (size_t i = 0; i < l.size(); ++i) {
      if constexpr (rebuild)
        out.push_back(walk_entry(visitor, v, i, nullptr, l[i]));
      else
        walk_entry(visitor, v, i, nullptr, l[i]);
    }
    if constexpr (rebuild) return Value(std::move(out));
  } else {
    [[maybe_unused]] ValueDict out;
    const auto& items = v.dict().items();
    for (size_t i = 0; i < items.size(); ++i) {
      const auto& [k, x] = items[i];
      if constexpr (rebuild)
        out.set(k, walk_entry(visitor, v, i, &k, x));
      else
        walk_entry(visitor, v, i, &k, x);
    }
    if constexpr (rebuild) return Value(std::move(out));
  }
}
}  // namespace detail

template <class V>
WalkResult<V> walk_value(const Value& v, V& visitor) {
  const ValueDepthGuard depth;
  if (v.is_list() || v.is_dict()) {
    const detail::WalkEntries<V> children{v, visitor};
    if constexpr (requires { visitor.container(v, children); })
      return visitor.container(v, children);
    else
      return children();
  }
  if constexpr (requires { visitor.tensordict(v.tensordict()); })
    if (v.is_tensordict()) return visitor.tensordict(v.tensordict());
  return visitor.leaf(v);
}

// Applies f to every Tensor leaf (inside lists, dicts and TensorDicts), rebuilding the same
// structure; a TensorDict keeps its batch size when every new leaf still starts with it, else
// gets [].
Value map_tensors(const Value& v, const std::function<Tensor(const Tensor&)>& f);
// Calls f on every Tensor leaf in order.
void for_each_tensor(const Value& v, const std::function<void(const Tensor&)>& f);

}  // namespace td
