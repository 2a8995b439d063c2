#pragma once
// Linear and Identity.
#include "modules/module.h"

namespace td::nn {

// y = x W^T + b. Weight and bias are drawn from U(-1/sqrt(in), 1/sqrt(in)) as PyTorch does.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& input);  // method "forward"(input)

  int64_t in_features, out_features;
  Param weight, bias;  // [out, in], [out] (bias undefined when bias = false)

 protected:
  std::string extra_repr() const override;
};

// Returns its input unchanged (any Value).
class Identity : public Module {
 public:
  Identity();
  Value forward(const Value& input) { return input; }
};

}  // namespace td::nn
