#pragma once
// LayerNorm, BatchNorm1d/2d, GroupNorm and InstanceNorm1d/2d.
#include <optional>

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
// num_batches_tracked (int64, incremented in training) when track_running_stats. momentum
// nullopt (torch's None): the running stats are the cumulative average over the batches tracked.
class BatchNormBase : public Module {
 public:
  Tensor forward(const Tensor& input);
  // relu(forward(input)), in one pass over the output (Sequential's BatchNorm + ReLU).
  Tensor forward_relu(const Tensor& input);

  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;
  Param weight, bias, running_mean, running_var, num_batches_tracked;

 protected:
  BatchNormBase(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                bool track_running_stats);
  // ValueError unless the input has a dim this module accepts.
  virtual void check_input_dim(const Tensor& input) const = 0;
  std::string extra_repr() const override;

 private:
  Tensor normalize(const Tensor& input, bool relu);
};

// Input [N, C] or [N, C, L].
class BatchNorm1d : public BatchNormBase {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(BatchNorm1d); }
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNormBase(num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input_dim(const Tensor& input) const override;
};

// Input [N, C, H, W].
class BatchNorm2d : public BatchNormBase {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(BatchNorm2d); }
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNormBase(num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input_dim(const Tensor& input) const override;
};

// Normalises each of num_groups blocks of channels of [N, C, *]; weight ones, bias zeros [C].
class GroupNorm : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(GroupNorm); }
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& input);

  int64_t num_groups, num_channels;
  double eps;
  bool affine;
  Param weight, bias;

 protected:
  std::string extra_repr() const override;
};

// Shared by InstanceNorm1d and InstanceNorm2d: per sample and channel statistics (an unbatched
// input too). With track_running_stats, buffers running_mean, running_var and
// num_batches_tracked (kept for torch's state dict; torch does not count it either), updated in
// training and used in eval.
class InstanceNormBase : public Module {
 public:
  Tensor forward(const Tensor& input);

  int64_t num_features;
  double eps, momentum;
  bool affine, track_running_stats;
  Param weight, bias, running_mean, running_var, num_batches_tracked;

 protected:
  InstanceNormBase(int64_t num_features, double eps, double momentum, bool affine,
                   bool track_running_stats);
  virtual int64_t unbatched_dim() const = 0;  // 2 for 1d, 3 for 2d
  std::string extra_repr() const override;
};

// Input [N, C, L] or [C, L].
class InstanceNorm1d : public InstanceNormBase {
 public:
  const std::type_info* concurrent_forward_class() const override {
    return &typeid(InstanceNorm1d);
  }
  explicit InstanceNorm1d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                          bool affine = false, bool track_running_stats = false)
      : InstanceNormBase(num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  int64_t unbatched_dim() const override { return 2; }
};

// Input [N, C, H, W] or [C, H, W].
class InstanceNorm2d : public InstanceNormBase {
 public:
  const std::type_info* concurrent_forward_class() const override {
    return &typeid(InstanceNorm2d);
  }
  explicit InstanceNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                          bool affine = false, bool track_running_stats = false)
      : InstanceNormBase(num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  int64_t unbatched_dim() const override { return 3; }
};

}  // namespace td::nn
