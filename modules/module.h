#pragma once
// nn::Module: the base of every module. Plain classes held by std::shared_ptr; parameters,
// buffers and submodules are registered by name, methods (forward among them) by name with
// Python-style argument binding.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "modules/tensordict.h"
#include "modules/value.h"

namespace td::nn {

class Module;

// One registered tensor (a parameter or a buffer). Its address identifies it in overrides.
struct TensorSlot {
  Tensor value;
  bool is_buffer = false;
};

// Resolves a slot through the innermost ParameterOverride of this thread that covers it.
const Tensor& resolve_slot(const TensorSlot* slot);

// The handle register_parameter / register_buffer return; reads like a Tensor.
class Param {
 public:
  Param() = default;
  explicit Param(TensorSlot* slot) : slot_(slot) {}
  // The tensor in effect on this thread (an override's, else the module's own).
  const Tensor& get() const;
  operator const Tensor&() const { return get(); }  // NOLINT: reads like a Tensor
  const Tensor* operator->() const { return &get(); }
  bool defined() const { return slot_ != nullptr && get().defined(); }
  TensorSlot* slot() const { return slot_; }

 private:
  TensorSlot* slot_ = nullptr;
};

// Substitutes tensors for the parameters and buffers of `root` and its submodules on this
// thread while alive; keys are dotted names as in named_parameters()/named_buffers().
// Validates first (resolve below). Overrides nest (the innermost wins).
class ParameterOverride {
 public:
  ParameterOverride(const Module& root, const TensorDict& params);
  ~ParameterOverride();
  ParameterOverride(const ParameterOverride&) = delete;
  ParameterOverride& operator=(const ParameterOverride&) = delete;
  // The tensor substituted for slot, or nullptr.
  const Tensor* find(const TensorSlot* slot) const;
  const ParameterOverride* previous() const { return prev_; }
  static bool any_active();  // on this thread
  // params' entry for each of root's `slots` (named_slots()), checked; `what` names the caller
  // in messages. Names that reach one tensor are tied: a submodule used twice, or one tensor
  // registered under two names. Tied entries must be one tensor or equal (ValueError naming
  // both); a tied name without an entry takes the other's (as torch.func.functional_call).
  // Every missing and every unexpected key: one KeyError listing them; a shape that differs from
  // the module's tensor: a ValueError.
  static std::vector<Tensor> resolve(const Module& root, const TensorDict& params,
                                     const std::vector<std::pair<std::string, TensorSlot*>>& slots,
                                     const char* what);
  // The check of tied entries alone, for params stacked over sets, whose per-set views inside
  // vmap an override cannot compare (functional_vmap checks the stacked dict first).
  static void check_tied(const Module& root, const TensorDict& params, const char* what);
  // Whether any parameter or buffer of root is reachable under two names.
  static bool has_ties(const Module& root);

 private:
  bool pair_in_order(const Module& m, const TensorDict& d);
  std::unordered_map<const TensorSlot*, Tensor> map_;
  const ParameterOverride* prev_;
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  // Runs a method on its bound arguments (one Value per declared argument, in order);
  // `method` is "Type.name" for error messages.
  using Invoker = std::function<Value(std::vector<Value>& args, const std::string& method)>;

  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The module's type name, e.g. "Linear" (used in error messages and printing).
  virtual std::string type_name() const;
  // type_name(), computed once (after construction) and cached.
  const std::string& cached_type_name() const;
  // The class whose forward may run on several threads at once, each thread under its own
  // ParameterOverride (functional_vmap runs blocks of sets so): a forward that keeps no state
  // beyond its parameters and buffers. td's modules name their own class; the default, none, is
  // the safe answer. It must be the module's exact class: one derived from td's (which may add
  // state) is not covered unless it names itself.
  virtual const std::type_info* concurrent_forward_class() const { return nullptr; }
  // Whether forward runs many small steps over the same parameters (a recurrent net's time
  // loop): functional_vmap then keeps the sets together rather than in cache-sized blocks, which
  // would multiply the steps and leave each one less work.
  virtual bool steps_over_parameters() const { return false; }

  // Registration (ValueError for an empty name, a name with a dot, or a duplicate).
  Param register_parameter(const std::string& name, Tensor t);
  Param register_buffer(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_module_(name, m);
    return m;
  }

