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

namespace {

// BatchNorm's and InstanceNorm's state in torch's order: weight and bias when affine, the
// running statistics when tracked.
template <class Norm>
void register_norm_state(Norm& m, const char* cls, int64_t n) {
  if (n <= 0) throw_error<ValueError>("[", cls, "] num_features must be positive, got ", n);
  if (m.affine) {
    m.weight = m.register_parameter("weight", ones({n}));
    m.bias = m.register_parameter("bias", zeros({n}));
  }
  if (m.track_running_stats) {
    m.running_mean = m.register_buffer("running_mean", zeros({n}));
    m.running_var = m.register_buffer("running_var", ones({n}));
    m.num_batches_tracked = m.register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
}

}  // namespace

BatchNormBase::BatchNormBase(int64_t n, double e, std::optional<double> m, bool aff, bool track)
    : num_features(n), eps(e), momentum(m), affine(aff), track_running_stats(track) {
  register_norm_state(*this, "BatchNorm", n);
  register_method("forward", &BatchNormBase::forward, {"input"});
}

Tensor BatchNormBase::forward(const Tensor& input) { return normalize(input, false); }

Tensor BatchNormBase::forward_relu(const Tensor& input) { return normalize(input, true); }

Tensor BatchNormBase::normalize(const Tensor& input, bool relu) {
  auto norm = relu ? batch_norm_relu : batch_norm;
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
  if (momentum || !training || !track_running_stats)
    return norm(input, rm, rv, weight, bias, use_batch_stats, momentum.value_or(0.0), eps);
  // momentum None: factor 1 / num_batches_tracked, a tensor (per set under functional_vmap)
  const Tensor f = reciprocal(num_batches_tracked.get().to(rm.dtype()));
  IntList dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  if (input.numel() > input.size(1)) {  // batch_norm refuses one value per channel
    const Tensor m = mean(input, dims).to(rm.dtype());
    const Tensor v = var(input, dims, true).to(rv.dtype());
    const Tensor keep = add(neg(f), 1.0);
    copy_(rm, add(mul(rm, keep), mul(m, f)));
    copy_(rv, add(mul(rv, keep), mul(v, f)));
  }
  return norm(input, Tensor(), Tensor(), weight, bias, true, 0.0, eps);
}

std::string BatchNormBase::extra_repr() const {
  std::ostringstream os;
  os << num_features << ", eps=" << repr_double(eps)
     << ", momentum=" << (momentum ? repr_double(*momentum) : "None")
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

namespace td::nn {

GroupNorm::GroupNorm(int64_t g, int64_t c, double e, bool aff)
    : num_groups(g), num_channels(c), eps(e), affine(aff) {
  if (g <= 0 || c % g != 0)
    throw_error<ValueError>("[GroupNorm] num_channels (", c, ") must be divisible by num_groups (",
                            g, ")");
  if (affine) {
    weight = register_parameter("weight", ones({c}));
    bias = register_parameter("bias", zeros({c}));
  }
  register_method("forward", &GroupNorm::forward, {"input"});
}

Tensor GroupNorm::forward(const Tensor& input) {
  if (input.dim() >= 2 && input.size(1) != num_channels)
    throw_error<ValueError>("[GroupNorm] expected ", num_channels,
                            " channels at dim 1, got input of shape ", shape_str(input.shape()));
  return group_norm(input, num_groups, weight, bias, eps);
}

std::string GroupNorm::extra_repr() const {
  std::ostringstream os;
  os << num_groups << ", " << num_channels << ", eps=" << repr_double(eps)
     << ", affine=" << (affine ? "True" : "False");
  return os.str();
}

InstanceNormBase::InstanceNormBase(int64_t n, double e, double m, bool aff, bool track)
    : num_features(n), eps(e), momentum(m), affine(aff), track_running_stats(track) {
  register_norm_state(*this, "InstanceNorm", n);
  register_method("forward", &InstanceNormBase::forward, {"input"});
}

Tensor InstanceNormBase::forward(const Tensor& input) {
  const int64_t nb = unbatched_dim();
  if (input.dim() != nb && input.dim() != nb + 1)
    throw_error<ValueError>("[", type_name(), "] expected ", nb, "D or ", nb + 1,
                            "D input, got shape ", shape_str(input.shape()));
  const int64_t c = input.size(input.dim() - nb);
  // without affine or running stats the channel count does not matter (torch warns)
  if (c != num_features && (affine || track_running_stats))
    throw_error<ValueError>("[", type_name(), "] expected ", num_features,
                            " channels, got input of shape ", shape_str(input.shape()));
  const Tensor x = input.dim() == nb ? input.unsqueeze(0) : input;
  const bool use_input_stats = is_training() || !track_running_stats;
  Tensor rm = track_running_stats ? running_mean.get() : Tensor();
  Tensor rv = track_running_stats ? running_var.get() : Tensor();
  Tensor y = instance_norm(x, rm, rv, weight, bias, use_input_stats, momentum, eps);
  return input.dim() == nb ? y.squeeze(0) : y;
}

std::string InstanceNormBase::extra_repr() const {
  std::ostringstream os;
  os << num_features << ", eps=" << repr_double(eps) << ", momentum=" << repr_double(momentum)
     << ", affine=" << (affine ? "True" : "False")
     << ", track_running_stats=" << (track_running_stats ? "True" : "False");
  return os.str();
}

}  // namespace td::nn
