#pragma once
// MaxPool2d and AvgPool2d.
#include <optional>

#include "modules/conv.h"

namespace td::nn {

// stride defaults to kernel_size; ceil_mode as max_pool2d's. With return_indices the module's
// "forward" method (what calling it and functional_vmap run) returns [output, indices], as
// torch's; the C++ forward() returns the output only.
class MaxPool2d : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(MaxPool2d); }
  explicit MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt,
                     Size2 padding = 0, Size2 dilation = 1, bool ceil_mode = false,
                     bool return_indices = false);
  Tensor forward(const Tensor& input);
  Value forward_with_indices(const Tensor& input);

  Size2 kernel_size, stride, padding, dilation;
  bool ceil_mode, return_indices;

 protected:
  std::string extra_repr() const override;
};

// stride defaults to kernel_size; the options as avg_pool2d's.
class AvgPool2d : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(AvgPool2d); }
  explicit AvgPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt,
                     Size2 padding = 0, bool ceil_mode = false, bool count_include_pad = true,
                     std::optional<int64_t> divisor_override = std::nullopt);
  Tensor forward(const Tensor& input);

  Size2 kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
  std::optional<int64_t> divisor_override;

 protected:
  std::string extra_repr() const override;
};

}  // namespace td::nn
