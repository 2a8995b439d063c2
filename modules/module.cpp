#include "modules/module.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <ostream>
#include <sstream>
#include <typeinfo>
#include <unordered_set>

#include "engine/ops.h"

namespace td::nn {

// ---- parameter overrides ----

namespace {
thread_local const ParameterOverride* tl_override = nullptr;
const Tensor kUndefined;
}  // namespace

const Tensor& resolve_slot(const TensorSlot* slot) {
  if (slot == nullptr) return kUndefined;
  for (const ParameterOverride* o = tl_override; o != nullptr; o = o->previous()) {
    if (const Tensor* t = o->find(slot)) return *t;
  }
  return slot->value;
}

const Tensor& Param::get() const { return resolve_slot(slot_); }

namespace {
// What a slot is tied by: the tensor it holds. A submodule used twice has one slot under two
// names, a tensor registered under two names (weight tying) two slots holding one tensor.
const void* tie_of(const TensorSlot* slot) { return slot->value.impl_ptr().get(); }

// The entries named first_key and key are for one tie.
void check_tie(const char* what, const TensorSlot* first_slot, const std::string& first_key,
               const Tensor& a, const TensorSlot* slot, const std::string& key, const Tensor& b) {
  if (a.is_same(b) || a.is_batched() || b.is_batched() || same_bytes(a, b)) return;
  throw_error<ValueError>("[", what, "] params gives '", first_key, "' and '", key,
                          "' different tensors, but they name one ",
                          slot->is_buffer ? "buffer" : "parameter",
                          first_slot == slot ? " (a submodule used twice)"
                                             : " (one tensor registered under both names)",
                          ": make the two entries equal, give only one of them, or give each use "
                          "its own tensor");
}

// given[i]: the leaf named slots[i].first, or nullptr (pointers into leaves).
std::vector<const Tensor*> match_by_name(
    const std::vector<std::pair<std::string, TensorSlot*>>& slots,
    const std::vector<std::pair<std::string, Tensor>>& leaves) {
  std::unordered_map<std::string, const Tensor*> by_name;
  for (const auto& [k, t] : leaves) by_name.emplace(k, &t);
  std::vector<const Tensor*> given(slots.size(), nullptr);
  for (size_t i = 0; i < slots.size(); ++i)
    if (auto it = by_name.find(slots[i].first); it != by_name.end()) given[i] = it->second;
  return given;
}

// given[i]: the entry for slots[i], or nullptr. The entries for one tie must agree; a tied name
// without an entry takes the entry of one with (torch.func.functional_call fills it alike).
void check_ties(const char* what, const std::vector<std::pair<std::string, TensorSlot*>>& slots,
                std::vector<const Tensor*>& given) {
  std::unordered_map<const void*, size_t> first;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!given[i]) continue;
    auto [it, fresh] = first.emplace(tie_of(slots[i].second), i);
    if (!fresh)
      check_tie(what, slots[it->second].second, slots[it->second].first, *given[it->second],
                slots[i].second, slots[i].first, *given[i]);
  }
  for (size_t i = 0; i < slots.size(); ++i)
    if (!given[i])
      if (auto it = first.find(tie_of(slots[i].second)); it != first.end())
        given[i] = given[it->second];
}
}  // namespace

bool ParameterOverride::has_ties(const Module& root) {
  // a walk without names: most trees have no tie and skip the check by name
  SmallVector<const Module*, 16> modules;
  SmallVector<const void*, 32> tensors;
  bool shared = false;
  auto walk = [&](const Module& m, auto&& self) -> void {
    if (std::find(modules.begin(), modules.end(), &m) != modules.end()) {
      shared = true;
      return;
    }
    modules.push_back(&m);
    for (const auto& [n, s] : m.slots_)
      if (s->value.defined()) tensors.push_back(tie_of(s.get()));
    for (const auto& [n, c] : m.children_) self(*c, self);
  };
  walk(root, walk);
  if (shared) return true;
  std::sort(tensors.begin(), tensors.end());
  return std::adjacent_find(tensors.begin(), tensors.end()) != tensors.end();
}

