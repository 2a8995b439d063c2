#include "modules/loss.h"

#include <utility>

#include "engine/losses.h"

namespace td::nn {
namespace {

// an undefined Param reads as an absent weight
Tensor optional_tensor(const Param& p) { return p.defined() ? p.get() : Tensor(); }

}  // namespace

#define TD_BINARY_FORWARD(Name) register_method("forward", &Name::forward, {"input", "target"})

MSELoss::MSELoss(std::string r) : reduction(std::move(r)) { TD_BINARY_FORWARD(MSELoss); }
Tensor MSELoss::forward(const Tensor& input, const Tensor& target) {
  return mse_loss(input, target, reduction);
}

L1Loss::L1Loss(std::string r) : reduction(std::move(r)) { TD_BINARY_FORWARD(L1Loss); }
Tensor L1Loss::forward(const Tensor& input, const Tensor& target) {
  return l1_loss(input, target, reduction);
}

SmoothL1Loss::SmoothL1Loss(std::string r, double b) : reduction(std::move(r)), beta(b) {
  TD_BINARY_FORWARD(SmoothL1Loss);
}
Tensor SmoothL1Loss::forward(const Tensor& input, const Tensor& target) {
  return smooth_l1_loss(input, target, reduction, beta);
}

HuberLoss::HuberLoss(std::string r, double d) : reduction(std::move(r)), delta(d) {
  TD_BINARY_FORWARD(HuberLoss);
}
Tensor HuberLoss::forward(const Tensor& input, const Tensor& target) {
  return huber_loss(input, target, reduction, delta);
}

NLLLoss::NLLLoss(const Tensor& w, int64_t ignore, std::string r)
    : ignore_index(ignore), reduction(std::move(r)) {
  if (w.defined()) weight = register_buffer("weight", w);
  TD_BINARY_FORWARD(NLLLoss);
}
Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) {
  return nll_loss(input, target, optional_tensor(weight), ignore_index, reduction);
}

CrossEntropyLoss::CrossEntropyLoss(const Tensor& w, int64_t ignore, std::string r, double ls)
    : ignore_index(ignore), reduction(std::move(r)), label_smoothing(ls) {
  if (w.defined()) weight = register_buffer("weight", w);
  TD_BINARY_FORWARD(CrossEntropyLoss);
}
Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  return cross_entropy(input, target, optional_tensor(weight), ignore_index, reduction,
                       label_smoothing);
}

BCELoss::BCELoss(const Tensor& w, std::string r) : reduction(std::move(r)) {
  if (w.defined()) weight = register_buffer("weight", w);
  TD_BINARY_FORWARD(BCELoss);
}
Tensor BCELoss::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy(input, target, optional_tensor(weight), reduction);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(const Tensor& w, std::string r, const Tensor& pw)
    : reduction(std::move(r)) {
  if (w.defined()) weight = register_buffer("weight", w);
  if (pw.defined()) pos_weight = register_buffer("pos_weight", pw);
  TD_BINARY_FORWARD(BCEWithLogitsLoss);
}
Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy_with_logits(input, target, optional_tensor(weight), reduction,
                                          optional_tensor(pos_weight));
}

KLDivLoss::KLDivLoss(std::string r, bool log) : reduction(std::move(r)), log_target(log) {
  TD_BINARY_FORWARD(KLDivLoss);
}
Tensor KLDivLoss::forward(const Tensor& input, const Tensor& target) {
  return kl_div(input, target, reduction, log_target);
}

#undef TD_BINARY_FORWARD

}  // namespace td::nn
