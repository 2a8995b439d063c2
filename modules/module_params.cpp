// TensorDict's side of modules: a module's parameters and buffers as a TensorDict
// (from_module, from_modules) and back into the module (to_module).
#include <algorithm>
#include <string>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "engine/ops.h"
#include "modules/module.h"
#include "modules/tensordict.h"

namespace td {

TensorDict TensorDict::from_module(const nn::Module& m) {
  TensorDict out;
  for (int buf = 0; buf < 2; ++buf)
    for (const auto& [n, s] : m.own_slots())
      if (s->is_buffer == (buf == 1) && s->value.defined()) out.set(n, s->value);
  // a child without parameters or buffers (a ReLU) has no entry, as in tensordict
  for (const auto& [n, c] : m.named_children())
    if (TensorDict sub = from_module(*c); !sub.items().empty()) out.set(n, sub);
  return out;
}

namespace {
std::unordered_set<std::string> leaf_keys(const TensorDict& d) {
  const auto keys = d.keys(true, true);
  return {keys.begin(), keys.end()};
}
bool same_layout(const Tensor& a, const Tensor& b) {
  return a.is_same(b) ||
         (a.storage() == b.storage() && a.offset() == b.offset() && a.shape() == b.shape() &&
          a.strides() == b.strides() && a.dtype() == b.dtype());
}
TensorDict stack_modules(const std::vector<TensorDict>& ds, bool expand_identical) {
  const TensorDict& first = ds[0];
  Shape bs{static_cast<int64_t>(ds.size())};
  TensorDict out(bs);
  for (size_t idx = 0; idx < first.items().size(); ++idx) {
    const auto& [k, e] = first.items()[idx];
    if (std::holds_alternative<TensorDict>(e)) {
      std::vector<TensorDict> subs;
      for (const auto& d : ds) subs.push_back(std::get<TensorDict>(d.items()[idx].second));
      out.set(k, stack_modules(subs, expand_identical));
      continue;
    }
    std::vector<Tensor> ts;
    for (const auto& d : ds) ts.push_back(std::get<Tensor>(d.items()[idx].second));
    bool identical = expand_identical;
    for (size_t i = 1; i < ts.size() && identical; ++i) identical = same_layout(ts[0], ts[i]);
    if (identical) {
      Shape s = ts[0].shape();
      s.insert(s.begin(), static_cast<int64_t>(ts.size()));
      out.set(k, ts[0].unsqueeze(0).expand(s));
    } else {
      out.set(k, td::stack(ts, 0));
    }
  }
  return out;
}

// Module i must be module 0's class and mode in every submodule, as torch.func.
// stack_module_state requires: functional_vmap runs every set through module 0, so a set stacked
// from an eval-mode module would run in training mode. ValueError naming the first difference.
void check_same_kind(const nn::Module& m0, const nn::Module& mi, size_t i,
                     const std::string& path) {
  const std::string where = path.empty() ? "" : " in submodule '" + path + "'";
  if (m0.type_name() != mi.type_name())
    throw_error<ValueError>("[from_modules] module ", i, " differs from module 0", where,
                            ": it is a ", mi.type_name(), " where module 0 has a ", m0.type_name(),
                            "; stacked modules must be of one class");
  if (m0.is_training() != mi.is_training())
    throw_error<ValueError>("[from_modules] module ", i, " differs from module 0", where,
                            ": it is in ", mi.is_training() ? "training" : "eval",
                            " mode where module 0 is in ", m0.is_training() ? "training" : "eval",
                            " mode; call train() or eval() on every module alike");
  // submodules of one name are compared; the keys' check below names a structure that differs
  const auto ci = mi.named_children();
  for (const auto& [name, c0] : m0.named_children())
    for (const auto& [other, c] : ci)
      if (other == name) check_same_kind(*c0, *c, i, path.empty() ? name : path + "." + name);
}
}  // namespace

TensorDict TensorDict::from_modules(const std::vector<const nn::Module*>& modules,
                                    FromModulesOptions options) {
  if (modules.empty()) throw_error<ValueError>("[from_modules] needs at least one module");
  std::vector<TensorDict> ds;
  for (const auto* m : modules) {
    if (!m) throw_error<ValueError>("[from_modules] a module is null");
    ds.push_back(from_module(*m));
  }
  for (size_t i = 1; i < modules.size(); ++i) check_same_kind(*modules[0], *modules[i], i, "");
  // Structure and shapes must agree; name the first difference.
  auto k0 = ds[0].keys(true, false);
  const std::unordered_set<std::string> leaves0 = leaf_keys(ds[0]);
  for (size_t i = 1; i < ds.size(); ++i) {
    auto ki = ds[i].keys(true, false);
    const std::unordered_set<std::string> leaves_i = leaf_keys(ds[i]);
    for (size_t j = 0; j < std::max(k0.size(), ki.size()); ++j) {
      std::string a = j < k0.size() ? k0[j] : "<none>", b = j < ki.size() ? ki[j] : "<none>";
      if (a != b)
        throw_error<ValueError>("[from_modules] module ", i,
                                " differs from module 0 in "
                                "structure: key '",
                                b, "' where module 0 has '", a, "'");
      const bool d0 = !leaves0.contains(a);
      const bool di = !leaves_i.contains(a);
      if (d0 != di)
        throw_error<ValueError>("[from_modules] key '", a, "' is a ", d0 ? "submodule" : "tensor",
                                " in module 0 but a ", di ? "submodule" : "tensor", " in module ",
                                i);
      if (!d0) {
        Shape s0 = ds[0].get(a).shape(), si = ds[i].get(a).shape();
        if (s0 != si || ds[0].get(a).dtype() != ds[i].get(a).dtype())
          throw_error<ValueError>("[from_modules] '", a, "' has shape ", shape_str(si),
                                  " in module ", i, " but ", shape_str(s0), " in module 0");
      }
    }
  }
  return stack_modules(ds, options.expand_identical);
}

TensorDict::ModuleGuard TensorDict::to_module(nn::Module& m) const {
  const auto slots = m.named_slots();
  const std::vector<Tensor> tensors = nn::ParameterOverride::resolve(m, *this, slots, "to_module");
  std::vector<std::pair<std::string, Tensor>> saved;
  for (size_t i = 0; i < slots.size(); ++i) {
    saved.emplace_back(slots[i].first, slots[i].second->value);
    slots[i].second->value = tensors[i];
  }
  return ModuleGuard(m, std::move(saved));
}

TensorDict::ModuleGuard::ModuleGuard(nn::Module& m,
                                     std::vector<std::pair<std::string, Tensor>> saved)
    : module_(&m), saved_(std::move(saved)) {}

TensorDict::ModuleGuard::ModuleGuard(ModuleGuard&& o) noexcept
    : module_(o.module_), saved_(std::move(o.saved_)) {
  o.module_ = nullptr;
}

TensorDict::ModuleGuard::~ModuleGuard() {
  if (!module_) return;
  // backwards: a submodule used twice saved its slot twice, the second time holding the first
  // substitute
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it)
    if (nn::TensorSlot* s = module_->find_slot(it->first)) s->value = std::move(it->second);
}

}  // namespace td
