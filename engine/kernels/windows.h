#pragma once
// Where a sliding window's taps fall inside its input row: shared by the conv and pool kernels.
// For the kernel files only (TD_ISA names the level they are compiled for).
#include <algorithm>
#include <cstdint>
#include <utility>

namespace td::kernels::TD_ISA {
namespace {

// Output columns [lo, hi) whose input column ox*s - p + off lies inside [0, w).
inline std::pair<int64_t, int64_t> valid_range(int64_t out, int64_t s, int64_t p, int64_t off,
                                               int64_t w) {
  const int64_t first = off - p;  // input index at output 0
  int64_t lo = first >= 0 ? 0 : (-first + s - 1) / s;
  int64_t hi = first >= w ? 0 : (w - 1 - first) / s + 1;
  lo = std::min(lo, out);
  hi = std::max(std::min(hi, out), lo);
  return {lo, hi};
}

}  // namespace
}  // namespace td::kernels::TD_ISA
