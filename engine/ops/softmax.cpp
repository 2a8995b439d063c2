// softmax and log_softmax along one dim (the kernel of softmax.cpp in engine/kernels/).
#include "engine/kernels/kernels.h"
#include "engine/ops.h"
#include "engine/ops/impls.h"

namespace td {
namespace impl {
namespace {

std::vector<Tensor> run_softmax(const char* op, std::span<const Tensor> in, int64_t attr_dim,
                                bool log) {
  if (in.size() != 1 || !in[0].defined())
    throw_error<ValueError>("[", op, "] expected one defined input tensor");
  const Tensor& x = in[0];
  check_floating(op, x.shape(), x.dtype(), shape_word());
  int64_t dim = normalize_dim(op, attr_dim, x.dim());
  if (x.dim() == 0) return {kernels::softmax(x.reshape({1}), 0, log).reshape({})};
  return {kernels::softmax(x, dim, log)};
}

}  // namespace

std::vector<Tensor> softmax_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return run_softmax("softmax", in, attrs_as<DimAttrs>(OpId::softmax, attrs).dim, false);
}
std::vector<Tensor> log_softmax_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return run_softmax("log_softmax", in, attrs_as<DimAttrs>(OpId::log_softmax, attrs).dim, true);
}

}  // namespace impl

Tensor softmax(const Tensor& x, int64_t dim) {
  return call_op1(OpId::softmax, {x}, DimAttrs{.dim = dim});
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return call_op1(OpId::log_softmax, {x}, DimAttrs{.dim = dim});
}

}  // namespace td
