#include "modules/conv.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>
#include <utility>

#include "engine/ops.h"
#include "modules/init.h"

namespace td::nn {

Size2::Size2(std::initializer_list<int64_t> hw) {
  if (hw.size() != 2) throw_error<ValueError>("[Size2] expected 2 values (h, w), got ", hw.size());
  h = *hw.begin();
  w = *(hw.begin() + 1);
  pair = true;
}

Padding2::Padding2(const std::string& m) : Size2(0), mode(m) {
  if (mode != "same" && mode != "valid")
    throw_error<ValueError>("[Conv2d] invalid padding string '", mode,
                            "', should be one of 'valid' or 'same'");
}

namespace {

// The checks Conv1d and Conv2d share, messages naming the class; sizes: kernel, stride and
// dilation values (positive), pads: padding values (non-negative).
void check_conv_options(const char* cls, const std::string& padding_mode, bool same, bool strided,
                        int64_t in, int64_t out, int64_t groups,
                        std::initializer_list<int64_t> sizes, std::initializer_list<int64_t> pads) {
  if (padding_mode != "zeros" && padding_mode != "reflect" && padding_mode != "replicate" &&
      padding_mode != "circular")
    throw_error<ValueError>("[", cls,
                            "] padding_mode must be 'zeros', 'reflect', 'replicate' or "
                            "'circular', got '",
                            padding_mode, "'");
  if (same && strided)
    throw_error<ValueError>("[", cls, "] padding='same' is not supported for strided convolutions");
  if (groups <= 0) throw_error<ValueError>("[", cls, "] groups must be positive, got ", groups);
  if (in % groups != 0)
    throw_error<ValueError>("[", cls, "] in_channels must be divisible by groups");
  if (out % groups != 0)
    throw_error<ValueError>("[", cls, "] out_channels must be divisible by groups");
  if (std::any_of(sizes.begin(), sizes.end(), [](int64_t v) { return v <= 0; }) ||
      std::any_of(pads.begin(), pads.end(), [](int64_t v) { return v < 0; }))
    throw_error<ValueError>("[", cls,
                            "] kernel_size, stride and dilation must be positive and padding "
                            "non-negative");
}

}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, Size2 k, Size2 s, Padding2 p, Size2 d, int64_t g,
               bool with_bias, std::string pm)
    : in_channels(in),
      out_channels(out),
      kernel_size(k),
      stride(s),
      padding(std::move(p)),
      dilation(d),
      groups(g),
      padding_mode(std::move(pm)) {
  check_conv_options("Conv2d", padding_mode, padding.mode == "same", s.h != 1 || s.w != 1, in, out,
                     g, {k.h, k.w, s.h, s.w, d.h, d.w}, {padding.h, padding.w});
  if (padding.mode == "same") conv_same_padding(k.h, k.w, d.h, d.w, "Conv2d");
  const int64_t fan_in = checked_numel("Conv2d", {in / g, k.h, k.w});
  double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  weight = register_parameter("weight", uniform_init({out, in / g, k.h, k.w}, bound));
  if (with_bias) bias = register_parameter("bias", uniform_init({out}, bound));
  register_method("forward", &Conv2d::forward, {"input"});
}

namespace {
// f(x, padding): the convolution of the input, padded first unless padding_mode is zeros
template <class F>
Tensor conv2d_forward(const Conv2d& m, const Tensor& input, F&& f) {
  if (m.padding_mode == "zeros")
    return f(input,
             m.padding.mode.empty() ? ConvPadding(m.padding.list()) : ConvPadding(m.padding.mode));
  const auto p =
      m.padding.mode == "same"
          ? conv_same_padding(m.kernel_size.h, m.kernel_size.w, m.dilation.h, m.dilation.w)
          : std::array<int64_t, 4>{m.padding.w, m.padding.w, m.padding.h, m.padding.h};
  return f(pad(input, {p[0], p[1], p[2], p[3]}, m.padding_mode), ConvPadding(IntOrList{0, 0}));
}
}  // namespace

Tensor Conv2d::forward(const Tensor& input) {
  return conv2d_forward(*this, input, [&](const Tensor& x, const ConvPadding& p) {
    return conv2d(x, weight, bias, stride.list(), p, dilation.list(), groups);
  });
}

