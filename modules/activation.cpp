#include "modules/activation.h"

#include "engine/ops.h"

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

}  // namespace td::nn
