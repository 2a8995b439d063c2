#include "modules/activation.h"

#include <cmath>

#include "engine/ops.h"
#include "modules/value.h"

namespace td::nn {

ReLU::ReLU() { register_method("forward", &ReLU::forward, {"input"}); }
Tensor ReLU::forward(const Tensor& input) { return relu(input); }

GELU::GELU(std::string approx) : approximate(std::move(approx)) {
  if (approximate != "none" && approximate != "tanh")
    throw_error<ValueError>("[GELU] approximate must be 'none' or 'tanh', got '", approximate, "'");
  register_method("forward", &GELU::forward, {"input"});
}
Tensor GELU::forward(const Tensor& input) { return gelu(input, approximate == "tanh"); }

Tanh::Tanh() { register_method("forward", &Tanh::forward, {"input"}); }
Tensor Tanh::forward(const Tensor& input) { return tanh(input); }

Sigmoid::Sigmoid() { register_method("forward", &Sigmoid::forward, {"input"}); }
Tensor Sigmoid::forward(const Tensor& input) { return sigmoid(input); }

Softmax::Softmax(int64_t d) : dim(d) { register_method("forward", &Softmax::forward, {"input"}); }
Tensor Softmax::forward(const Tensor& input) { return softmax(input, dim); }

LogSoftmax::LogSoftmax(int64_t d) : dim(d) {
  register_method("forward", &LogSoftmax::forward, {"input"});
}
Tensor LogSoftmax::forward(const Tensor& input) { return log_softmax(input, dim); }

Flatten::Flatten(int64_t s, int64_t e) : start_dim(s), end_dim(e) {
  register_method("forward", &Flatten::forward, {"input"});
}
Tensor Flatten::forward(const Tensor& input) { return input.flatten(start_dim, end_dim); }
std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}

Unflatten::Unflatten(int64_t d, Shape sizes) : dim(d), unflattened_size(std::move(sizes)) {
  if (unflattened_size.empty())
    throw_error<ValueError>("[Unflatten] unflattened_size must not be empty");
  register_method("forward", &Unflatten::forward, {"input"});
}
Tensor Unflatten::forward(const Tensor& input) { return input.unflatten(dim, unflattened_size); }
std::string Unflatten::extra_repr() const {
  std::string sizes;  // a Python tuple: (4,) for one entry
  for (int64_t s : unflattened_size) sizes += (sizes.empty() ? "" : ", ") + std::to_string(s);
  if (unflattened_size.size() == 1) sizes += ",";
  return "dim=" + std::to_string(dim) + ", unflattened_size=(" + sizes + ")";
}

namespace {
std::string inplace_suffix(bool inplace) { return inplace ? ", inplace=True" : ""; }
// torch prints Softplus's arguments as given, ints by default ("beta=1, threshold=20")
std::string repr_number(double d) {
  return d == static_cast<double>(static_cast<int64_t>(d)) && std::abs(d) < 1e15
             ? std::to_string(static_cast<int64_t>(d))
             : repr_double(d);
}
}  // namespace

SiLU::SiLU(bool in) : inplace(in) { register_method("forward", &SiLU::forward, {"input"}); }
Tensor SiLU::forward(const Tensor& input) { return silu(input); }

Mish::Mish(bool in) : inplace(in) { register_method("forward", &Mish::forward, {"input"}); }
Tensor Mish::forward(const Tensor& input) { return mish(input); }

SELU::SELU(bool in) : inplace(in) { register_method("forward", &SELU::forward, {"input"}); }
Tensor SELU::forward(const Tensor& input) { return selu(input); }

Hardswish::Hardswish(bool in) : inplace(in) {
  register_method("forward", &Hardswish::forward, {"input"});
}
Tensor Hardswish::forward(const Tensor& input) { return hardswish(input); }

Hardsigmoid::Hardsigmoid(bool in) : inplace(in) {
  register_method("forward", &Hardsigmoid::forward, {"input"});
}
Tensor Hardsigmoid::forward(const Tensor& input) { return hardsigmoid(input); }

LeakyReLU::LeakyReLU(double slope, bool in) : negative_slope(slope), inplace(in) {
  register_method("forward", &LeakyReLU::forward, {"input"});
}
Tensor LeakyReLU::forward(const Tensor& input) { return leaky_relu(input, negative_slope); }
std::string LeakyReLU::extra_repr() const {
  return "negative_slope=" + repr_double(negative_slope) + inplace_suffix(inplace);
}

ELU::ELU(double a, bool in) : alpha(a), inplace(in) {
  register_method("forward", &ELU::forward, {"input"});
}
Tensor ELU::forward(const Tensor& input) { return elu(input, alpha); }
std::string ELU::extra_repr() const {
  return "alpha=" + repr_double(alpha) + inplace_suffix(inplace);
}

CELU::CELU(double a, bool in) : alpha(a), inplace(in) {
  register_method("forward", &CELU::forward, {"input"});
}
Tensor CELU::forward(const Tensor& input) { return celu(input, alpha); }
std::string CELU::extra_repr() const {
  return "alpha=" + repr_double(alpha) + inplace_suffix(inplace);
}

Softplus::Softplus(double b, double t) : beta(b), threshold(t) {
  register_method("forward", &Softplus::forward, {"input"});
}
Tensor Softplus::forward(const Tensor& input) { return softplus(input, beta, threshold); }
std::string Softplus::extra_repr() const {
  return "beta=" + repr_number(beta) + ", threshold=" + repr_number(threshold);
}

Hardtanh::Hardtanh(double lo, double hi, bool in) : min_val(lo), max_val(hi), inplace(in) {
  if (max_val < min_val)
    throw_error<ValueError>("[Hardtanh] max_val (", max_val, ") must be at least min_val (",
                            min_val, ")");
  register_method("forward", &Hardtanh::forward, {"input"});
}
Tensor Hardtanh::forward(const Tensor& input) { return hardtanh(input, min_val, max_val); }
std::string Hardtanh::extra_repr() const {
  return "min_val=" + repr_double(min_val) + ", max_val=" + repr_double(max_val) +
         inplace_suffix(inplace);
}

ReLU6::ReLU6(bool in) : inplace(in) { register_method("forward", &ReLU6::forward, {"input"}); }
Tensor ReLU6::forward(const Tensor& input) { return relu6(input); }

Softsign::Softsign() { register_method("forward", &Softsign::forward, {"input"}); }
Tensor Softsign::forward(const Tensor& input) { return softsign(input); }

Tanhshrink::Tanhshrink() { register_method("forward", &Tanhshrink::forward, {"input"}); }
Tensor Tanhshrink::forward(const Tensor& input) { return tanhshrink(input); }

LogSigmoid::LogSigmoid() { register_method("forward", &LogSigmoid::forward, {"input"}); }
Tensor LogSigmoid::forward(const Tensor& input) { return logsigmoid(input); }

GLU::GLU(int64_t d) : dim(d) { register_method("forward", &GLU::forward, {"input"}); }
Tensor GLU::forward(const Tensor& input) { return glu(input, dim); }

PReLU::PReLU(int64_t n, double init) : num_parameters(n) {
  if (n < 0) throw_error<ValueError>("[PReLU] num_parameters must be >= 0, got ", n);
  weight = register_parameter("weight", full({n}, init, kFloat32));
  register_method("forward", &PReLU::forward, {"input"});
}
Tensor PReLU::forward(const Tensor& input) { return prelu(input, weight); }

}  // namespace td::nn