// Pairs m's slots (own parameters, own buffers, then each child's, as named_slots() orders
// them) with d's entries walked in the same order, comparing names level by level: no dotted
// names are built. False at the first difference; the caller then matches by name.
bool ParameterOverride::pair_in_order(const Module& m, const TensorDict& d) {
  const auto& items = d.items();
  size_t i = 0;
  for (int buf = 0; buf < 2; ++buf)
    for (const auto& [n, s] : m.slots_) {
      if (s->is_buffer != (buf == 1) || !s->value.defined()) continue;
      if (i >= items.size() || items[i].first != n) return false;
      const auto* t = std::get_if<Tensor>(&items[i].second);
      if (!t || t->shape() != s->value.shape()) return false;
      map_.emplace(s.get(), *t);
      ++i;
    }
  for (const auto& [n, c] : m.children_) {
    if (i < items.size() && items[i].first == n) {
      const auto* sub = std::get_if<TensorDict>(&items[i].second);
      if (!sub || !pair_in_order(*c, *sub)) return false;
      ++i;
    } else if (!c->named_slots().empty()) {
      return false;  // a child with tensors but no entry
    }
  }
  return i == items.size();
}

std::vector<Tensor> ParameterOverride::resolve(
    const Module& root, const TensorDict& params,
    const std::vector<std::pair<std::string, TensorSlot*>>& slots, const char* what) {
  const auto leaves = params.leaves();
  std::vector<const Tensor*> given = match_by_name(slots, leaves);
  const size_t matched = static_cast<size_t>(
      std::count_if(given.begin(), given.end(), [](const Tensor* t) { return t != nullptr; }));
  check_ties(what, slots, given);
  std::vector<std::string> missing, unexpected;
  for (size_t i = 0; i < slots.size(); ++i)
    if (!given[i]) missing.push_back(slots[i].first);
  // a submodule used twice matches one leaf per name, so leaves beyond the matches are extra
  if (matched != leaves.size()) {
    std::unordered_set<std::string> names;
    for (const auto& [k, s] : slots) names.insert(k);
    for (const auto& [k, t] : leaves)
      if (!names.contains(k)) unexpected.push_back(k);
  }
  if (!missing.empty() || !unexpected.empty())
    throw_error<KeyError>("[", what, "] params does not fit ", root.type_name(), ": ",
                          missing.empty() ? "" : "missing keys (no entry) ",
                          missing.empty() ? "" : quoted_list(missing),
                          !missing.empty() && !unexpected.empty() ? ", " : "",
                          unexpected.empty() ? "" : "unexpected keys (not a parameter or buffer) ",
                          unexpected.empty() ? "" : quoted_list(unexpected));
  std::vector<Tensor> out;
  out.reserve(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    const Shape& want = slots[i].second->value.shape();
    if (given[i]->shape() != want)
      throw_error<ValueError>("[", what, "] '", slots[i].first, "' has shape ",
                              shape_str(given[i]->shape()), " but the module's tensor has shape ",
                              shape_str(want));
    out.push_back(*given[i]);
  }
  return out;
}

ParameterOverride::ParameterOverride(const Module& root, const TensorDict& params)
    : prev_(tl_override) {
  if (!has_ties(root) && pair_in_order(root, params)) {
    tl_override = this;
    return;
  }
  map_.clear();
  const auto slots = root.named_slots();
  const std::vector<Tensor> tensors = resolve(root, params, slots, "ParameterOverride");
  map_.reserve(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) map_.emplace(slots[i].second, tensors[i]);
  tl_override = this;
}

void ParameterOverride::check_tied(const Module& root, const TensorDict& params, const char* what) {
  if (!has_ties(root)) return;
  const auto slots = root.named_slots();
  const auto leaves = params.leaves();
  std::vector<const Tensor*> given = match_by_name(slots, leaves);
  check_ties(what, slots, given);
}

ParameterOverride::~ParameterOverride() { tl_override = prev_; }

bool ParameterOverride::any_active() { return tl_override != nullptr; }

