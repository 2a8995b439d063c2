#pragma once
// MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool1d/2d and AdaptiveMaxPool2d.
#include <array>
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

// stride defaults to kernel_size; as max_pool1d. return_indices as MaxPool2d's.
class MaxPool1d : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(MaxPool1d); }
  explicit MaxPool1d(int64_t kernel_size, std::optional<int64_t> stride = std::nullopt,
                     int64_t padding = 0, int64_t dilation = 1, bool return_indices = false,
                     bool ceil_mode = false);
  Tensor forward(const Tensor& input);
  Value forward_with_indices(const Tensor& input);

  int64_t kernel_size, stride, padding, dilation;
  bool return_indices, ceil_mode;

 protected:
  std::string extra_repr() const override;
};

// stride defaults to kernel_size; as avg_pool1d.
class AvgPool1d : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(AvgPool1d); }
  explicit AvgPool1d(int64_t kernel_size, std::optional<int64_t> stride = std::nullopt,
                     int64_t padding = 0, bool ceil_mode = false, bool count_include_pad = true);
  Tensor forward(const Tensor& input);

  int64_t kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;

 protected:
  std::string extra_repr() const override;
};

class AdaptiveAvgPool1d : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override {
    return &typeid(AdaptiveAvgPool1d);
  }
  explicit AdaptiveAvgPool1d(int64_t output_size);
  Tensor forward(const Tensor& input);

  int64_t output_size;

 protected:
  std::string extra_repr() const override;
};

// An adaptive pool's output size: one integer, or an {h, w} pair whose entries may be
// std::nullopt (torch's None: that dim keeps the input's size).
struct AdaptiveSize2 {
  AdaptiveSize2(int64_t v) : hw{v, v} {}  // NOLINT
  AdaptiveSize2(std::optional<int64_t> h, std::optional<int64_t> w) : hw{h, w}, pair(true) {}
  std::array<std::optional<int64_t>, 2> hw;
  bool pair = false;  // printed as a tuple, as given
};

class AdaptiveAvgPool2d : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override {
    return &typeid(AdaptiveAvgPool2d);
  }
  explicit AdaptiveAvgPool2d(AdaptiveSize2 output_size);
  Tensor forward(const Tensor& input);

  AdaptiveSize2 output_size;

 protected:
  std::string extra_repr() const override;
};

// return_indices is refused (ValueError): td has no adaptive max pool with indices.
class AdaptiveMaxPool2d : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override {
    return &typeid(AdaptiveMaxPool2d);
  }
  explicit AdaptiveMaxPool2d(AdaptiveSize2 output_size, bool return_indices = false);
  Tensor forward(const Tensor& input);

  AdaptiveSize2 output_size;
  bool return_indices = false;

 protected:
  std::string extra_repr() const override;
};

}  // namespace td::nn
