#include "modules/normalization.h"

#include <sstream>

#include "engine/ops.h"

namespace td::nn {

LayerNorm::LayerNorm(Shape shape, double e, bool affine)
    : normalized_shape(std::move(shape)), eps(e), elementwise_affine(affine) {
  check_sizes("LayerNorm", normalized_shape);
  if (elementwise_affine) {
    weight = register_parameter("weight", ones(normalized_shape));
    bias = register_parameter("bias", zeros(normalized_shape));
  }
  register_method("forward", &LayerNorm::forward, {"input"});
}

Tensor LayerNorm::forward(const Tensor& input) {
  return layer_norm(input, normalized_shape, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < normalized_shape.size(); ++i) os << (i ? ", " : "") << normalized_shape[i];
  os << (normalized_shape.size() == 1 ? ",)" : ")") << ", eps=" << repr_double(eps)
     << ", elementwise_affine=" << (elementwise_affine ? "True" : "False");
  return os.str();
}

BatchNormBase::BatchNormBase(int64_t n, double e, double m, bool aff, bool track)
    : num_features(n), eps(e), momentum(m), affine(aff), track_running_stats(track) {
  if (n <= 0) throw_error<ValueError>("[BatchNorm] num_features must be positive, got ", n);
  if (affine) {
    weight = register_parameter("weight", ones({n}));
    bias = register_parameter("bias", zeros({n}));
  }
  if (track) {
    running_mean = register_buffer("running_mean", zeros({n}));
    running_var = register_buffer("running_var", ones({n}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
  register_method("forward", &BatchNormBase::forward, {"input"});
}

Tensor BatchNormBase::forward(const Tensor& input) {
  check_input_dim(input);
  if (input.size(1) != num_features)
    throw_error<ValueError>("[", type_name(), "] expected ", num_features,
                            " channels at dim 1, got input of shape ", shape_str(input.shape()));
  bool training = is_training();
  if (training && track_running_stats) {
    // Writes into whatever tensor is in effect (an override's slice under functional_vmap).
    Tensor n = num_batches_tracked;
    add_(n, scalar_tensor(1, kInt64));
  }
  // Without running stats, batch statistics are used in eval too.
  bool use_batch_stats = training || !track_running_stats;
  Tensor rm = track_running_stats ? running_mean.get() : Tensor();
  Tensor rv = track_running_stats ? running_var.get() : Tensor();
  return batch_norm(input, rm, rv, weight, bias, use_batch_stats, momentum, eps);
}

std::string BatchNormBase::extra_repr() const {
  std::ostringstream os;
  os << num_features << ", eps=" << repr_double(eps) << ", momentum=" << repr_double(momentum)
     << ", affine=" << (affine ? "True" : "False")
     << ", track_running_stats=" << (track_running_stats ? "True" : "False");
  return os.str();
}

void BatchNorm1d::check_input_dim(const Tensor& input) const {
  if (input.dim() != 2 && input.dim() != 3)
    throw_error<ValueError>("[BatchNorm1d] expected 2D or 3D input, got shape ",
                            shape_str(input.shape()));
}

void BatchNorm2d::check_input_dim(const Tensor& input) const {
  if (input.dim() != 4)
    throw_error<ValueError>("[BatchNorm2d] expected 4D input, got shape ",
                            shape_str(input.shape()));
}

}  // namespace td::nn
