// The module tree: registration of parameters, buffers and submodules, the walks over them,
// training mode and printing.
#include "modules/module.h"

#include <cxxabi.h>

#include <cstdlib>
#include <ostream>
#include <sstream>
#include <typeinfo>
#include <unordered_set>

namespace td::nn {

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
