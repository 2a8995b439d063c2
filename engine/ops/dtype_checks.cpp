// The dtype checks ops share: a floating input, operands of one dtype.
#include "engine/ops/impls.h"

namespace td {

void impl::check_floating(const char* op, const Shape& x, DType t, const char* what) {
  if (!is_floating(t))
    throw_error<TypeError>("[", op, "] expects a floating point input, got ", t, " of ", what, " ",
                           x);
}

void impl::check_floating(const char* op, const Tensor& x) {
  check_floating(op, x.shape(), x.dtype(), shape_word());
}

void impl::check_same_dtype(const char* op, const Tensor& x, const Tensor& t, const char* what) {
  if (t.defined() && t.dtype() != x.dtype())
    throw_error<TypeError>("[", op, "] ", what, " has dtype ", t.dtype(), " but input has ",
                           x.dtype());
}

}  // namespace td
