#pragma once
// Element-wise activations (PReLU with its weight), (log-)softmax and Flatten, with PyTorch's names
// and arguments.
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

// Splits dim into unflattened_size (one entry may be -1).
class Unflatten : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Unflatten); }
  Unflatten(int64_t dim, Shape unflattened_size);
  Tensor forward(const Tensor& input);
  int64_t dim;
  Shape unflattened_size;

 protected:
  std::string extra_repr() const override;
};

// The activations below take torch's `inplace` where torch has one: kept for printing, the
// result is always a new tensor (td's functional forward never writes into its input).

class SiLU : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(SiLU); }
  explicit SiLU(bool inplace = false);
  Tensor forward(const Tensor& input);
  bool inplace;

 protected:
  std::string extra_repr() const override { return inplace ? "inplace=True" : ""; }
};

class Mish : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Mish); }
  explicit Mish(bool inplace = false);
  Tensor forward(const Tensor& input);
  bool inplace;

 protected:
  std::string extra_repr() const override { return inplace ? "inplace=True" : ""; }
};

class SELU : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(SELU); }
  explicit SELU(bool inplace = false);
  Tensor forward(const Tensor& input);
  bool inplace;

 protected:
  std::string extra_repr() const override { return inplace ? "inplace=True" : ""; }
};

class Hardswish : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Hardswish); }
  explicit Hardswish(bool inplace = false);
  Tensor forward(const Tensor& input);
  bool inplace;  // torch prints nothing for it
};

class Hardsigmoid : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override {
    return &typeid(Hardsigmoid);
  }
  explicit Hardsigmoid(bool inplace = false);
  Tensor forward(const Tensor& input);
  bool inplace;  // torch prints nothing for it
};

class LeakyReLU : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(LeakyReLU); }
  explicit LeakyReLU(double negative_slope = 0.01, bool inplace = false);
  Tensor forward(const Tensor& input);
  double negative_slope;
  bool inplace;

 protected:
  std::string extra_repr() const override;
};

class ELU : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(ELU); }
  explicit ELU(double alpha = 1, bool inplace = false);
  Tensor forward(const Tensor& input);
  double alpha;
  bool inplace;

 protected:
  std::string extra_repr() const override;
};

class CELU : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(CELU); }
  explicit CELU(double alpha = 1, bool inplace = false);
  Tensor forward(const Tensor& input);
  double alpha;
  bool inplace;

 protected:
  std::string extra_repr() const override;
};

// log(1 + exp(beta x)) / beta, x where beta x > threshold.
class Softplus : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Softplus); }
  explicit Softplus(double beta = 1, double threshold = 20);
  Tensor forward(const Tensor& input);
  double beta, threshold;

 protected:
  std::string extra_repr() const override;
};

// Clamps to [min_val, max_val] (ValueError if max_val < min_val).
class Hardtanh : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Hardtanh); }
  explicit Hardtanh(double min_val = -1, double max_val = 1, bool inplace = false);
  Tensor forward(const Tensor& input);
  double min_val, max_val;
  bool inplace;

 protected:
  std::string extra_repr() const override;
};

class ReLU6 : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(ReLU6); }
  explicit ReLU6(bool inplace = false);
  Tensor forward(const Tensor& input);
  bool inplace;

 protected:
  std::string extra_repr() const override { return inplace ? "inplace=True" : ""; }
};

class Softsign : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Softsign); }
  Softsign();
  Tensor forward(const Tensor& input);
};

class Tanhshrink : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Tanhshrink); }
  Tanhshrink();
  Tensor forward(const Tensor& input);
};

class LogSigmoid : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(LogSigmoid); }
  LogSigmoid();
  Tensor forward(const Tensor& input);
};

// The first half of the input along dim times the sigmoid of the second.
class GLU : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(GLU); }
  explicit GLU(int64_t dim = -1);
  Tensor forward(const Tensor& input);
  int64_t dim;

 protected:
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
};

// x where x > 0, else weight * x: parameter `weight` [num_parameters] filled with init, one per
// channel (dim 1) or one for all. Under functional_vmap every set has its own weight.
class PReLU : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(PReLU); }
  explicit PReLU(int64_t num_parameters = 1, double init = 0.25);
  Tensor forward(const Tensor& input);
  int64_t num_parameters;
  Param weight;

 protected:
  std::string extra_repr() const override {
    return "num_parameters=" + std::to_string(num_parameters);
  }
};

}  // namespace td::nn
