// The 1-D pools (the 2-D pool ops over a unit height) and the adaptive pools (reductions over
// torch's adaptive windows), composed of other ops so vmap batches them through their rules.
#include <algorithm>
#include <string>
#include <vector>

#include "engine/ops.h"

namespace td {
namespace {

int64_t one_value(const char* op, const char* what, const IntList& v, int64_t fallback) {
  if (v.empty()) return fallback;
  if (v.size() != 1) throw_error<ValueError>("[", op, "] ", what, " must have 1 value, got ", v);
  return v[0];
}

void check_1d_input(const char* op, const Tensor& x) {
  if (x.dim() != 2 && x.dim() != 3)
    throw_error<ValueError>("[", op, "] expects a 2-D or 3-D input, got ", shape_word(), " ",
                            x.shape());
}

// Runs a 2-D pool on x [.., 1, L], its errors renamed for the 1-D op and shape.
template <class F>
auto as_1d(const char* op, const Tensor& x, F&& pool2d) {
  try {
    return pool2d(x.unsqueeze(-2));
  } catch (const ValueError& e) {
    std::string m = e.what();
    const size_t end = m.find("] ");
    if (m.rfind('[', 0) == 0 && end != std::string::npos) m = m.substr(end + 2);
    throw_error<ValueError>("[", op, "] input of ", shape_word(), " ", x.shape(), ": ", m);
  }
}

struct Pool1dArgs {
  int64_t k, s, p, d;
};

Pool1dArgs pool1d_args(const char* op, const Tensor& x, const IntOrList& kernel,
                       const IntOrList& stride, const IntOrList& padding,
                       const IntOrList& dilation) {
  check_1d_input(op, x);
  Pool1dArgs a{};
  if (kernel.values.empty())
    throw_error<ValueError>("[", op, "] kernel_size must have 1 value, got []");
  a.k = one_value(op, "kernel_size", kernel.values, 0);
  a.s = one_value(op, "stride", stride.values, a.k);
  a.p = one_value(op, "padding", padding.values, 0);
  a.d = one_value(op, "dilation", dilation.values, 1);
  return a;
}

// Reduces dim d (negative) of x to `out` adaptive windows.
Tensor adaptive_along(const Tensor& x, int64_t d, int64_t out, bool is_max) {
  const int64_t n = x.size(d);
  auto reduce = [&](const Tensor& t, int64_t dim) {
    return is_max ? amax(t, dim, true) : mean(t, dim, true);
  };
  if (out == 1) return reduce(x, d);
  if (n % out == 0)  // equal windows: one reduction over a split dim
    return reduce(x.unflatten(d, {out, n / out}), d).squeeze(d);
  std::vector<Tensor> parts;
  parts.reserve(out);
  for (int64_t i = 0; i < out; ++i) {
    const int64_t lo = i * n / out, hi = ((i + 1) * n + out - 1) / out;
    parts.push_back(reduce(x.narrow(d, lo, hi - lo), d));
  }
  return cat(parts, d);
}

Tensor adaptive2d(const char* op, const Tensor& x,
                  const std::array<std::optional<int64_t>, 2>& size, bool is_max) {
  if (x.dim() != 3 && x.dim() != 4)
    throw_error<ValueError>("[", op, "] expects a 3-D or 4-D input, got ", shape_word(), " ",
                            x.shape());
  const int64_t h = x.size(-2), w = x.size(-1);
  const int64_t oh = size[0].value_or(h), ow = size[1].value_or(w);
  if (h == 0 || w == 0 || oh < 1 || ow < 1)
    throw_error<ValueError>("[", op, "] output_size (", oh, ", ", ow,
                            ") must be positive and the input's spatial dims non-empty, got ",
                            shape_word(), " ", x.shape());
  if (oh == 1 && ow == 1)  // global pooling: one reduction
    return is_max ? amax(x, IntList{-2, -1}, true) : mean(x, IntList{-2, -1}, true);
  // a window is the product of a row and a column window: pool along W, then along H
  return adaptive_along(adaptive_along(x, -1, ow, is_max), -2, oh, is_max);
}

}  // namespace

Tensor max_pool1d(const Tensor& x, const IntOrList& kernel_size, const IntOrList& stride,
                  const IntOrList& padding, const IntOrList& dilation, bool ceil_mode) {
  const auto a = pool1d_args("max_pool1d", x, kernel_size, stride, padding, dilation);
  return as_1d("max_pool1d", x, [&](const Tensor& x4) {
           return max_pool2d(x4, {1, a.k}, {1, a.s}, {0, a.p}, {1, a.d}, ceil_mode);
         })
      .squeeze(-2);
}

std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, const IntOrList& kernel_size,
                                                   const IntOrList& stride,
                                                   const IntOrList& padding,
                                                   const IntOrList& dilation, bool ceil_mode) {
  const auto a = pool1d_args("max_pool1d", x, kernel_size, stride, padding, dilation);
  auto [out, idx] = as_1d("max_pool1d", x, [&](const Tensor& x4) {
    return max_pool2d_with_indices(x4, {1, a.k}, {1, a.s}, {0, a.p}, {1, a.d}, ceil_mode);
  });
  // in a plane of height 1, iy * W + ix is ix
  return {out.squeeze(-2), idx.squeeze(-2)};
}

Tensor avg_pool1d(const Tensor& x, const IntOrList& kernel_size, const IntOrList& stride,
                  const IntOrList& padding, bool ceil_mode, bool count_include_pad) {
  const auto a = pool1d_args("avg_pool1d", x, kernel_size, stride, padding, 1);
  return as_1d("avg_pool1d", x, [&](const Tensor& x4) {
           return avg_pool2d(x4, {1, a.k}, {1, a.s}, {0, a.p}, ceil_mode, count_include_pad);
         })
      .squeeze(-2);
}

Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size) {
  check_1d_input("adaptive_avg_pool1d", x);
  if (x.size(-1) == 0 || output_size < 1)
    throw_error<ValueError>("[adaptive_avg_pool1d] output_size ", output_size,
                            " must be positive and the input's last dim non-empty, got ",
                            shape_word(), " ", x.shape());
  return adaptive_along(x, -1, output_size, false);
}

Tensor adaptive_avg_pool2d(const Tensor& x,
                           const std::array<std::optional<int64_t>, 2>& output_size) {
  return adaptive2d("adaptive_avg_pool2d", x, output_size, false);
}

Tensor adaptive_max_pool2d(const Tensor& x,
                           const std::array<std::optional<int64_t>, 2>& output_size) {
  return adaptive2d("adaptive_max_pool2d", x, output_size, true);
}

}  // namespace td
