#pragma once
// Shapes, strides and dim arithmetic shared by every op.
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "engine/small_vector.h"

namespace td {

// Six dims inline cover a conv input under two vmap levels; longer shapes spill to the heap.
// Converts to and from std::vector<int64_t> implicitly.
using Shape = SmallVector<int64_t, 6>;
using Strides = Shape;
using IntList = Shape;

// One dim given as an integer, as in PyTorch (x.sum(1), sum(x, -1)). Overloads taking it are
// templates, so braces still mean a list of dims ({} all dims, {1} dim 1).
template <class I>
concept SingleDim = std::integral<I> && !std::same_as<I, bool>;

std::ostream& operator<<(std::ostream& os, const Shape& s);  // [4, 10, 1]
std::string shape_str(const Shape& s);

int64_t shape_numel(const Shape& s);
Strides contiguous_strides(const Shape& s);
// Wraps a possibly negative dim into [0, ndim); IndexError naming op otherwise.
// Inline: every size(d), view and rule asks; only the error is out of line.
[[noreturn]] void throw_dim_out_of_range(const char* op, int64_t dim, int64_t ndim);
inline int64_t normalize_dim(const char* op, int64_t dim, int64_t ndim) {
  const int64_t n = ndim == 0 ? 1 : ndim;  // a 0-d tensor accepts dim 0 and -1, as in PyTorch
  if (dim < -n || dim >= n) throw_dim_out_of_range(op, dim, ndim);
  return dim < 0 ? dim + n : dim;
}
// As normalize_dim for an insertion position (unsqueeze): range [0, ndim].
int64_t normalize_insert_dim(const char* op, int64_t dim, int64_t ndim);
// NumPy broadcasting; ValueError naming op and both shapes (`what`: "per-set shapes" in vmap's
// rules) when they do not broadcast.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b, const char* what = nullptr);
// The product of s multiplied in order, as PyTorch does (an overflow before a 0 dim counts), or
// nullopt when it overflows int64.
std::optional<int64_t> checked_product(const Shape& s);
// checked_product, or a ValueError naming op and s when it overflows.
int64_t checked_numel(const char* op, const Shape& s);
// Rejects negative sizes and an overflowing element count with a ValueError naming op.
void check_sizes(const char* op, const Shape& s);
// requested (view, reshape) with its one -1 resolved for numel elements; ValueError naming op
// when the sizes are negative, overflow or do not hold numel elements.
Shape infer_size(const char* op, const Shape& requested, int64_t numel);

// x[start:end:step] over a dim of n elements (step > 0): start and end clamped into [0, n] as in
// Python (negative from the end), end >= start, and the length, without overflow for any input.
struct SliceRange {
  int64_t start, end, length;
};
SliceRange slice_range(int64_t n, int64_t start, int64_t end, int64_t step);

}  // namespace td
