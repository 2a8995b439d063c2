#pragma once
// MaxPool2d.
#include <optional>

#include "modules/conv.h"

namespace td::nn {

// stride defaults to kernel_size.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt,
                     Size2 padding = 0, Size2 dilation = 1);
  Tensor forward(const Tensor& input);

  Size2 kernel_size, stride, padding, dilation;

 protected:
  std::string extra_repr() const override;
};

}  // namespace td::nn
