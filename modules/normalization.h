#pragma once
// LayerNorm and BatchNorm1d/2d.
#include "modules/module.h"

namespace td::nn {

// Normalises over the trailing normalized_shape dims; weight ones, bias zeros.
class LayerNorm : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(LayerNorm); }
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNorm(int64_t normalized_shape, double eps = 1e-5, bool elementwise_affine = true)
      : LayerNorm(Shape{normalized_shape}, eps, elementwise_affine) {}
  Tensor forward(const Tensor& input);

  Shape normalized_shape;
  double eps;
  bool elementwise_affine;
  Param weight, bias;

 protected:
  std::string extra_repr() const override;
};

// Shared by BatchNorm1d and BatchNorm2d. Buffers running_mean, running_var (float) and
// num_batches_tracked (int64, incremented in training) when track_running_stats.
class BatchNormBase : public Module {
 public:
  Tensor forward(const Tensor& input);

  int64_t num_features;
  double eps, momentum;
  bool affine, track_running_stats;
  Param weight, bias, running_mean, running_var, num_batches_tracked;

 protected:
  BatchNormBase(int64_t num_features, double eps, double momentum, bool affine,
                bool track_running_stats);
  // ValueError unless the input has a dim this module accepts.
  virtual void check_input_dim(const Tensor& input) const = 0;
  std::string extra_repr() const override;
};

// Input [N, C] or [N, C, L].
class BatchNorm1d : public BatchNormBase {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(BatchNorm1d); }
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNormBase(num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input_dim(const Tensor& input) const override;
};

// Input [N, C, H, W].
class BatchNorm2d : public BatchNormBase {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(BatchNorm2d); }
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNormBase(num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input_dim(const Tensor& input) const override;
};

}  // namespace td::nn