  // Tree walks: dotted names, insertion order, recursive. As torch's, they list a tensor or a
  // module met twice (a submodule used twice, a tied weight) once, under its first name;
  // named_children() and from_module() keep every name.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  std::vector<Tensor> parameters() const;
  std::vector<Tensor> buffers() const;
  // (name, module) for self ("") and every descendant, pre-order.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules();
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;
  // This module's own parameters then buffers (not recursive), in registration order.
  const std::vector<std::pair<std::string, std::unique_ptr<TensorSlot>>>& own_slots() const {
    return slots_;
  }
  // Every parameter and buffer slot with its dotted name (own first, then each child).
  std::vector<std::pair<std::string, TensorSlot*>> named_slots() const;
  // The slot with that dotted name, or nullptr.
  TensorSlot* find_slot(const std::string& dotted) const;

  // Training mode, recursively.
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  // Methods. fn is a member function whose parameters are (const references to) Tensor, Value,
  // TensorDict, std::string, bool, numbers, ValueList, ValueDict, std::vector or std::optional
  // of these, and that returns anything a Value is made from (Tensor, a tuple, a vector, ...).
  // arg_names name the parameters; defaults give trailing optional ones.
  template <class M, class R, class... A>
  void register_method(const std::string& name, R (M::*fn)(A...),
                       std::vector<std::string> arg_names, ValueDict defaults = {});
  template <class M, class R, class... A>
  void register_method(const std::string& name, R (M::*fn)(A...) const,
                       std::vector<std::string> arg_names, ValueDict defaults = {});
  // A method from any callable taking the bound arguments in order.
  void register_method_raw(const std::string& name, std::vector<std::string> arg_names,
                           ValueDict defaults, Invoker invoker);

  bool has_method(const std::string& name) const;
  std::vector<std::string> method_names() const;
  const std::vector<std::string>& method_arg_names(const std::string& name) const;  // KeyError
  // Binds args and kwargs as Python does (TypeError naming the method and argument) and calls
  // the method (KeyError listing the methods when there is none of that name).
  Value call_method(const std::string& name, const ValueList& args = {},
                    const ValueDict& kwargs = {});
  Value operator()(const ValueList& args, const ValueDict& kwargs = {}) {
    return call_method("forward", args, kwargs);
  }

  // Converts an argument for a bound method (TypeError naming method and argument).
  template <class T>
  static T convert_arg(const Value& v, const std::string& method, const std::string& arg);

 protected:
  // One line per child in printing; modules override to show their arguments.
  virtual std::string extra_repr() const { return ""; }

 private:
  friend std::ostream& operator<<(std::ostream& os, const Module& m);
  friend class ParameterOverride;  // walks children_ without copying names
  struct MethodEntry {
    std::vector<std::string> arg_names;
    ValueDict defaults;
    Invoker invoker;
  };
  void add_module_(const std::string& name, std::shared_ptr<Module> m);
  void check_new_name_(const std::string& name, const char* what) const;
  Param add_slot_(const std::string& name, Tensor t, bool is_buffer);
  std::string repr_() const;  // torch's Module.__repr__

  mutable std::once_flag type_name_once_;
  mutable std::string type_name_cache_;
  bool training_ = true;
  std::vector<std::pair<std::string, std::unique_ptr<TensorSlot>>> slots_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<std::pair<std::string, MethodEntry>> methods_;
};

// PyTorch-like printing: "Sequential(\n  (0): Linear(in_features=3, ...)\n)".
std::ostream& operator<<(std::ostream& os, const Module& m);

// ---- template implementation ----

namespace detail {
template <class T>
using arg_t = std::remove_cv_t<std::remove_reference_t<T>>;

template <class Self, class Fn, class... A, size_t... I>
Value invoke_bound(Self* self, Fn fn, std::vector<Value>& args, const std::string& name,
                   const std::vector<std::string>& names, std::index_sequence<I...>) {
  (void)args;
  (void)name;
  (void)names;
  using R = decltype((self->*fn)(std::declval<A>()...));
  if constexpr (std::is_void_v<R>) {
    (self->*fn)(Module::convert_arg<arg_t<A>>(args[I], name, names[I])...);
    return Value();
  } else {
    return Value((self->*fn)(Module::convert_arg<arg_t<A>>(args[I], name, names[I])...));
  }
}
void check_arg_count(const std::string& method, size_t declared, size_t named);
// TypeError: method m's argument a must be `want`, not what v holds
[[noreturn]] void bad_arg(const Value& v, const std::string& m, const std::string& a,
                          const char* want);
// ValueError: method m's argument a holds v, which the C++ parameter's `type` cannot hold
[[noreturn]] void arg_out_of_range(const Value& v, const std::string& m, const std::string& a,
                                   const std::string& type);
template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};
}  // namespace detail

