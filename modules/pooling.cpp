#include "modules/pooling.h"

#include <sstream>

#include "engine/ops.h"

namespace td::nn {

MaxPool2d::MaxPool2d(Size2 k, std::optional<Size2> s, Size2 p, Size2 d, bool c, bool indices)
    : kernel_size(k),
      stride(s ? *s : k),
      padding(p),
      dilation(d),
      ceil_mode(c),
      return_indices(indices) {
  if (return_indices)
    register_method("forward", &MaxPool2d::forward_with_indices, {"input"});
  else
    register_method("forward", &MaxPool2d::forward, {"input"});
}

Value MaxPool2d::forward_with_indices(const Tensor& input) {
  auto [out, indices] = max_pool2d_with_indices(input, kernel_size.list(), stride.list(),
                                                padding.list(), dilation.list(), ceil_mode);
  return Value(ValueList{Value(out), Value(indices)});
}

Tensor MaxPool2d::forward(const Tensor& input) {
  return max_pool2d(input, kernel_size.list(), stride.list(), padding.list(), dilation.list(),
                    ceil_mode);
}

namespace {
// As torch prints a size: as given, one integer ("2") or a pair ("(2, 3)", "(2, 2)").
std::string size_repr(const Size2& v) {
  std::ostringstream os;
  if (v.h == v.w && !v.pair)
    os << v.h;
  else
    os << "(" << v.h << ", " << v.w << ")";
  return os.str();
}
}  // namespace

AvgPool2d::AvgPool2d(Size2 k, std::optional<Size2> s, Size2 p, bool c, bool include_pad,
                     std::optional<int64_t> divisor)
    : kernel_size(k),
      stride(s ? *s : k),
      padding(p),
      ceil_mode(c),
      count_include_pad(include_pad),
      divisor_override(divisor) {
  register_method("forward", &AvgPool2d::forward, {"input"});
}

Tensor AvgPool2d::forward(const Tensor& input) {
  return avg_pool2d(input, kernel_size.list(), stride.list(), padding.list(), ceil_mode,
                    count_include_pad, divisor_override);
}

// torch prints only these three
std::string AvgPool2d::extra_repr() const {
  return "kernel_size=" + size_repr(kernel_size) + ", stride=" + size_repr(stride) +
         ", padding=" + size_repr(padding);
}

std::string MaxPool2d::extra_repr() const {
  std::ostringstream os;
  os << "kernel_size=" << size_repr(kernel_size) << ", stride=" << size_repr(stride)
     << ", padding=" << size_repr(padding) << ", dilation=" << size_repr(dilation)
     << ", ceil_mode=" << (ceil_mode ? "True" : "False");
  return os.str();
}

}  // namespace td::nn
