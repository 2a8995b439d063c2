#include "modules/pooling.h"

#include <sstream>

#include "engine/ops.h"

namespace td::nn {

MaxPool2d::MaxPool2d(Size2 k, std::optional<Size2> s, Size2 p, Size2 d)
    : kernel_size(k), stride(s ? *s : k), padding(p), dilation(d) {
  register_method("forward", &MaxPool2d::forward, {"input"});
}

Tensor MaxPool2d::forward(const Tensor& input) {
  return max_pool2d(input, kernel_size.list(), stride.list(), padding.list(), dilation.list());
}

std::string MaxPool2d::extra_repr() const {
  std::ostringstream os;
  os << "kernel_size=(" << kernel_size.h << ", " << kernel_size.w << "), stride=(" << stride.h
     << ", " << stride.w << "), padding=(" << padding.h << ", " << padding.w << "), dilation=("
     << dilation.h << ", " << dilation.w << ")";
  return os.str();
}

}  // namespace td::nn
