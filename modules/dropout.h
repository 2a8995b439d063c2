#pragma once
// Dropout: zeroes elements with probability p in training and scales the rest by 1/(1-p).
#include "modules/module.h"

namespace td::nn {

class Dropout : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Dropout); }
  explicit Dropout(double p = 0.5);  // ValueError unless 0 <= p <= 1
  Tensor forward(const Tensor& input);
  double p;

 protected:
  std::string extra_repr() const override;
};

}  // namespace td::nn
