#pragma once
// Dropout: zeroes elements with probability p in training and scales the rest by 1/(1-p);
// Dropout1d and Dropout2d zero whole channels (one draw per (N, C) channel) instead.
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

// Channel-wise dropout as torch 1.13's: Dropout1d takes (N, C, L) or unbatched (C, L) inputs,
// Dropout2d (N, C, H, W) or (N, C, L) (torch's reading of a 3-D input); other ranks raise a
// ValueError (torch 1.13's Dropout2d only warns for them). Under functional_vmap the channels'
// draws follow the randomness mode as Dropout's do.
class Dropout1d : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Dropout1d); }
  explicit Dropout1d(double p = 0.5, bool inplace = false);  // ValueError unless 0 <= p <= 1
  Tensor forward(const Tensor& input);
  double p;
  bool inplace;  // printed; the result is always a new tensor

 protected:
  std::string extra_repr() const override;
};

class Dropout2d : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Dropout2d); }
  explicit Dropout2d(double p = 0.5, bool inplace = false);  // ValueError unless 0 <= p <= 1
  Tensor forward(const Tensor& input);
  double p;
  bool inplace;  // printed; the result is always a new tensor

 protected:
  std::string extra_repr() const override;
};

}  // namespace td::nn