const Tensor* ParameterOverride::find(const TensorSlot* slot) const {
  auto it = map_.find(slot);
  return it == map_.end() ? nullptr : &it->second;
}

// ---- registration ----

std::string Module::type_name() const {
  const char* mangled = typeid(*this).name();
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = (status == 0 && d) ? d : mangled;
  std::free(d);
  // the class name without its namespaces; template arguments keep theirs (app::Wrap<td::Linear>
  // is Wrap<td::Linear>), so only a '::' outside <> and () ends the prefix
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i + 1 < name.size(); ++i) {
    const char c = name[i];
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (depth == 0 && c == ':' && name[i + 1] == ':') start = i + 2;
  }
  return name.substr(start);
}

const std::string& Module::cached_type_name() const {
  std::call_once(type_name_once_, [this] { type_name_cache_ = type_name(); });
  return type_name_cache_;
}

void Module::check_new_name_(const std::string& name, const char* what) const {
  if (name.empty()) throw_error<ValueError>("[", what, "] the name must not be empty");
  if (name.find('.') != std::string::npos)
    throw_error<ValueError>("[", what, "] the name '", name, "' must not contain a dot");
  for (const auto& s : slots_)
    if (s.first == name)
      throw_error<ValueError>("[", what, "] ", type_name(), " already has a ",
                              s.second->is_buffer ? "buffer" : "parameter", " named '", name, "'");
  for (const auto& c : children_)
    if (c.first == name)
      throw_error<ValueError>("[", what, "] ", type_name(), " already has a submodule named '",
                              name, "'");
}

Param Module::add_slot_(const std::string& name, Tensor t, bool is_buffer) {
  check_new_name_(name, is_buffer ? "register_buffer" : "register_parameter");
  auto slot = std::make_unique<TensorSlot>();
  slot->value = std::move(t);
  slot->is_buffer = is_buffer;
  TensorSlot* p = slot.get();
  slots_.emplace_back(name, std::move(slot));
  return Param(p);
}

Param Module::register_parameter(const std::string& name, Tensor t) {
  return add_slot_(name, std::move(t), false);
}
Param Module::register_buffer(const std::string& name, Tensor t) {
  return add_slot_(name, std::move(t), true);
}

namespace {
bool holds(const Module& tree, const Module* m) {
  if (&tree == m) return true;
  for (const auto& [n, c] : tree.named_children())
    if (holds(*c, m)) return true;
  return false;
}
}  // namespace

void Module::add_module_(const std::string& name, std::shared_ptr<Module> m) {
  check_new_name_(name, "register_module");
  if (!m) throw_error<ValueError>("[register_module] submodule '", name, "' is null");
  // a cycle would make every walk of the tree recurse forever
  if (holds(*m, this))
    throw_error<ValueError>("[register_module] submodule '", name,
                            "' is this module or holds it: a module tree cannot contain itself");
  children_.emplace_back(name, std::move(m));
}

// ---- tree walks ----

namespace {
void collect(const Module& m, const std::string& prefix, bool buffers,
             std::vector<std::pair<std::string, Tensor>>& out,
             std::unordered_set<const TensorImpl*>& seen) {
  for (const auto& [n, s] : m.own_slots())
    if (s->is_buffer == buffers && s->value.defined() &&
        seen.insert(s->value.impl_ptr().get()).second)
      out.emplace_back(prefix + n, s->value);
  for (const auto& [n, c] : m.named_children()) collect(*c, prefix + n + ".", buffers, out, seen);
}
void collect_slots(const Module& m, const std::string& prefix,
                   std::vector<std::pair<std::string, TensorSlot*>>& out) {
  for (int buf = 0; buf < 2; ++buf)
    for (const auto& [n, s] : m.own_slots())
      if (s->is_buffer == (buf == 1) && s->value.defined()) out.emplace_back(prefix + n, s.get());
  for (const auto& [n, c] : m.named_children()) collect_slots(*c, prefix + n + ".", out);
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const TensorImpl*> seen;
  collect(*this, "", false, out, seen);
  return out;
}
std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const TensorImpl*> seen;
  collect(*this, "", true, out, seen);
  return out;
}
std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}
std::vector<Tensor> Module::buffers() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::shared_ptr<Module> self = weak_from_this().lock();
  out.emplace_back("", self);  // null when the module is not held by a shared_ptr
  std::unordered_set<const Module*> seen{this};
  for (const auto& [n, c] : children_)
    for (auto& [sub, m] : c->named_modules())
      if (seen.insert(m.get()).second) out.emplace_back(sub.empty() ? n : n + "." + sub, m);
  return out;
}
std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}
std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& c : children_) out.push_back(c.second);
  return out;
}

