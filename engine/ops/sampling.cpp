// Sampling built from rand/randn and batched ops: randint, normal, uniform_/normal_, multinomial
// and categorical. Their draws come from rand and randn, so a set draws the same numbers
// batched, chunked or looped, under every randomness mode, and they batch through the rules of
// the ops they call. Categories are drawn with Gumbel noise: argmax(log p + g) picks category c
// with probability p_c, and the k largest keys are k draws without replacement.
#include <cmath>
#include <limits>

#include "engine/ops.h"
#include "engine/ops/draws.h"
#include "engine/tensor.h"

namespace td {

namespace impl {

Tensor all_sets(const Tensor& t) {
  return t.is_batched() ? Tensor::from_storage_unchecked(t.storage(), t.dtype(),
                                                         t.physical_shape(),
                                                         t.physical_strides(), t.offset())
                        : t;
}

}  // namespace impl

namespace {

// -log(-log(u)), u ~ U[0, 1) in float64: Gumbel(0, 1) noise of the given (per-set) shape
Tensor gumbel(const Shape& shape) { return neg(log(neg(log(rand(shape, kFloat64))))); }

void check_floating(const char* op, const char* what, const Tensor& t) {
  if (!is_floating(t.dtype()))
    throw_error<TypeError>("[", op, "] ", what, " of shape ", shape_str(t.shape()),
                           " needs a floating dtype, got ", dtype_name(t.dtype()));
}

// every value of every set of t (a reduction of the caller's) satisfies ok
template <class Ok>
bool all_values(const Tensor& t, Ok ok) {
  for (double v : impl::all_sets(t).to_vector<double>())
    if (!ok(v)) return false;
  return true;
}

void check_std(const char* op, const Tensor& std) {
  if (!all_values(std, [](double v) { return v >= 0; }))
    throw_error<ValueError>("[", op, "] std of shape ", shape_str(std.shape()),
                            " must be >= 0 everywhere (and not NaN)");
}

}  // namespace

Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype) {
  if (high <= low)
    throw_error<ValueError>("[randint] needs low < high, got low=", low, ", high=", high);
  if (dtype == DType::Bool)
    throw_error<TypeError>("[randint] draws int64, float32 or float64, not bool");
  // floor(u * range) < range for u < 1 in float64 (exact for ranges up to 2^53)
  Tensor u = rand(shape, kFloat64);
  return add(floor(mul(u, static_cast<double>(high) - static_cast<double>(low))),
             static_cast<double>(low))
      .to(dtype);
}
Tensor randint(int64_t high, const Shape& shape, DType dtype) {
  return randint(0, high, shape, dtype);
}

Tensor normal(const Tensor& mean, const Tensor& std) {
  check_floating("normal", "mean", mean);
  check_floating("normal", "std", std);
  check_std("normal", std);
  const Shape shape = broadcast_shapes("normal", mean.shape(), std.shape());
  const DType dtype = mean.dtype() == kFloat64 || std.dtype() == kFloat64 ? kFloat64 : kFloat32;
  return add(mean, mul(std, randn(shape, dtype)));
}
Tensor normal(const Tensor& mean, double std) {
  check_floating("normal", "mean", mean);
  if (!(std >= 0)) throw_error<ValueError>("[normal] std must be >= 0, got ", std);
  return add(mean, mul(randn(mean.shape(), mean.dtype()), std));
}
Tensor normal(double mean, const Tensor& std) {
  check_floating("normal", "std", std);
  check_std("normal", std);
  return add(mul(std, randn(std.shape(), std.dtype())), mean);
}
Tensor normal(double mean, double std, const Shape& shape, DType dtype) {
  if (!(std >= 0)) throw_error<ValueError>("[normal] std must be >= 0, got ", std);
  if (!is_floating(dtype))
    throw_error<TypeError>("[normal] needs a floating dtype, got ", dtype_name(dtype));
  return add(mul(randn(shape, dtype), std), mean);
}

