#include "engine/batching.h"

#include <algorithm>
#include <atomic>
#include <vector>

namespace td {
namespace {
thread_local std::vector<VmapLevel> g_levels;
thread_local size_t g_visible = 0;  // levels [0, g_visible) are visible
std::atomic<int64_t> g_next_level{1};
}  // namespace

Randomness parse_randomness(std::string_view s) {
  if (s == "error") return Randomness::Error;
  if (s == "different") return Randomness::Different;
  if (s == "same") return Randomness::Same;
  throw_error<ValueError>("[parse_randomness] unknown randomness '", s,
                          "' (expected 'error', 'different' or 'same')");
}

VmapLevelScope::VmapLevelScope(int64_t batch_size, Randomness randomness, int64_t set_offset) {
  if (g_visible != g_levels.size())
    throw_error<RuntimeError>("[vmap] cannot start a vmap inside a batching rule");
  level_ = g_next_level.fetch_add(1, std::memory_order_relaxed);
  g_levels.push_back({level_, batch_size, randomness, set_offset});
  g_visible = g_levels.size();
}

VmapLevelScope::~VmapLevelScope() {
  g_levels.pop_back();
  g_visible = g_levels.size();
}

std::span<const VmapLevel> active_levels() { return {g_levels.data(), g_visible}; }
bool in_vmap() { return !g_levels.empty(); }

const VmapLevel* find_level(int64_t level) {
  for (size_t i = 0; i < g_visible; ++i)
    if (g_levels[i].level == level) return &g_levels[i];
  return nullptr;
}

HideLevelsScope::HideLevelsScope(int64_t level) : saved_(g_visible) {
  while (g_visible > 0 && g_levels[g_visible - 1].level >= level) --g_visible;
}
HideLevelsScope::~HideLevelsScope() { g_visible = saved_; }

ShowLevelsScope::ShowLevelsScope(int64_t level) : saved_(g_visible) {
  while (g_visible < g_levels.size() && g_levels[g_visible].level <= level) ++g_visible;
}
ShowLevelsScope::~ShowLevelsScope() { g_visible = saved_; }

Tensor add_batch_tag(const Tensor& t, int64_t level, int64_t dim, int64_t start, int64_t length) {
  const TensorImpl& src = t.impl();
  int64_t d = normalize_dim("add_batch_tag", dim, static_cast<int64_t>(src.shape().size()));
  // logical dim d -> physical dim: the d-th untagged physical dim
  int64_t pdim = -1;
  for (int64_t p = 0, seen = 0; p < static_cast<int64_t>(src.pshape.size()); ++p) {
    bool tagged = std::any_of(src.tags.begin(), src.tags.end(),
                              [&](const BatchTag& bt) { return bt.pdim == p; });
    if (tagged) continue;
    if (seen++ == d) {
      pdim = p;
      break;
    }
  }
  auto impl = std::make_shared<TensorImpl>(src);
  for (const auto& bt : impl->tags)
    if (bt.level == level)
      throw_error<RuntimeError>("[add_batch_tag] tensor already batched at level ", level);
  if (length >= 0) {
    const int64_t n = impl->pshape[pdim];
    if (start < 0 || start + length > n)
      throw_error<IndexError>("[add_batch_tag] range [", start, ", ", start + length,
                              ") out of range for dim ", d, " of shape ", src.shape());
    if (start < n) impl->offset += start * impl->pstrides[pdim];
    impl->pshape[pdim] = length;
  }
  impl->tags.push_back({level, pdim});
  std::sort(impl->tags.begin(), impl->tags.end(),
            [](const BatchTag& a, const BatchTag& b) { return a.level < b.level; });
  impl->sync_logical();
  return Tensor(std::move(impl));
}

Batched remove_batch_tag(const Tensor& t, int64_t level) {
  const TensorImpl& src = t.impl();
  auto it = std::find_if(src.tags.begin(), src.tags.end(),
                         [&](const BatchTag& bt) { return bt.level == level; });
  if (it == src.tags.end()) return {t, std::nullopt};
  auto impl = std::make_shared<TensorImpl>(src);
  int64_t pdim = it->pdim;
  impl->tags.erase(impl->tags.begin() + (it - src.tags.begin()));
  int64_t bdim = pdim;
  for (const auto& bt : impl->tags)
    if (bt.pdim < pdim) --bdim;
  impl->sync_logical();
  return {Tensor(std::move(impl)), bdim};
}

}  // namespace td
