// The norms: layer_norm and batch_norm (argument checks, then the kernels of norm.cpp in
// engine/kernels/), and the shape checks their vmap rules share.
#include <algorithm>
#include <cstring>

#include "engine/kernels/kernels.h"
#include "engine/ops.h"
#include "engine/ops/impls.h"
#include "engine/ops/nn_args.h"

namespace td {
namespace impl {
namespace {

// An optional input's shape for the shared shape checks (null when absent).
const Shape* shape_or_null(const Tensor& t) { return t.defined() ? &t.shape() : nullptr; }

// Writes vals (cast to t's dtype) into t in place, whatever t's strides.
void write_values(const Tensor& t, const std::vector<double>& vals) {
  Tensor src = Tensor::empty({static_cast<int64_t>(vals.size())}, DType::Float64);
  if (!vals.empty()) std::memcpy(src.data<double>(), vals.data(), vals.size() * sizeof(double));
  kernels::copy_into(src, t);
}

}  // namespace

void check_channels(const char* op, const char* what, const Shape* t, int64_t c, const char* kind,
                    const Shape& xs) {
  if (t && (t->size() != 1 || (*t)[0] != c))
    throw_error<ValueError>("[", op, "] ", what, " of ", kind, " ", *t, " does not match input of ",
                            kind, " ", xs, " (expected [", c, "])");
}

void check_batch_norm(const char* kind, const Shape& x, const Shape* rm, const Shape* rv,
                      const Shape* w, const Shape* b, bool training) {
  if (x.size() < 2)
    throw_error<ValueError>("[batch_norm] expects an input [N, C, *] of at least 2 dims, got ",
                            kind, " ", x);
  check_channels("batch_norm", "running_mean", rm, x[1], kind, x);
  check_channels("batch_norm", "running_var", rv, x[1], kind, x);
  check_channels("batch_norm", "weight", w, x[1], kind, x);
  check_channels("batch_norm", "bias", b, x[1], kind, x);
  // as torch: an empty batch passes (empty output, running stats unchanged); one value does not
  const bool one_value =
      x[0] == 1 && std::all_of(x.begin() + 2, x.end(), [](int64_t d) { return d == 1; });
  if (training && one_value)
    throw_error<ValueError>(
        "[batch_norm] expected more than 1 value per channel when training, got input of ", kind,
        " ", x);
}

void check_layer_norm(const char* what, const Shape& x, const Shape& ns, const Shape* w,
                      const Shape* b) {
  if (ns.empty())
    throw_error<ValueError>("[layer_norm] normalized_shape must have at least one dim");
  const size_t nd = ns.size();
  if (x.size() < nd || !std::equal(ns.begin(), ns.end(), x.end() - nd))
    throw_error<ValueError>("[layer_norm] input of ", what, " ", x,
                            " does not end with normalized_shape ", ns);
  for (const Shape* t : {w, b})
    if (t && *t != ns)
      throw_error<ValueError>("[layer_norm] ", t == w ? "weight" : "bias", " of ", what, " ", *t,
                              " does not match normalized_shape ", ns);
}

std::vector<Tensor> layer_norm_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<LayerNormAttrs>(OpId::layer_norm, attrs);
  const Tensor& x = in[0];
  const Tensor w = opt_input(in, 1), b = opt_input(in, 2);
  const Shape& ns = a.normalized_shape;
  check_floating("layer_norm", x);
  check_same_dtype("layer_norm", x, w, "weight");
  check_same_dtype("layer_norm", x, b, "bias");
  // per_set_affine (vmap's rule with per-set weights): x [a.sets, ...], w and b [a.sets, *ns],
  // each set's rows with its own, so a set's bits are those of its call alone
  const bool stacked = a.per_set_affine;
  const int64_t sets = stacked ? a.sets : 1;
  Shape stacked_ns = ns;
  stacked_ns.insert(stacked_ns.begin(), sets);
  for (const Tensor* t : {&w, &b})
    if (stacked && t->defined() && t->shape() != stacked_ns)
      throw_error<ValueError>("[layer_norm] weight or bias of ", shape_word(), " ", t->shape(),
                              " is not one per set (", stacked_ns, ")");
  check_layer_norm(shape_word(), x.shape(), ns, stacked ? nullptr : shape_or_null(w),
                   stacked ? nullptr : shape_or_null(b));
  if (stacked && (x.dim() == 0 || x.size(0) != sets))
    throw_error<ValueError>("[layer_norm] input of ", shape_word(), " ", x.shape(), " is not ",
                            sets, " sets");
  const int64_t d = shape_numel(ns);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  count_kernel(KernelKind::Other);
  if (out.numel() == 0) return {out};
  const int64_t rows = x.numel() / d;
  std::vector<double> wv = values_or(w.defined() ? w.reshape({-1}) : w, sets * d, 1.0);
  std::vector<double> bv = values_or(b.defined() ? b.reshape({-1}) : b, sets * d, 0.0);
  Tensor xc = x.contiguous();
  if (x.dtype() == DType::Float32)
    kernels::layer_norm_rows(xc.data<float>(), out.data<float>(), rows, d, wv.data(), bv.data(),
                             a.eps, rows / sets);
  else
    kernels::layer_norm_rows(xc.data<double>(), out.data<double>(), rows, d, wv.data(), bv.data(),
                             a.eps, rows / sets);
  return {out};
}

std::vector<Tensor> batch_norm_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<BatchNormAttrs>(OpId::batch_norm, attrs);
  const Tensor& x = in[0];
  const Tensor rm = opt_input(in, 1), rv = opt_input(in, 2);
  const Tensor w = opt_input(in, 3), b = opt_input(in, 4);
  const bool training = a.training;
  const double momentum = a.momentum, eps = a.eps;
  check_batch_norm(shape_word(), x.shape(), shape_or_null(rm), shape_or_null(rv), shape_or_null(w),
                   shape_or_null(b), training);
  check_floating("batch_norm", x);
  const int64_t c = x.size(1);
  check_same_dtype("batch_norm", x, w, "weight");
  check_same_dtype("batch_norm", x, b, "bias");
  check_same_dtype("batch_norm", x, rm, "running_mean");
  check_same_dtype("batch_norm", x, rv, "running_var");
  if (!training && (!rm.defined() || !rv.defined()))
    throw_error<ValueError>("[batch_norm] running_mean and running_var must be given in eval mode");
  if (rm.defined() != rv.defined())
    throw_error<ValueError>("[batch_norm] give both running_mean and running_var or neither");
  const int64_t n = x.size(0);
  const int64_t s = x.dim() > 2 ? shape_numel(Shape(x.shape().begin() + 2, x.shape().end())) : 1;
  const int64_t per_channel = n * s;
  std::vector<double> mean(c), var(c);
  if (!training) {
    mean = rm.to_vector<double>();
    var = rv.to_vector<double>();
  }
  std::vector<double> wv = values_or(w, c, 1.0), bv = values_or(b, c, 0.0);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  count_kernel(KernelKind::Other);
  Tensor xc = x.contiguous();
  if (out.numel() > 0) {
    if (x.dtype() == DType::Float32)
      kernels::batch_norm_channels(xc.data<float>(), out.data<float>(), n, c, s, training,
                                   mean.data(), var.data(), wv.data(), bv.data(), eps,
                                   a.fused_relu);
    else
      kernels::batch_norm_channels(xc.data<double>(), out.data<double>(), n, c, s, training,
                                   mean.data(), var.data(), wv.data(), bv.data(), eps,
                                   a.fused_relu);
  }
  if (training && rm.defined() && per_channel > 0) {
    // PyTorch: running stats take the unbiased batch variance.
    std::vector<double> old_m = rm.to_vector<double>(), old_v = rv.to_vector<double>();
    const double unbias = static_cast<double>(per_channel) / static_cast<double>(per_channel - 1);
    for (int64_t ch = 0; ch < c; ++ch) {
      old_m[ch] = (1 - momentum) * old_m[ch] + momentum * mean[ch];
      old_v[ch] = (1 - momentum) * old_v[ch] + momentum * var[ch] * unbias;
    }
    write_values(rm, old_m);
    write_values(rv, old_v);
  }
  return {out};
}

}  // namespace impl

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  return call_op1(OpId::layer_norm, {x, weight, bias},
                  LayerNormAttrs{.normalized_shape = normalized_shape, .eps = eps});
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  const BatchNormAttrs a{.training = training, .momentum = momentum, .eps = eps};
  return call_op1(OpId::batch_norm, {x, running_mean, running_var, weight, bias}, a);
}

Tensor batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training, double momentum,
                       double eps) {
  const BatchNormAttrs a{
      .training = training, .momentum = momentum, .eps = eps, .fused_relu = true};
  return call_op1(OpId::batch_norm, {x, running_mean, running_var, weight, bias}, a);
}

}  // namespace td
