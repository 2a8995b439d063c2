// group_norm and instance_norm: layer_norm's kernel over the input viewed as [N, groups, rest]
// (statistics per row, bit-identical however vmap chunks the sets), then the per-channel affine.
#include <string>

#include "engine/ops.h"

namespace td {
namespace {

// y * weight + bias, both [C] along dim 1 of y.
Tensor channel_affine(const char* op, const Tensor& y, const Tensor& weight, const Tensor& bias) {
  const int64_t c = y.size(1);
  Shape s(y.dim(), 1);
  s[1] = c;
  Tensor out = y;
  for (const Tensor* t : {&weight, &bias}) {
    if (!t->defined()) continue;
    if (t->dim() != 1 || t->size(0) != c)
      throw_error<ValueError>("[", op, "] ", t == &weight ? "weight" : "bias", " must be [", c,
                              "] for input of ", shape_word(), " ", y.shape(), ", got ",
                              t->shape());
    out = t == &weight ? mul(out, t->reshape(s)) : add(out, t->reshape(s));
  }
  return out;
}

// x [N, C, *] normalised over each of `groups` equal blocks of channels (and *).
Tensor normalize_groups(const char* op, const Tensor& x, int64_t groups, double eps) {
  if (x.dim() < 2)
    throw_error<ValueError>("[", op, "] expects an input [N, C, *], got ", shape_word(), " ",
                            x.shape());
  const int64_t n = x.size(0), c = x.size(1);
  if (groups < 1 || c % groups != 0)
    throw_error<ValueError>("[", op, "] ", c, " channels of input of ", shape_word(), " ",
                            x.shape(), " do not split into ", groups, " groups");
  int64_t rest = c / groups;
  for (int64_t d = 2; d < x.dim(); ++d) rest *= x.size(d);
  if (rest == 0 || n == 0) return x.clone();
  return layer_norm(x.reshape({n, groups, rest}), {rest}, {}, {}, eps).reshape(x.shape());
}

}  // namespace

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return channel_affine("group_norm", normalize_groups("group_norm", x, num_groups, eps), weight,
                        bias);
}

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool use_input_stats,
                     double momentum, double eps) {
  if (x.dim() < 3)
    throw_error<ValueError>("[instance_norm] expects an input [N, C, *] with a spatial dim, got ",
                            shape_word(), " ", x.shape());
  const bool running = running_mean.defined() && running_var.defined();
  if (running_mean.defined() != running_var.defined())
    throw_error<ValueError>("[instance_norm] running_mean and running_var must both be given");
  const int64_t c = x.size(1);
  if (running && (running_mean.shape() != Shape{c} || running_var.shape() != Shape{c}))
    throw_error<ValueError>("[instance_norm] running_mean and running_var must be [", c,
                            "] for input of ", shape_word(), " ", x.shape(), ", got ",
                            running_mean.shape(), " and ", running_var.shape());
  if (!use_input_stats) {
    if (!running)
      throw_error<ValueError>(
          "[instance_norm] use_input_stats=false needs running_mean and running_var");
    return batch_norm(x, running_mean, running_var, weight, bias, false, momentum, eps);
  }
  Tensor y = normalize_groups("instance_norm", x, c, eps);
  if (running && x.size(0) > 0) {
    // as torch: the batch's mean of each instance's mean and unbiased variance
    IntList spatial;
    for (int64_t d = 2; d < x.dim(); ++d) spatial.push_back(d);
    const Tensor m = mean(mean(x, spatial), 0).to(running_mean.dtype());
    const Tensor v = mean(var(x, spatial, true), 0).to(running_var.dtype());
    copy_(running_mean, add(mul(running_mean, 1 - momentum), mul(m, momentum)));
    copy_(running_var, add(mul(running_var, 1 - momentum), mul(v, momentum)));
  }
  return channel_affine("instance_norm", y, weight, bias);
}

}  // namespace td
