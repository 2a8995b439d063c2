// ParameterOverride: tensors substituted for a module tree's parameters and buffers on one
// thread, matched to the slots by name (tied names checked) and resolved through Param.
#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/ops.h"
#include "modules/module.h"

namespace td::nn {

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

}  // namespace td::nn
