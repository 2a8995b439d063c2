#include "modules/linear.h"

#include <cmath>

#include "engine/ops.h"

namespace td::nn {

namespace {
// U(-bound, bound) from the seeded generator.
Tensor uniform(const Shape& shape, double bound) { return rand(shape) * (2 * bound) - bound; }
}  // namespace

Linear::Linear(int64_t in, int64_t out, bool with_bias) : in_features(in), out_features(out) {
  if (in < 0 || out < 0)
    throw_error<ValueError>("[Linear] in_features and out_features must be >= 0, got ", in, ", ",
                            out);
  double bound = in > 0 ? 1.0 / std::sqrt(static_cast<double>(in)) : 0.0;
  weight = register_parameter("weight", uniform({out, in}, bound));
  if (with_bias) bias = register_parameter("bias", uniform({out}, bound));
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
