#include "modules/linear.h"

#include <cmath>

#include "engine/ops.h"
#include "modules/init.h"

namespace td::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias) : in_features(in), out_features(out) {
  if (in < 0 || out < 0)
    throw_error<ValueError>("[Linear] in_features and out_features must be >= 0, got ", in, ", ",
                            out);
  double bound = in > 0 ? 1.0 / std::sqrt(static_cast<double>(in)) : 0.0;
  weight = register_parameter("weight", uniform_init({out, in}, bound));
  if (with_bias) bias = register_parameter("bias", uniform_init({out}, bound));
  register_method("forward", &Linear::forward, {"input"});
}

Tensor Linear::forward(const Tensor& input) { return linear(input, weight, bias); }

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) +
         ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "True" : "False");
}

Identity::Identity() { register_method("forward", &Identity::forward, {"input"}); }

}  // namespace td::nn
