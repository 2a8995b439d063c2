#pragma once
// Conv1d, Conv2d, and Size2: an int or an {h, w} pair as PyTorch's _pair accepts.
#include <cstddef>
#include <initializer_list>
#include <string>

#include "modules/module.h"

namespace td::nn {

struct Size2 {
  Size2(int64_t v) : h(v), w(v) {}           // NOLINT: 3 means {3, 3}
  Size2(std::initializer_list<int64_t> hw);  // exactly two values (ValueError)
  IntList list() const { return {h, w}; }
  int64_t h, w;
  bool pair = false;  // given as {h, w}: the pooling modules print it as a tuple, as torch
};

// Conv2d's padding: a Size2, or PyTorch's string padding "same" or "valid" (in `mode`; h and w
// are then 0).
struct Padding2 : Size2 {
  Padding2(int64_t v) : Size2(v) {}                           // NOLINT
  Padding2(std::initializer_list<int64_t> hw) : Size2(hw) {}  // NOLINT
  Padding2(Size2 s) : Size2(s) {}                             // NOLINT
  Padding2(const std::string& mode);                          // NOLINT
  template <size_t N>
  Padding2(const char (&mode)[N]) : Padding2(std::string(mode)) {}  // NOLINT: a literal only
  std::string mode;
};

// Conv1d's padding: an int, or PyTorch's string padding "same" or "valid" (in `mode`; value 0).
struct Padding1 {
  Padding1(int64_t v) : value(v) {}   // NOLINT
  Padding1(const std::string& mode);  // NOLINT
  template <size_t N>
  Padding1(const char (&mode)[N]) : Padding1(std::string(mode)) {}  // NOLINT: a literal only
  int64_t value = 0;
  std::string mode;
};

// Weight [out, in / groups, k] and bias [out], U(-b, b) with b = 1/sqrt(fan_in); input [N, C, L]
// or [C, L]. padding_mode as Conv2d's.
class Conv1d : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Conv1d); }
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
         Padding1 padding = 0, int64_t dilation = 1, int64_t groups = 1, bool bias = true,
         std::string padding_mode = "zeros");
  Tensor forward(const Tensor& input);

  int64_t in_channels, out_channels, kernel_size, stride;
  Padding1 padding;
  int64_t dilation, groups;
  std::string padding_mode;
  Param weight, bias;

 protected:
  std::string extra_repr() const override;
};

// Weight [out, in / groups, kh, kw] and bias [out], U(-b, b) with b = 1/sqrt(fan_in).
// padding_mode: "zeros", "reflect", "replicate" or "circular", as PyTorch's.
class Conv2d : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Conv2d); }
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride = 1,
         Padding2 padding = 0, Size2 dilation = 1, int64_t groups = 1, bool bias = true,
         std::string padding_mode = "zeros");
  Tensor forward(const Tensor& input);
  // relu(forward(input)), the ReLU applied as the output is written (Sequential's Conv2d, ReLU)
  Tensor forward_relu(const Tensor& input);
  // An eval-mode BatchNorm of the output (and a ReLU if relu) applied as it is written, with the
  // bits of the separate modules (Sequential's Conv2d, BatchNorm2d in eval mode): engine/ops.h's
  // conv2d_batch_norm.
  Tensor forward_batch_norm(const Tensor& input, const Tensor& running_mean,
                            const Tensor& running_var, const Tensor& bn_weight,
                            const Tensor& bn_bias, double eps, bool relu);

  int64_t in_channels, out_channels;
  Size2 kernel_size, stride;
  Padding2 padding;
  Size2 dilation;
  int64_t groups;
  std::string padding_mode;
  Param weight, bias;

 protected:
  std::string extra_repr() const override;
};

}  // namespace td::nn
