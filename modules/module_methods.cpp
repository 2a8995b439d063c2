// A module's methods: registration, binding of positional and keyword arguments as Python does,
// and the conversion of bound Values to the C++ parameters.
#include <string>
#include <utility>
#include <vector>

#include "modules/module.h"

namespace td::nn {

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

}  // namespace td::nn