std::vector<std::pair<std::string, TensorSlot*>> Module::named_slots() const {
  std::vector<std::pair<std::string, TensorSlot*>> out;
  collect_slots(*this, "", out);
  return out;
}

TensorSlot* Module::find_slot(const std::string& dotted) const {
  auto dot = dotted.find('.');
  if (dot == std::string::npos) {
    for (const auto& [n, s] : slots_)
      if (n == dotted && s->value.defined()) return s.get();
    return nullptr;
  }
  std::string head = dotted.substr(0, dot);
  for (const auto& [n, c] : children_)
    if (n == head) return c->find_slot(dotted.substr(dot + 1));
  return nullptr;
}

Module& Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.second->train(on);
  return *this;
}

// ---- methods ----

void detail::check_arg_count(const std::string& method, size_t declared, size_t named) {
  if (declared != named)
    throw_error<ValueError>("[register_method] method '", method, "' takes ", declared,
                            " arguments but ", named, " argument names were given");
}

void Module::register_method_raw(const std::string& name, std::vector<std::string> arg_names,
                                 ValueDict defaults, Invoker invoker) {
  if (name.empty()) throw_error<ValueError>("[register_method] the name must not be empty");
  if (has_method(name))
    throw_error<ValueError>("[register_method] ", type_name(), " already has a method '", name,
                            "'");
  for (size_t i = 0; i < arg_names.size(); ++i) {
    if (arg_names[i].empty())
      throw_error<ValueError>("[register_method] method '", name, "': argument ", i,
                              " has an empty name");
    for (size_t j = 0; j < i; ++j)
      if (arg_names[i] == arg_names[j])
        throw_error<ValueError>("[register_method] method '", name, "' names argument '",
                                arg_names[i], "' twice");
  }
  bool seen_default = false;
  for (const auto& a : arg_names) {
    if (defaults.contains(a))
      seen_default = true;
    else if (seen_default)
      throw_error<ValueError>("[register_method] method '", name, "': argument '", a,
                              "' without a default follows one with a default");
  }
  for (const auto& k : defaults.keys()) {
    bool found = false;
    for (const auto& a : arg_names) found = found || a == k;
    if (!found)
      throw_error<ValueError>("[register_method] method '", name, "' has a default for '", k,
                              "', which is not one of its arguments");
  }
  methods_.emplace_back(name,
                        MethodEntry{std::move(arg_names), std::move(defaults), std::move(invoker)});
}

bool Module::has_method(const std::string& name) const {
  for (const auto& m : methods_)
    if (m.first == name) return true;
  return false;
}

std::vector<std::string> Module::method_names() const {
  std::vector<std::string> out;
  for (const auto& m : methods_) out.push_back(m.first);
  return out;
}

namespace {
[[noreturn]] void no_method(const Module& m, const std::string& name) {
  throw_error<KeyError>("[", m.cached_type_name(), "] has no method '", name, "'; its methods are ",
                        quoted_list(m.method_names()));
}
}  // namespace

const std::vector<std::string>& Module::method_arg_names(const std::string& name) const {
  for (const auto& m : methods_)
    if (m.first == name) return m.second.arg_names;
  no_method(*this, name);
}