template <class M, class R, class... A>
void Module::register_method(const std::string& name, R (M::*fn)(A...),
                             std::vector<std::string> arg_names, ValueDict defaults) {
  detail::check_arg_count(name, sizeof...(A), arg_names.size());
  M* self = static_cast<M*>(this);
  auto names = arg_names;
  register_method_raw(name, std::move(arg_names), std::move(defaults),
                      [self, fn, names](std::vector<Value>& args, const std::string& full) {
                        return detail::invoke_bound<M, R (M::*)(A...), A...>(
                            self, fn, args, full, names, std::index_sequence_for<A...>{});
                      });
}

template <class M, class R, class... A>
void Module::register_method(const std::string& name, R (M::*fn)(A...) const,
                             std::vector<std::string> arg_names, ValueDict defaults) {
  detail::check_arg_count(name, sizeof...(A), arg_names.size());
  const M* self = static_cast<const M*>(this);
  auto names = arg_names;
  register_method_raw(name, std::move(arg_names), std::move(defaults),
                      [self, fn, names](std::vector<Value>& args, const std::string& full) {
                        return detail::invoke_bound<const M, R (M::*)(A...) const, A...>(
                            self, fn, args, full, names, std::index_sequence_for<A...>{});
                      });
}

template <>
Tensor Module::convert_arg<Tensor>(const Value& v, const std::string& m, const std::string& a);
template <>
Value Module::convert_arg<Value>(const Value& v, const std::string& m, const std::string& a);
template <>
int64_t Module::convert_arg<int64_t>(const Value& v, const std::string& m, const std::string& a);
template <>
double Module::convert_arg<double>(const Value& v, const std::string& m, const std::string& a);
template <>
bool Module::convert_arg<bool>(const Value& v, const std::string& m, const std::string& a);
template <>
std::string Module::convert_arg<std::string>(const Value& v, const std::string& m,
                                             const std::string& a);
template <>
TensorDict Module::convert_arg<TensorDict>(const Value& v, const std::string& m,
                                           const std::string& a);
// Other integer and floating types (int, float, ...) convert through int64_t and double; a list
// to ValueList or std::vector of any of these, a dict to ValueDict, None or a value to
// std::optional.
template <class T>
T Module::convert_arg(const Value& v, const std::string& m, const std::string& a) {
  // a narrower type must hold the value: a static_cast would wrap or overflow it silently
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    const int64_t i = convert_arg<int64_t>(v, m, a);
    if (!fits<T>(i)) detail::arg_out_of_range(v, m, a, type_label<T>());
    return static_cast<T>(i);
  } else if constexpr (std::is_floating_point_v<T>) {
    const double d = convert_arg<double>(v, m, a);
    if (!fits<T>(d)) detail::arg_out_of_range(v, m, a, type_label<T>());
    return static_cast<T>(d);
  } else if constexpr (std::is_same_v<T, ValueList>) {
    if (!v.is_list()) detail::bad_arg(v, m, a, "a list");
    return v.list();
  } else if constexpr (std::is_same_v<T, ValueDict>) {
    if (!v.is_dict()) detail::bad_arg(v, m, a, "a dict");
    return v.dict();
  } else if constexpr (detail::IsOptional<T>::value) {
    if (v.is_none()) return std::nullopt;
    return convert_arg<typename T::value_type>(v, m, a);
  } else if constexpr (detail::IsVector<T>::value) {
    if (!v.is_list()) detail::bad_arg(v, m, a, "a list");
    T out;
    for (const Value& e : v.list()) out.push_back(convert_arg<typename T::value_type>(e, m, a));
    return out;
  } else {
    static_assert(sizeof(T) == 0,
                  "a bound method takes Tensor, TensorDict, Value, std::string, bool, numbers, "
                  "lists (ValueList, std::vector), ValueDict or std::optional of these");
  }
}

}  // namespace td::nn