Tensor Conv2d::forward_relu(const Tensor& input) {
  return conv2d_forward(*this, input, [&](const Tensor& x, const ConvPadding& p) {
    return conv2d_relu(x, weight, bias, stride.list(), p, dilation.list(), groups);
  });
}

Tensor Conv2d::forward_batch_norm(const Tensor& input, const Tensor& running_mean,
                                  const Tensor& running_var, const Tensor& bn_weight,
                                  const Tensor& bn_bias, double eps, bool relu) {
  return conv2d_forward(*this, input, [&](const Tensor& x, const ConvPadding& p) {
    return conv2d_batch_norm(x, weight, bias, stride.list(), p, dilation.list(), groups,
                             running_mean, running_var, bn_weight, bn_bias, eps, relu);
  });
}

std::string Conv2d::extra_repr() const {
  std::ostringstream os;
  os << in_channels << ", " << out_channels << ", kernel_size=(" << kernel_size.h << ", "
     << kernel_size.w << "), stride=(" << stride.h << ", " << stride.w << ")";
  if (!padding.mode.empty())
    os << ", padding=" << padding.mode;
  else if (padding.h || padding.w)
    os << ", padding=(" << padding.h << ", " << padding.w << ")";
  if (dilation.h != 1 || dilation.w != 1)
    os << ", dilation=(" << dilation.h << ", " << dilation.w << ")";
  if (groups != 1) os << ", groups=" << groups;
  if (!bias.defined()) os << ", bias=False";
  if (padding_mode != "zeros") os << ", padding_mode=" << padding_mode;
  return os.str();
}

}  // namespace td::nn

namespace td::nn {

Padding1::Padding1(const std::string& m) : mode(m) {
  if (mode != "same" && mode != "valid")
    throw_error<ValueError>("[Conv1d] invalid padding string '", mode,
                            "', should be one of 'valid' or 'same'");
}

Conv1d::Conv1d(int64_t in, int64_t out, int64_t k, int64_t s, Padding1 p, int64_t d, int64_t g,
               bool with_bias, std::string pm)
    : in_channels(in),
      out_channels(out),
      kernel_size(k),
      stride(s),
      padding(std::move(p)),
      dilation(d),
      groups(g),
      padding_mode(std::move(pm)) {
  check_conv_options("Conv1d", padding_mode, padding.mode == "same", s != 1, in, out, g, {k, s, d},
                     {padding.value});
  if (padding.mode == "same") conv_same_padding(1, k, 1, d, "Conv1d");
  const int64_t fan_in = checked_numel("Conv1d", {in / g, k});
  double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  weight = register_parameter("weight", uniform_init({out, in / g, k}, bound));
  if (with_bias) bias = register_parameter("bias", uniform_init({out}, bound));
  register_method("forward", &Conv1d::forward, {"input"});
}

Tensor Conv1d::forward(const Tensor& input) {
  if (padding_mode == "zeros")
    return conv1d(input, weight, bias, stride,
                  padding.mode.empty() ? ConvPadding(padding.value) : ConvPadding(padding.mode),
                  dilation, groups);
  int64_t lo = padding.value, hi = padding.value;
  if (padding.mode == "same") {
    const auto p = conv_same_padding(1, kernel_size, 1, dilation, "Conv1d");
    lo = p[0];
    hi = p[1];
  }
  // pad's circular mode takes a batch dim: give an unbatched input one
  const bool unbatched = input.dim() == 2;
  Tensor x = pad(unbatched ? input.unsqueeze(0) : input, {lo, hi}, padding_mode);
  return conv1d(unbatched ? x.squeeze(0) : x, weight, bias, stride, 0, dilation, groups);
}

std::string Conv1d::extra_repr() const {
  std::ostringstream os;
  os << in_channels << ", " << out_channels << ", kernel_size=(" << kernel_size << ",), stride=("
     << stride << ",)";
  if (!padding.mode.empty())
    os << ", padding=" << padding.mode;
  else if (padding.value)
    os << ", padding=(" << padding.value << ",)";
  if (dilation != 1) os << ", dilation=(" << dilation << ",)";
  if (groups != 1) os << ", groups=" << groups;
  if (!bias.defined()) os << ", bias=False";
  if (padding_mode != "zeros") os << ", padding_mode=" << padding_mode;
  return os.str();
}

}  // namespace td::nn
