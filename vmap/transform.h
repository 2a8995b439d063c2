#pragma once
// td::vmap: maps a function of Tensors / TensorDicts / Values over a batch dim of its inputs.
//
//   auto bmm = vmap([](Tensor a, Tensor b) { return matmul(a, b); },
//                   {.in_dims = {0, std::nullopt}});
//   Tensor c = bmm(randn({5, 3, 4}), randn({4, 2}));  // [5, 3, 2]
//
// Each call pushes a vmap level: inputs get a batch tag at that level, every op inside runs its
// batching rule (so the function sees per-set shapes), and outputs have the batch dim moved to
// out_dims. Nested vmaps tag at higher levels.
#include <cstdint>
#include <functional>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/dispatch.h"
#include "engine/tensor.h"
#include "modules/tensordict.h"
#include "modules/value.h"
#include "vmap/dims.h"

namespace td {

struct VmapOptions {
  // One Dims per positional argument (empty: 0 for all); nullopt = shared. Negative dims count
  // from the end. A TensorDict's in_dim indexes its batch dims; a dim given for a list or dict
  // applies to each leaf, a list or dict of Dims gives each entry its own (vmap/dims.h).
  DimsList in_dims = {};
  // For the outputs, as a pytree prefix: one dim for all of them (the default, 0), or a list
  // with one Dims per output of a function returning a list or tuple (a single output may take a
  // list of one, as torch's). None only for outputs that do not depend on the batched inputs.
  Dims out_dims = {};
  Randomness randomness = Randomness::Error;
  // Sets per call (> 0); any value gives the same result as none.
  std::optional<int64_t> chunk_size = std::nullopt;
  // Called after each chunk with the number of sets done so far, one call at a time (from the
  // thread that ran the chunk when chunks run concurrently).
  std::function<void(int64_t sets_done)> progress = {};
  // Index of set 0 among the sets of a larger call (a shard of them): set i draws the random
  // numbers set set_offset + i draws there.
  int64_t set_offset = 0;
};

// The non-template core: runs f over the batch of args.
Value vmap_call(const std::function<Value(const ValueList&)>& f, const ValueList& args,
                const VmapOptions& options);
// functional_vmap's form: with `concurrent`, the chunks run at once across the engine's threads,
// each chunk's ops serially, claimed one at a time (a thread slowed by the host takes fewer).
// f must be safe to call from several threads, and this thread must not be inside a vmap.
Value vmap_call(const std::function<Value(const ValueList&)>& f, const ValueList& args,
                const VmapOptions& options, bool concurrent);

namespace detail {

template <class T>
struct IsTuple : std::false_type {};
template <class... Ts>
struct IsTuple<std::tuple<Ts...>> : std::true_type {};
template <class A, class B>  // a Value holds a pair as a list of two, as a tuple
struct IsTuple<std::pair<A, B>> : std::true_type {};

template <class T>
T from_value(const Value& v) {
  if constexpr (std::is_same_v<T, Value>) {
    return v;
  } else if constexpr (std::is_same_v<T, Tensor>) {
    return v.tensor();
  } else if constexpr (std::is_same_v<T, TensorDict>) {
    return v.tensordict();
  } else if constexpr (std::is_same_v<T, ValueList>) {
    return v.list();
  } else if constexpr (std::is_same_v<T, ValueDict>) {
    return v.dict();
  } else if constexpr (std::is_same_v<T, bool>) {
    return v.to_bool();
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(v.to_int());
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v.to_double());
  } else if constexpr (IsTuple<T>::value) {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return T{from_value<std::tuple_element_t<I, T>>(v[I])...};
    }
    (std::make_index_sequence<std::tuple_size_v<T>>{});
  } else {
    T out;
    for (const auto& e : v.list()) out.push_back(from_value<typename T::value_type>(e));
    return out;
  }
}

template <class... Args, class F, size_t... I>
Value call_unpacked(const F& f, const ValueList& l, std::index_sequence<I...>) {
  return Value(f(from_value<Args>(l[I])...));
}

}  // namespace detail

// Returns a callable taking the same arguments as f (any mix of Tensor, TensorDict, Value) and
// returning f's return type with the batch dim added at out_dims.
template <class F>
auto vmap(F f, VmapOptions options = {}) {
  return [f = std::move(f), options = std::move(options)](const auto&... args) {
    using R = std::invoke_result_t<const F&, std::decay_t<decltype(args)>...>;
    ValueList list{Value(args)...};
    auto fn = [&f](const ValueList& l) -> Value {
      return detail::call_unpacked<std::decay_t<decltype(args)>...>(
          f, l, std::index_sequence_for<decltype(args)...>{});
    };
    return detail::from_value<R>(vmap_call(fn, list, options));
  };
}

}  // namespace td
