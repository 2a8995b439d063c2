#pragma once
// Loss functions with torch.nn.functional's names, arguments and defaults (PyTorch 1.13's
// semantics). Built from batched ops (log_softmax, gather, where, sum, ...), so under vmap or
// functional_vmap a reduced loss is one value per set. An undefined Tensor ({}) is an absent
// weight. reduction is "none", "mean" or "sum" (kl_div also "batchmean"); anything else is a
// ValueError naming the op.
#include <cstdint>
#include <string>

#include "engine/tensor.h"

namespace td {

// Element-wise losses; input and target broadcast against each other, as torch's (which warns).
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta 0: l1_loss; negative: ValueError)
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      const std::string& reduction = "mean", double beta = 1.0);
// 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta); delta must be positive
Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                  double delta = 1.0);

// input [C] with a 0-d target, [N, C] with target [N], or [N, C, d1, ...] with target
// [N, d1, ...]: int64 class indices in [0, C) or ignore_index (IndexError otherwise). weight [C]
// scales each class; "mean" divides by the summed weights of the targets not ignored (NaN when
// all are).
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                int64_t ignore_index = -100, const std::string& reduction = "mean");
// log_softmax over the class dim, then nll_loss; or, for a floating target of input's shape
// (class probabilities), -sum(weight * target * log_softmax) over the classes, whose "mean"
// divides by the number of rows. label_smoothing in [0, 1] mixes in the uniform distribution.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                     int64_t ignore_index = -100, const std::string& reduction = "mean",
                     double label_smoothing = 0.0);
// input holds probabilities; each log is clamped at -100, as torch. target has input's shape;
// weight broadcasts to it.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            const std::string& reduction = "mean");
// input holds logits (computed stably); pos_weight scales the positive term, broadcasting along
// the last dim (one per class).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = {},
                                        const std::string& reduction = "mean",
                                        const Tensor& pos_weight = {});
// input holds log-probabilities; target probabilities, or log-probabilities with log_target.
// "batchmean" divides the sum by input's first dim.
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
              bool log_target = false);

}  // namespace td
