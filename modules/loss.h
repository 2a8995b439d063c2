#pragma once
// Loss modules: torch.nn's loss classes over the functions of engine/losses.h. forward(input,
// target) (BCELoss and the others with a weight keep it as a buffer named "weight", as torch;
// BCEWithLogitsLoss also "pos_weight"). PyTorch's deprecated size_average / reduce arguments are
// left out; reduction is checked when forward runs, as torch does.
#include <string>

#include "modules/module.h"

namespace td::nn {

// MSELoss, L1Loss: forward(input, target) with a reduction only.
#define TD_REDUCTION_LOSS(Name)                                                              \
  class Name : public Module {                                                               \
   public:                                                                                   \
    const std::type_info* concurrent_forward_class() const override { return &typeid(Name); } \
    explicit Name(std::string reduction = "mean");                                           \
    Tensor forward(const Tensor& input, const Tensor& target);                               \
    std::string reduction;                                                                   \
  };
TD_REDUCTION_LOSS(MSELoss)
TD_REDUCTION_LOSS(L1Loss)
#undef TD_REDUCTION_LOSS

class SmoothL1Loss : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(SmoothL1Loss); }
  explicit SmoothL1Loss(std::string reduction = "mean", double beta = 1.0);
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string reduction;
  double beta;
};

class HuberLoss : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(HuberLoss); }
  explicit HuberLoss(std::string reduction = "mean", double delta = 1.0);
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string reduction;
  double delta;
};

class NLLLoss : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(NLLLoss); }
  explicit NLLLoss(const Tensor& weight = {}, int64_t ignore_index = -100,
                   std::string reduction = "mean");
  Tensor forward(const Tensor& input, const Tensor& target);
  Param weight;  // undefined when none was given
  int64_t ignore_index;
  std::string reduction;
};

class CrossEntropyLoss : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override {
    return &typeid(CrossEntropyLoss);
  }
  explicit CrossEntropyLoss(const Tensor& weight = {}, int64_t ignore_index = -100,
                            std::string reduction = "mean", double label_smoothing = 0.0);
  Tensor forward(const Tensor& input, const Tensor& target);
  Param weight;
  int64_t ignore_index;
  std::string reduction;
  double label_smoothing;
};

class BCELoss : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(BCELoss); }
  explicit BCELoss(const Tensor& weight = {}, std::string reduction = "mean");
  Tensor forward(const Tensor& input, const Tensor& target);
  Param weight;
  std::string reduction;
};

class BCEWithLogitsLoss : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override {
    return &typeid(BCEWithLogitsLoss);
  }
  explicit BCEWithLogitsLoss(const Tensor& weight = {}, std::string reduction = "mean",
                             const Tensor& pos_weight = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  Param weight, pos_weight;
  std::string reduction;
};

class KLDivLoss : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(KLDivLoss); }
  explicit KLDivLoss(std::string reduction = "mean", bool log_target = false);
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string reduction;
  bool log_target;
};

}  // namespace td::nn
