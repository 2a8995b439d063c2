#include "modules/conv.h"

#include <cmath>
#include <sstream>

#include "engine/ops.h"

namespace td::nn {

Size2::Size2(std::initializer_list<int64_t> hw) {
  if (hw.size() != 2) throw_error<ValueError>("[Size2] expected 2 values (h, w), got ", hw.size());
  h = *hw.begin();
  w = *(hw.begin() + 1);
}

Conv2d::Conv2d(int64_t in, int64_t out, Size2 k, Size2 s, Size2 p, Size2 d, int64_t g,
               bool with_bias)
    : in_channels(in),
      out_channels(out),
      kernel_size(k),
      stride(s),
      padding(p),
      dilation(d),
      groups(g) {
  if (g <= 0) throw_error<ValueError>("[Conv2d] groups must be positive, got ", g);
  if (in % g != 0) throw_error<ValueError>("[Conv2d] in_channels must be divisible by groups");
  if (out % g != 0) throw_error<ValueError>("[Conv2d] out_channels must be divisible by groups");
  if (k.h <= 0 || k.w <= 0 || s.h <= 0 || s.w <= 0 || d.h <= 0 || d.w <= 0 || p.h < 0 || p.w < 0)
    throw_error<ValueError>(
        "[Conv2d] kernel_size, stride and dilation must be positive and "
        "padding non-negative");
  const int64_t fan_in = checked_numel("Conv2d", {in / g, k.h, k.w});
  double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  weight = register_parameter("weight", rand({out, in / g, k.h, k.w}) * (2 * bound) - bound);
  if (with_bias) bias = register_parameter("bias", rand({out}) * (2 * bound) - bound);
  register_method("forward", &Conv2d::forward, {"input"});
}

Tensor Conv2d::forward(const Tensor& input) {
  return conv2d(input, weight, bias, stride.list(), padding.list(), dilation.list(), groups);
}

std::string Conv2d::extra_repr() const {
  std::ostringstream os;
  os << in_channels << ", " << out_channels << ", kernel_size=(" << kernel_size.h << ", "
     << kernel_size.w << "), stride=(" << stride.h << ", " << stride.w << ")";
  if (padding.h || padding.w) os << ", padding=(" << padding.h << ", " << padding.w << ")";
  if (dilation.h != 1 || dilation.w != 1)
    os << ", dilation=(" << dilation.h << ", " << dilation.w << ")";
  if (groups != 1) os << ", groups=" << groups;
  if (!bias.defined()) os << ", bias=False";
  return os.str();
}

}  // namespace td::nn
