#pragma once
// The argument helpers the nn op files (norm, conv, pool) share.
#include <array>
#include <span>
#include <vector>

#include "engine/ops.h"

namespace td::impl {

// Input i, or an undefined tensor when the op was given fewer.
inline Tensor opt_input(std::span<const Tensor> in, size_t i) {
  return i < in.size() ? in[i] : Tensor();
}

// Values of a 1-D tensor as doubles (fill when undefined).
inline std::vector<double> values_or(const Tensor& t, int64_t n, double fill) {
  if (!t.defined()) return std::vector<double>(n, fill);
  return t.to_vector<double>();
}

// A 2-int parameter given as one or two values.
inline std::array<int64_t, 2> pair_param(const char* op, const char* what, const IntList& v,
                                         int64_t min) {
  if (v.size() != 1 && v.size() != 2)
    throw_error<ValueError>("[", op, "] ", what, " must have 1 or 2 values, got ", v);
  std::array<int64_t, 2> p{v[0], v.size() == 2 ? v[1] : v[0]};
  if (p[0] < min || p[1] < min)
    throw_error<ValueError>("[", op, "] ", what, " must be >= ", min, ", got ", v);
  return p;
}

// h + 2 pad - dil (k - 1) - 1 for a window of k >= 1 taps dil apart over an extent h padded on
// both sides: the room its last start has (negative: it does not fit); ValueError naming op and
// the input shape x when the sizes overflow int64.
inline int64_t window_room(const char* op, const Shape& x, int64_t h, int64_t pad, int64_t k,
                           int64_t dil) {
  int64_t padded, span;
  if (__builtin_mul_overflow(pad, 2, &padded) || __builtin_add_overflow(padded, h, &padded) ||
      __builtin_mul_overflow(dil, k - 1, &span))
    throw_error<ValueError>("[", op, "] padding ", pad, ", kernel size ", k, " and dilation ", dil,
                            " overflow int64 for input of ", shape_word(), " ", x);
  return padded - span - 1;
}

// conv and pool accept [N, C, H, W] and unbatched [C, H, W].
inline Tensor as_4d(const char* op, const Tensor& x) {
  if (x.dim() == 4) return x;
  if (x.dim() == 3) return x.unsqueeze(0);
  throw_error<ValueError>("[", op, "] expects a 3-D or 4-D input, got ", shape_word(), " ",
                          x.shape());
}

}  // namespace td::impl
