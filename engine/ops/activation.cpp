// The public functions of the activations with scalar arguments (their _impl are in
// elementwise.cpp), and glu and prelu, composed of ops that batch natively.
#include <string>

#include "engine/ops.h"
#include "engine/ops/checks.h"
#include "engine/ops/impls.h"

namespace td {

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return call_op1(OpId::leaky_relu, {x}, ActivationAttrs{.negative_slope = negative_slope});
}
Tensor elu(const Tensor& x, double alpha) {
  return call_op1(OpId::elu, {x}, ActivationAttrs{.alpha = alpha});
}
Tensor celu(const Tensor& x, double alpha) {
  return call_op1(OpId::celu, {x}, ActivationAttrs{.alpha = alpha});
}
Tensor softplus(const Tensor& x, double beta, double threshold) {
  return call_op1(OpId::softplus, {x}, ActivationAttrs{.beta = beta, .threshold = threshold});
}
// x raised to min_val, then lowered to max_val: all max_val when max_val < min_val, as torch
Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  return call_op1(OpId::hardtanh, {x}, ActivationAttrs{.min_val = min_val, .max_val = max_val});
}

Tensor glu(const Tensor& x, int64_t dim) {
  if (x.dim() == 0)
    throw_error<ValueError>("[glu] does not take a 0-d input: the halved dim must have an even size");
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  if (d < 0 || d >= x.dim())
    throw_error<IndexError>("[glu] dim ", dim, " is out of range for an input of shape ",
                            shape_str(x.shape()));
  if (x.size(d) % 2 != 0)
    throw_error<ValueError>("[glu] the halved dim must have an even size, but dim ", d,
                            " of the input of shape ", shape_str(x.shape()), " has size ",
                            x.size(d));
  impl::check_floating("glu", x);
  std::vector<Tensor> halves = split(x, x.size(d) / 2, d);
  return mul(halves[0], sigmoid(halves[1]));
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  if (x.dim() == 0)
    throw_error<ValueError>("[prelu] does not take a 0-d input (weight of shape ",
                            shape_str(weight.shape()), ")");
  impl::check_floating("prelu", x);
  if (weight.dtype() != x.dtype())
    throw_error<TypeError>("[prelu] weight has dtype ", dtype_name(weight.dtype()),
                           " but input has ", dtype_name(x.dtype()));
  // torch 1.13's channel dim is 1; a 1-D input has one channel
  const int64_t channels = x.dim() >= 2 ? x.size(1) : 1;
  const int64_t n = weight.numel();
  if (weight.dim() > 1 || (n != 1 && n != channels))
    throw_error<ValueError>("[prelu] weight of shape ", shape_str(weight.shape()),
                            " does not match the input of shape ", shape_str(x.shape()),
                            ": it needs 1 parameter or one per channel (", channels, ")");
  Shape per_channel(static_cast<size_t>(x.dim() >= 2 ? x.dim() - 1 : 0), 1);
  if (!per_channel.empty()) per_channel[0] = n;
  Tensor w = weight.reshape(n == 1 ? Shape{} : per_channel);
  return where(gt(x, 0), x, mul(x, w));
}

}  // namespace td
