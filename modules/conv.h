#pragma once
// Conv2d, and Size2: an int or an {h, w} pair as PyTorch's _pair accepts.
#include <initializer_list>

#include "modules/module.h"

namespace td::nn {

struct Size2 {
  Size2(int64_t v) : h(v), w(v) {}           // NOLINT: 3 means {3, 3}
  Size2(std::initializer_list<int64_t> hw);  // exactly two values (ValueError)
  IntList list() const { return {h, w}; }
  int64_t h, w;
};

// Weight [out, in / groups, kh, kw] and bias [out], U(-b, b) with b = 1/sqrt(fan_in).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride = 1,
         Size2 padding = 0, Size2 dilation = 1, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& input);

  int64_t in_channels, out_channels;
  Size2 kernel_size, stride, padding, dilation;
  int64_t groups;
  Param weight, bias;

 protected:
  std::string extra_repr() const override;
};

}  // namespace td::nn
