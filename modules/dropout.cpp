#include "modules/dropout.h"

#include <sstream>

#include "engine/ops.h"

namespace td::nn {

namespace {

void check_p(const char* name, double p) {
  if (!(p >= 0.0 && p <= 1.0))
    throw_error<ValueError>("[", name, "] probability must be between 0 and 1, got ", p);
}

}  // namespace

Dropout::Dropout(double prob) : p(prob) {
  check_p("Dropout", p);
  register_method("forward", &Dropout::forward, {"input"});
}

Tensor Dropout::forward(const Tensor& input) { return dropout(input, p, is_training()); }

std::string Dropout::extra_repr() const {
  std::ostringstream os;
  os << "p=" << repr_double(p) << ", inplace=False";  // torch's; td has no in-place dropout
  return os.str();
}

namespace {

// One keep draw per channel of x (dims 0 and 1, or dim 0 of an unbatched input), the kept
// channels scaled by 1 / (1 - p), as torch's feature dropout.
Tensor channel_dropout(const Tensor& x, double p, bool unbatched) {
  if (p == 0 || x.numel() == 0) return x;
  if (p == 1) return mul(x, Scalar(int64_t{0}));  // NaN stays NaN, as torch's x * 0
  Shape noise(static_cast<size_t>(x.dim()), 1);
  noise[0] = x.size(0);
  if (!unbatched) noise[1] = x.size(1);
  return mul(x, div(dropout_mask(noise, p).to(x.dtype()), 1 - p));
}


std::string dropout_repr(double p, bool inplace) {
  return "p=" + repr_double(p) + (inplace ? ", inplace=True" : ", inplace=False");
}

}  // namespace

Dropout1d::Dropout1d(double prob, bool in) : p(prob), inplace(in) {
  check_p("Dropout1d", p);
  register_method("forward", &Dropout1d::forward, {"input"});
}
Tensor Dropout1d::forward(const Tensor& input) {
  if (input.dim() != 2 && input.dim() != 3)
    throw_error<ValueError>("[Dropout1d] expects a 2-D (C, L) or 3-D (N, C, L) input, got shape ",
                            shape_str(input.shape()));
  return is_training() ? channel_dropout(input, p, input.dim() == 2) : input;
}
std::string Dropout1d::extra_repr() const { return dropout_repr(p, inplace); }

Dropout2d::Dropout2d(double prob, bool in) : p(prob), inplace(in) {
  check_p("Dropout2d", p);
  register_method("forward", &Dropout2d::forward, {"input"});
}
Tensor Dropout2d::forward(const Tensor& input) {
  if (input.dim() != 3 && input.dim() != 4)
    throw_error<ValueError>("[Dropout2d] expects a 4-D (N, C, H, W) or 3-D (N, C, L) input, got "
                            "shape ",
                            shape_str(input.shape()));
  return is_training() ? channel_dropout(input, p, false) : input;
}
std::string Dropout2d::extra_repr() const { return dropout_repr(p, inplace); }

}  // namespace td::nn