Value Module::call_method(const std::string& name, const ValueList& args, const ValueDict& kwargs) {
  const MethodEntry* e = nullptr;
  for (const auto& m : methods_)
    if (m.first == name) e = &m.second;
  if (e == nullptr) no_method(*this, name);
  const std::string full = cached_type_name() + "." + name;
  const auto& names = e->arg_names;
  if (args.size() > names.size())
    throw_error<TypeError>("[", full, "] takes ", names.size(), " positional argument",
                           names.size() == 1 ? "" : "s", " but ", args.size(), " were given");
  std::vector<Value> bound(names.size());
  std::vector<bool> have(names.size(), false);
  for (size_t i = 0; i < args.size(); ++i) {
    bound[i] = args[i];
    have[i] = true;
  }
  for (const auto& [k, v] : kwargs.items()) {
    size_t i = 0;
    while (i < names.size() && names[i] != k) ++i;
    if (i == names.size())
      throw_error<TypeError>("[", full, "] got an unexpected keyword argument '", k, "'");
    if (have[i]) throw_error<TypeError>("[", full, "] got multiple values for argument '", k, "'");
    bound[i] = v;
    have[i] = true;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (have[i]) continue;
    if (!e->defaults.contains(names[i]))
      throw_error<TypeError>("[", full, "] missing required argument '", names[i], "'");
    bound[i] = e->defaults.at(names[i]);
  }
  return e->invoker(bound, full);
}

void detail::bad_arg(const Value& v, const std::string& m, const std::string& a, const char* want) {
  throw_error<TypeError>("[", m, "] argument '", a, "' must be ", want, ", not ", v.kind_name());
}

void detail::arg_out_of_range(const Value& v, const std::string& m, const std::string& a,
                              const std::string& type) {
  throw_error<ValueError>("[", m, "] argument '", a, "' is ", v, ", which a C++ ", type,
                          " cannot hold");
}

template <>
Tensor Module::convert_arg<Tensor>(const Value& v, const std::string& m, const std::string& a) {
  if (!v.is_tensor()) detail::bad_arg(v, m, a, "a Tensor");
  return v.tensor();
}
template <>
Value Module::convert_arg<Value>(const Value& v, const std::string&, const std::string&) {
  return v;
}
template <>
int64_t Module::convert_arg<int64_t>(const Value& v, const std::string& m, const std::string& a) {
  if (v.kind() != Value::Kind::Int) detail::bad_arg(v, m, a, "an int");
  return v.to_int();
}
template <>
double Module::convert_arg<double>(const Value& v, const std::string& m, const std::string& a) {
  if (v.kind() != Value::Kind::Int && v.kind() != Value::Kind::Double)
    detail::bad_arg(v, m, a, "a float");
  return v.to_double();
}
template <>
bool Module::convert_arg<bool>(const Value& v, const std::string& m, const std::string& a) {
  if (v.kind() != Value::Kind::Bool) detail::bad_arg(v, m, a, "a bool");
  return v.to_bool();
}

template <>
std::string Module::convert_arg<std::string>(const Value& v, const std::string& m,
                                             const std::string& a) {
  if (v.kind() != Value::Kind::String) detail::bad_arg(v, m, a, "a str");
  return v.str();
}
template <>
TensorDict Module::convert_arg<TensorDict>(const Value& v, const std::string& m,
                                           const std::string& a) {
  if (!v.is_tensordict()) detail::bad_arg(v, m, a, "a TensorDict");
  return v.tensordict();
}

// ---- printing ----

std::string Module::repr_() const {
  // as torch: the lines of extra_repr, then a line per child (its own lines indented two more);
  // one extra_repr line alone stays on the name's line
  std::vector<std::string> lines;
  std::istringstream extra(extra_repr());
  for (std::string line; std::getline(extra, line);) lines.push_back(line);
  const size_t extra_lines = lines.size();
  for (const auto& [n, c] : children_) {
    std::string child = "(" + n + "): ";
    for (char ch : c->repr_()) child += ch == '\n' ? std::string("\n  ") : std::string(1, ch);
    lines.push_back(std::move(child));
  }
  std::string out = type_name() + "(";
  if (extra_lines == 1 && lines.size() == 1) {
    out += lines[0];
  } else if (!lines.empty()) {
    for (const auto& line : lines) out += "\n  " + line;
    out += "\n";
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.repr_(); }

}  // namespace td::nn
