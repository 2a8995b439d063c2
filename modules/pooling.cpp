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

namespace td::nn {

MaxPool1d::MaxPool1d(int64_t k, std::optional<int64_t> s, int64_t p, int64_t d, bool indices,
                     bool c)
    : kernel_size(k),
      stride(s ? *s : k),
      padding(p),
      dilation(d),
      return_indices(indices),
      ceil_mode(c) {
  if (return_indices)
    register_method("forward", &MaxPool1d::forward_with_indices, {"input"});
  else
    register_method("forward", &MaxPool1d::forward, {"input"});
}

Tensor MaxPool1d::forward(const Tensor& input) {
  return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode);
}

Value MaxPool1d::forward_with_indices(const Tensor& input) {
  auto [out, indices] =
      max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode);
  return Value(ValueList{Value(out), Value(indices)});
}

std::string MaxPool1d::extra_repr() const {
  std::ostringstream os;
  os << "kernel_size=" << kernel_size << ", stride=" << stride << ", padding=" << padding
     << ", dilation=" << dilation << ", ceil_mode=" << (ceil_mode ? "True" : "False");
  return os.str();
}

AvgPool1d::AvgPool1d(int64_t k, std::optional<int64_t> s, int64_t p, bool c, bool include_pad)
    : kernel_size(k), stride(s ? *s : k), padding(p), ceil_mode(c), count_include_pad(include_pad) {
  register_method("forward", &AvgPool1d::forward, {"input"});
}

Tensor AvgPool1d::forward(const Tensor& input) {
  return avg_pool1d(input, kernel_size, stride, padding, ceil_mode, count_include_pad);
}

// torch keeps AvgPool1d's sizes as 1-tuples
std::string AvgPool1d::extra_repr() const {
  std::ostringstream os;
  os << "kernel_size=(" << kernel_size << ",), stride=(" << stride << ",), padding=(" << padding
     << ",)";
  return os.str();
}

AdaptiveAvgPool1d::AdaptiveAvgPool1d(int64_t n) : output_size(n) {
  register_method("forward", &AdaptiveAvgPool1d::forward, {"input"});
}

Tensor AdaptiveAvgPool1d::forward(const Tensor& input) {
  return adaptive_avg_pool1d(input, output_size);
}

std::string AdaptiveAvgPool1d::extra_repr() const {
  return "output_size=" + std::to_string(output_size);
}

namespace {
std::string adaptive_repr(const AdaptiveSize2& s) {
  auto one = [](const std::optional<int64_t>& v) {
    return v ? std::to_string(*v) : std::string("None");
  };
  if (!s.pair) return "output_size=" + one(s.hw[0]);
  return "output_size=(" + one(s.hw[0]) + ", " + one(s.hw[1]) + ")";
}
}  // namespace

AdaptiveAvgPool2d::AdaptiveAvgPool2d(AdaptiveSize2 s) : output_size(s) {
  register_method("forward", &AdaptiveAvgPool2d::forward, {"input"});
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& input) {
  return adaptive_avg_pool2d(input, output_size.hw);
}

std::string AdaptiveAvgPool2d::extra_repr() const { return adaptive_repr(output_size); }

AdaptiveMaxPool2d::AdaptiveMaxPool2d(AdaptiveSize2 s, bool indices)
    : output_size(s), return_indices(indices) {
  if (return_indices)
    throw_error<ValueError>("[AdaptiveMaxPool2d] return_indices=True is not supported");
  register_method("forward", &AdaptiveMaxPool2d::forward, {"input"});
}

Tensor AdaptiveMaxPool2d::forward(const Tensor& input) {
  return adaptive_max_pool2d(input, output_size.hw);
}

std::string AdaptiveMaxPool2d::extra_repr() const { return adaptive_repr(output_size); }

}  // namespace td::nn
