#pragma once
// vmap levels and batch tags: the engine side of batching. The engine knows levels exist and
// how to tag and untag tensors; vmap/ decides when.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "engine/dispatch.h"
#include "engine/tensor.h"

namespace td {

Randomness parse_randomness(std::string_view s);  // "error" | "different" | "same"; ValueError

struct VmapLevel {
  // unique for the life of the process, so a tensor tagged by a finished vmap is never taken
  // for one batched at a later level; an inner level has a larger id than its outer ones
  int64_t level;
  int64_t batch_size;  // sets computed in this call (a chunk's size when chunked)
  Randomness randomness;
  int64_t set_offset;  // global index of this call's set 0 (chunking keeps draws per set)
};

// Pushes a level on this thread's stack for its lifetime.
class VmapLevelScope {
 public:
  VmapLevelScope(int64_t batch_size, Randomness randomness, int64_t set_offset = 0);
  ~VmapLevelScope();
  VmapLevelScope(const VmapLevelScope&) = delete;
  VmapLevelScope& operator=(const VmapLevelScope&) = delete;
  int64_t level() const { return level_; }

 private:
  int64_t level_;
};

// Levels visible to ops now: while a rule runs at level L, levels >= L are hidden.
std::span<const VmapLevel> active_levels();
bool in_vmap();  // any level on this thread's stack, visible or hidden
const VmapLevel* find_level(int64_t level);  // nullptr if not visible

// Hides levels >= level for its lifetime (dispatch uses it around a rule).
class HideLevelsScope {
 public:
  explicit HideLevelsScope(int64_t level);
  ~HideLevelsScope();

 private:
  size_t saved_;
};

// Makes levels <= level visible again for its lifetime: a rule that decomposes an op into other
// ops re-tags its inputs at its level and runs the composite with the level visible.
class ShowLevelsScope {
 public:
  explicit ShowLevelsScope(int64_t level);
  ~ShowLevelsScope();

 private:
  size_t saved_;
};

// Tags logical dim `dim` of t as the batch dim of `level` (t must carry only lower levels).
// With a length >= 0, only [start, start + length) of that dim, as one view: vmap's chunks of
// an input, without a narrow op per leaf and chunk.
Tensor add_batch_tag(const Tensor& t, int64_t level, int64_t dim, int64_t start = 0,
                     int64_t length = -1);
// Removes level's tag; the returned bdim is that dim's position among value's logical dims.
Batched remove_batch_tag(const Tensor& t, int64_t level);

}  // namespace td
