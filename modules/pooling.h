#pragma once
// MaxPool2d.
#include <optional>

#include "modules/conv.h"

namespace td::nn {

// stride defaults to kernel_size; ceil_mode as max_pool2d's.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt,
                     Size2 padding = 0, Size2 dilation = 1, bool ceil_mode = false);
  Tensor forward(const Tensor& input);

  Size2 kernel_size, stride, padding, dilation;
  bool ceil_mode;

 protected:
  std::string extra_repr() const override;
};

}  // namespace td::nn
