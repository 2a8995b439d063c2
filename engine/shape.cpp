#include "engine/shape.h"

#include <algorithm>
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

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b, const char* what) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw_error<ValueError>("[", op, "] ", what ? what : shapes_word(), " ", a, " and ", b,
                              " do not broadcast (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::optional<int64_t> checked_product(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) {
    if (d == 0) return 0;
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

[[noreturn]] static void throw_too_many(const char* op, const Shape& s) {
  throw_error<ValueError>("[", op, "] shape ", s, " has too many elements (overflows int64)");
}

int64_t checked_numel(const char* op, const Shape& s) {
  const auto n = checked_product(s);
  if (!n) throw_too_many(op, s);
  return *n;
}

void check_sizes(const char* op, const Shape& s) {
  for (auto d : s)
    if (d < 0) throw_error<ValueError>("[", op, "] negative size in shape ", s);
  checked_numel(op, s);
}

Shape infer_size(const char* op, const Shape& requested, int64_t numel) {
  Shape s = requested;
  int64_t infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer >= 0) throw_error<ValueError>("[", op, "] only one dim can be -1, got ", requested);
      infer = static_cast<int64_t>(i);
      s[i] = 1;  // counts as 1 in the known product
    } else if (s[i] < 0) {
      throw_error<ValueError>("[", op, "] negative size in shape ", requested);
    }
  }
  const auto product = checked_product(s);
  if (!product) throw_too_many(op, requested);
  const int64_t known = *product;
  if (infer >= 0 ? known == 0 || numel % known != 0 : known != numel)
    throw_error<ValueError>("[", op, "] shape ", requested, " is invalid for input of ", numel,
                            " elements");
  if (infer >= 0) s[infer] = numel / known;
  return s;
}

SliceRange slice_range(int64_t n, int64_t start, int64_t end, int64_t step) {
  auto clampi = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  const int64_t s = clampi(start), e = std::max(clampi(end), s);
  // not (e - s + step - 1) / step, which overflows for a huge step
  return {s, e, e == s ? 0 : (e - s - 1) / step + 1};
}

}  // namespace td
