#pragma once
// Element-wise activations and (log-)softmax, with PyTorch's names and arguments.
#include <string>

#include "modules/module.h"

namespace td::nn {

class ReLU : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(ReLU); }
  ReLU();
  Tensor forward(const Tensor& input);
};

// approximate: "none" (erf) or "tanh" (ValueError otherwise).
class GELU : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(GELU); }
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& input);
  std::string approximate;

 protected:
  std::string extra_repr() const override { return "approximate='" + approximate + "'"; }
};

class Tanh : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Tanh); }
  Tanh();
  Tensor forward(const Tensor& input);
};

class Sigmoid : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Sigmoid); }
  Sigmoid();
  Tensor forward(const Tensor& input);
};

class Softmax : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Softmax); }
  explicit Softmax(int64_t dim);
  Tensor forward(const Tensor& input);
  int64_t dim;

 protected:
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
};

class LogSoftmax : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(LogSoftmax); }
  explicit LogSoftmax(int64_t dim);
  Tensor forward(const Tensor& input);
  int64_t dim;

 protected:
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
};

// Flattens dims start_dim..end_dim.
class Flatten : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Flatten); }
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  Tensor forward(const Tensor& input);
  int64_t start_dim, end_dim;

 protected:
  std::string extra_repr() const override;
};

}  // namespace td::nn
