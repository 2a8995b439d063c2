#include "modules/dropout.h"

#include <sstream>

#include "engine/ops.h"

namespace td::nn {

Dropout::Dropout(double prob) : p(prob) {
  if (!(p >= 0.0 && p <= 1.0))
    throw_error<ValueError>("[Dropout] probability must be between 0 and 1, got ", p);
  register_method("forward", &Dropout::forward, {"input"});
}

Tensor Dropout::forward(const Tensor& input) { return dropout(input, p, is_training()); }

std::string Dropout::extra_repr() const {
  std::ostringstream os;
  os << "p=" << repr_double(p) << ", inplace=False";  // torch's; td has no in-place dropout
  return os.str();
}

}  // namespace td::nn
