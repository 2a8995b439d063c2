// The loss functions of engine/losses.h, composed of batched ops (no kernel or rule of their own).
#include "engine/losses.h"

#include <optional>

#include "engine/ops.h"
#include "engine/shape.h"

namespace td {
namespace {

enum class Reduction { None, Mean, Sum, BatchMean };

Reduction parse_reduction(const char* op, const std::string& r, bool batchmean = false) {
  if (r == "none") return Reduction::None;
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  if (batchmean && r == "batchmean") return Reduction::BatchMean;
  throw_error<ValueError>("[", op, "] reduction must be 'none', 'mean', 'sum'",
                          batchmean ? " or 'batchmean'" : "", ", got '", r, "'");
}

Tensor reduce(const Tensor& loss, Reduction r) {
  switch (r) {
    case Reduction::Mean:
      return mean(loss);
    case Reduction::Sum:
      return sum(loss);
    default:
      return loss;
  }
}

void check_defined(const char* op, const Tensor& input, const Tensor& target) {
  if (!input.defined() || !target.defined())
    throw_error<ValueError>("[", op, "] expected defined input and target tensors");
}

// Element-wise losses: input and target broadcast (the op named if they do not).
Tensor difference(const char* op, const Tensor& input, const Tensor& target) {
  check_defined(op, input, target);
  broadcast_shapes(op, input.shape(), target.shape());
  return sub(input, target);
}

void check_same_shape(const char* op, const Tensor& input, const Tensor& target) {
  check_defined(op, input, target);
  if (input.shape() != target.shape())
    throw_error<ValueError>("[", op, "] target of ", shape_word(), " ", target.shape(),
                            " must have the input's ", shape_word(), " ", input.shape());
}

// weight [C] viewed to broadcast along dim cdim of a rank-`rank` tensor
Tensor class_weight_view(const Tensor& weight, int64_t cdim, int64_t rank) {
  Shape s(static_cast<size_t>(rank - cdim), 1);
  s[0] = weight.size(0);
  return weight.reshape(s);
}

void check_class_weight(const char* op, const Tensor& weight, const Tensor& input, int64_t c) {
  if (weight.defined() && (weight.dim() != 1 || weight.size(0) != c))
    throw_error<ValueError>("[", op, "] weight of ", shape_word(), " ", weight.shape(),
                            " must hold one value per class (", c, ") of input of ", shape_word(),
                            " ", input.shape());
}

// Each target's picked log-probability as a loss, -weight[t] * logp[t], and its weight
// weight[t] (1 without weights); both 0 where the target is ignore_index.
struct Picked {
  Tensor loss;
  Tensor weight;
  Tensor valid;
};

Picked pick_targets(const char* op, const Tensor& logp, const Tensor& target, const Tensor& weight,
                    int64_t ignore_index) {
  const int64_t cdim = logp.dim() == 1 ? 0 : 1;
  const int64_t c = logp.size(cdim);
  if (target.dtype() != DType::Int64)
    throw_error<TypeError>("[", op, "] target must hold int64 class indices, got ",
                           dtype_name(target.dtype()), " of ", shape_word(), " ", target.shape(),
                           " for input of ", shape_word(), " ", logp.shape());
  Shape expected = logp.shape();
  expected.erase(expected.begin() + cdim);
  if (target.shape() != expected)
    throw_error<ValueError>("[", op, "] expected target of ", shape_word(), " ", expected,
                            " for input of ", shape_word(), " ", logp.shape(), ", got ",
                            target.shape());
  check_class_weight(op, weight, logp, c);
  Picked p;
  p.valid = ne(target, ignore_index);
  const Tensor safe = where(p.valid, target, Scalar(int64_t{0}));
  Tensor g;
  try {
    g = gather(logp, cdim, safe.unsqueeze(cdim)).squeeze(cdim);
  } catch (const IndexError& e) {
    throw_error<IndexError>("[", op, "] target out of range for ", c, " classes (input of ",
                            shape_word(), " ", logp.shape(), ", target ", target.shape(),
                            "): ", e.what());
  }
  if (weight.defined()) {
    const Tensor wt =
        index_select(weight, 0, safe.reshape({target.numel()})).reshape(target.shape());
    p.loss = where(p.valid, neg(g) * wt, 0.0);
    p.weight = where(p.valid, wt, 0.0);
  } else {
    p.loss = where(p.valid, neg(g), 0.0);
    p.weight = p.valid.to(logp.dtype());
  }
  return p;
}

// nll's reduction: "mean" divides by the summed weights of the targets not ignored.
Tensor reduce_picked(const Tensor& loss, const Picked& p, Reduction r) {
  if (r == Reduction::Mean) return div(sum(loss), sum(p.weight));
  return reduce(loss, r);
}

int64_t class_dim(const char* op, const Tensor& input) {
  if (input.dim() == 0)
    throw_error<ValueError>("[", op, "] input must have a class dim, got ", shape_word(), " ",
                            input.shape());
  return input.dim() == 1 ? 0 : 1;
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  const Reduction r = parse_reduction("mse_loss", reduction);
  const Tensor d = difference("mse_loss", input, target);
  return reduce(d * d, r);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  const Reduction r = parse_reduction("l1_loss", reduction);
  return reduce(abs(difference("l1_loss", input, target)), r);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                      double beta) {
  const Reduction r = parse_reduction("smooth_l1_loss", reduction);
  if (!(beta >= 0))
    throw_error<ValueError>("[smooth_l1_loss] beta must not be negative, got ", beta);
  const Tensor z = abs(difference("smooth_l1_loss", input, target));
  if (beta == 0) return reduce(z, r);
  return reduce(where(lt(z, beta), z * z * (0.5 / beta), z - 0.5 * beta), r);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                  double delta) {
  const Reduction r = parse_reduction("huber_loss", reduction);
  if (!(delta > 0)) throw_error<ValueError>("[huber_loss] delta must be positive, got ", delta);
  const Tensor z = abs(difference("huber_loss", input, target));
  return reduce(where(lt(z, delta), z * z * 0.5, (z - 0.5 * delta) * delta), r);
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                int64_t ignore_index, const std::string& reduction) {
  const Reduction r = parse_reduction("nll_loss", reduction);
  check_defined("nll_loss", input, target);
  class_dim("nll_loss", input);
  const Picked p = pick_targets("nll_loss", input, target, weight, ignore_index);
  return reduce_picked(p.loss, p, r);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                     int64_t ignore_index, const std::string& reduction, double label_smoothing) {
  const char* op = "cross_entropy";
  const Reduction r = parse_reduction(op, reduction);
  check_defined(op, input, target);
  const int64_t cdim = class_dim(op, input);
  const int64_t c = input.size(cdim);
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    throw_error<ValueError>("[cross_entropy] label_smoothing must be between 0 and 1, got ",
                            label_smoothing);
  const Tensor logp = log_softmax(input, cdim);
  const std::optional<Tensor> w =
      weight.defined() ? std::optional<Tensor>(class_weight_view(weight, cdim, input.dim()))
                       : std::nullopt;
  if (is_floating(target.dtype())) {  // class probabilities
    if (target.shape() != input.shape())
      throw_error<ValueError>("[cross_entropy] class probabilities of ", shape_word(), " ",
                              target.shape(), " must have the input's ", shape_word(), " ",
                              input.shape());
    check_class_weight(op, weight, input, c);
    const Tensor t =
        label_smoothing > 0 ? target * (1 - label_smoothing) + label_smoothing / c : target;
    Tensor prod = logp * t;
    if (w) prod = prod * *w;
    const Tensor loss = neg(sum(prod, cdim));
    if (r == Reduction::Mean)
      return div(sum(loss), static_cast<double>(input.numel() / (c == 0 ? 1 : c)));
    return reduce(loss, r);
  }
  const Picked p = pick_targets(op, logp, target, weight, ignore_index);
  const Tensor nll = reduce_picked(p.loss, p, r);
  if (label_smoothing == 0) return nll;
  // the uniform part: -sum over the classes of (weighted) logp, 0 for ignored targets, reduced
  // as nll
  const Tensor smooth = where(p.valid, neg(sum(w ? logp * *w : logp, cdim)), 0.0);
  return nll * (1 - label_smoothing) + reduce_picked(smooth, p, r) * (label_smoothing / c);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            const std::string& reduction) {
  const char* op = "binary_cross_entropy";
  const Reduction r = parse_reduction(op, reduction);
  check_same_shape(op, input, target);
  // torch checks the range; a batched input cannot be read here, and gives NaN where out of it
  if (!input.is_batched() && input.numel() > 0 &&
      !all(logical_and(ge(input, 0), le(input, 1))).item<bool>())
    throw_error<ValueError>("[binary_cross_entropy] all elements of input (", shape_word(), " ",
                            input.shape(), ") should be between 0 and 1");
  const Tensor log_x = clamp(log(input), -100.0, std::nullopt);
  const Tensor log_1mx = clamp(log1p(neg(input)), -100.0, std::nullopt);
  Tensor loss = (target - 1) * log_1mx - target * log_x;
  if (weight.defined()) {
    broadcast_shapes(op, input.shape(), weight.shape());
    loss = loss * weight;
  }
  return reduce(loss, r);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight, const std::string& reduction,
                                        const Tensor& pos_weight) {
  const char* op = "binary_cross_entropy_with_logits";
  const Reduction r = parse_reduction(op, reduction);
  check_same_shape(op, input, target);
  // log(1 + exp(-x)) as log1p(exp(-|x|)) + max(-x, 0): no overflow for any x
  const Tensor softplus_neg = log1p(exp(neg(abs(input)))) + relu(neg(input));
  Tensor loss;
  if (pos_weight.defined()) {
    broadcast_shapes(op, input.shape(), pos_weight.shape());
    loss = (1 - target) * input + ((pos_weight - 1) * target + 1) * softplus_neg;
  } else {
    loss = (1 - target) * input + softplus_neg;
  }
  if (weight.defined()) {
    broadcast_shapes(op, input.shape(), weight.shape());
    loss = loss * weight;
  }
  return reduce(loss, r);
}

Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction,
              bool log_target) {
  const Reduction r = parse_reduction("kl_div", reduction, true);
  check_defined("kl_div", input, target);
  broadcast_shapes("kl_div", input.shape(), target.shape());
  // target * (log target - input), with 0 where target is 0 (torch's xlogy)
  const Tensor loss = log_target ? exp(target) * (target - input)
                                 : where(eq(target, 0), 0.0, target * log(target)) - target * input;
  if (r == Reduction::BatchMean)
    return input.dim() == 0 ? sum(loss) : div(sum(loss), static_cast<double>(input.size(0)));
  return reduce(loss, r);
}

}  // namespace td
