#pragma once
// Linear and Identity.
#include "modules/module.h"

namespace td::nn {

// y = x W^T + b. Weight and bias are drawn from U(-1/sqrt(in), 1/sqrt(in)) as PyTorch does.
class Linear : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Linear); }
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
  const std::type_info* concurrent_forward_class() const override { return &typeid(Identity); }
  Identity();
  Value forward(const Value& input) { return input; }
};

}  // namespace td::nn