const Tensor& uniform_(const Tensor& self, double from, double to) {
  check_floating("uniform_", "self", self);
  if (!(from <= to))
    throw_error<ValueError>("[uniform_] needs from <= to, got from=", from, ", to=", to);
  return copy_(self, add(mul(rand(self.shape(), self.dtype()), to - from), from));
}
const Tensor& normal_(const Tensor& self, double mean, double std) {
  check_floating("normal_", "self", self);
  if (!(std >= 0)) throw_error<ValueError>("[normal_] std must be >= 0, got ", std);
  return copy_(self, add(mul(randn(self.shape(), self.dtype()), std), mean));
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  const char* op = "multinomial";
  check_floating(op, "probs", probs);
  if (probs.dim() != 1 && probs.dim() != 2)
    throw_error<ValueError>("[multinomial] probs must be 1-D or 2-D, got shape ",
                            shape_str(probs.shape()));
  const int64_t categories = probs.size(-1);
  if (num_samples <= 0)
    throw_error<ValueError>("[multinomial] num_samples must be positive, got ", num_samples);
  if (!replacement && num_samples > categories)
    throw_error<ValueError>("[multinomial] cannot draw ", num_samples, " samples from ",
                            categories, " categories (probs of shape ", shape_str(probs.shape()),
                            ") without replacement");
  if (!all_values(probs, [](double v) { return std::isfinite(v) && v >= 0; }))
    throw_error<ValueError>("[multinomial] probs of shape ", shape_str(probs.shape()),
                            " holds inf, NaN or a value < 0");
  if (probs.numel() == 0)
    throw_error<ValueError>("[multinomial] probs of shape ", shape_str(probs.shape()),
                            " has no category to draw from");
  if (!all_values(sum(probs, -1), [](double v) { return v > 0; }))
    throw_error<ValueError>("[multinomial] a row of probs (shape ", shape_str(probs.shape()),
                            ") sums to 0");
  if (!replacement &&
      !all_values(sum(gt(probs, 0.0), -1), [&](double v) { return v >= double(num_samples); }))
    throw_error<ValueError>("[multinomial] a row of probs (shape ", shape_str(probs.shape()),
                            ") has fewer than ", num_samples,
                            " categories of non-zero probability to draw without replacement");
  const Tensor logp = log(probs.to(kFloat64));  // -inf where p is 0: never drawn
  if (replacement) {
    Shape keys_shape = probs.shape();
    keys_shape.insert(keys_shape.end() - 1, num_samples);
    return argmax(add(logp.unsqueeze(-2), gumbel(keys_shape)), -1);
  }
  // the num_samples largest keys, largest first: draws in order, without replacement
  Tensor keys = add(logp, gumbel(probs.shape()));
  const Tensor category = arange(categories);
  const double minus_inf = -std::numeric_limits<double>::infinity();
  std::vector<Tensor> drawn;
  for (int64_t k = 0; k < num_samples; ++k) {
    Tensor pick = argmax(keys, -1, true);
    drawn.push_back(pick);
    if (k + 1 < num_samples) keys = where(eq(category, pick), minus_inf, keys);
  }
  return cat(drawn, -1);
}

Tensor categorical(const Tensor& logits) {
  check_floating("categorical", "logits", logits);
  if (logits.dim() == 0 || logits.size(-1) == 0)
    throw_error<ValueError>("[categorical] logits of shape ", shape_str(logits.shape()),
                            " need a last dim of categories");
  if (!all_values(logits, [](double v) { return !std::isnan(v) && v != HUGE_VAL; }))
    throw_error<ValueError>("[categorical] logits of shape ", shape_str(logits.shape()),
                            " hold NaN or +inf");
  if (!all_values(amax(logits, -1), [](double v) { return v != -HUGE_VAL; }))
    throw_error<ValueError>("[categorical] a row of logits (shape ", shape_str(logits.shape()),
                            ") is all -inf");
  return argmax(add(logits.to(kFloat64), gumbel(logits.shape())), -1);
}

}  // namespace td
