#include "engine/shape.h"

#include <ostream>
#include <sstream>

#include "engine/errors.h"

namespace td {

std::ostream& operator<<(std::ostream& os, const Shape& s) {
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  return os << ']';
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  bool overflow = false;
  for (auto d : s) {
    if (d == 0) return 0;
    overflow |= __builtin_mul_overflow(n, d, &n);
  }
  if (overflow)
    throw_error<ValueError>("[numel] shape ", s, " has too many elements (overflows int64)");
  return n;
}

Strides contiguous_strides(const Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    // wraps (unsigned, so defined) only for an empty tensor with huge other dims, such as
    // [0, 2^62, 4]: check_sizes refuses an overflowing element count otherwise; PyTorch's
    // strides wrap there too
    acc = static_cast<int64_t>(static_cast<uint64_t>(acc) *
                               static_cast<uint64_t>(s[i] > 1 ? s[i] : 1));
  }
  return st;
}

void throw_dim_out_of_range(const char* op, int64_t dim, int64_t ndim) {
  const int64_t n = ndim == 0 ? 1 : ndim;
  throw_error<IndexError>("[", op, "] dim ", dim, " out of range for a tensor of ", ndim,
                          " dims (expected -", n, " <= dim < ", n, ")");
}

int64_t normalize_insert_dim(const char* op, int64_t dim, int64_t ndim) {
  if (dim < -(ndim + 1) || dim > ndim)
    throw_error<IndexError>("[", op, "] dim ", dim, " out of range for inserting into a tensor of ",
                            ndim, " dims (expected ", -(ndim + 1), " <= dim <= ", ndim, ")");
  return dim < 0 ? dim + ndim + 1 : dim;
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw_error<ValueError>("[", op, "] shapes ", a, " and ", b, " do not broadcast (dim ", i,
                              ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

void check_sizes(const char* op, const Shape& s) {
  for (auto d : s)
    if (d < 0) throw_error<ValueError>("[", op, "] negative size in shape ", s);
  int64_t n = 1;
  for (auto d : s) {
    if (d == 0) return;
    if (__builtin_mul_overflow(n, d, &n))
      throw_error<ValueError>("[", op, "] shape ", s, " has too many elements (overflows int64)");
  }
}

}  // namespace td
