#pragma once
// The public ops, as free functions with PyTorch's names, argument order, broadcasting and
// negative dims. An undefined Tensor ({}) stands for an absent optional argument.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "engine/tensor.h"

namespace td {

// ---- factories (inside vmap they make unbatched tensors) ----
Tensor empty(const Shape& shape, DType dtype = kFloat32);
Tensor zeros(const Shape& shape, DType dtype = kFloat32);
Tensor ones(const Shape& shape, DType dtype = kFloat32);
Tensor full(const Shape& shape, double value, DType dtype = kFloat32);
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor arange(double end, DType dtype = kInt64);
Tensor arange(double start, double end, double step = 1, DType dtype = kInt64);
// A tensor holding `values` with `shape` (default: 1-D); the dtype follows T.
template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& shape);
template <class T>
Tensor tensor(const std::vector<T>& values) {
  return tensor(values, Shape{static_cast<int64_t>(values.size())});
}
Tensor tensor(std::initializer_list<float> values, const Shape& shape);
Tensor tensor(std::initializer_list<float> values);
Tensor scalar_tensor(double value, DType dtype = kFloat32);  // 0-d

// random (counter-based; see random.h)
Tensor rand(const Shape& shape, DType dtype = kFloat32);   // U[0, 1)
Tensor randn(const Shape& shape, DType dtype = kFloat32);  // N(0, 1)
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);
Tensor bernoulli(const Tensor& p);  // 1 with probability p, same dtype as p
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);

// ---- element-wise ----
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, bool tanh_approximation = false);
Tensor logical_not(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integers give float32
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// scalar overloads: the scalar takes PyTorch's "wrapped number" promotion
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& a, double b);
Tensor maximum(const Tensor& a, double b);
Tensor minimum(const Tensor& a, double b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);
// The 0-d tensor a scalar operand of t becomes.
Tensor wrap_scalar(double value, const Tensor& like);

Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, double b);
Tensor operator<=(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor operator>=(const Tensor& a, double b);
Tensor operator&&(const Tensor& a, const Tensor& b);
Tensor operator||(const Tensor& a, const Tensor& b);
Tensor operator!(const Tensor& a);

// ---- reductions (dims empty = all dims) ----
Tensor sum(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor var(const Tensor& x, const IntList& dims = {}, bool unbiased = true, bool keepdim = false);
Tensor std(const Tensor& x, const IntList& dims = {}, bool unbiased = true, bool keepdim = false);
Tensor amax(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
// the same over one dim given as an integer: sum(x, -1)
template <SingleDim I>
Tensor sum(const Tensor& x, I dim, bool keepdim = false) {
  return sum(x, IntList{static_cast<int64_t>(dim)}, keepdim);
}
template <SingleDim I>
Tensor mean(const Tensor& x, I dim, bool keepdim = false) {
  return mean(x, IntList{static_cast<int64_t>(dim)}, keepdim);
}
template <SingleDim I>
Tensor var(const Tensor& x, I dim, bool unbiased = true, bool keepdim = false) {
  return var(x, IntList{static_cast<int64_t>(dim)}, unbiased, keepdim);
}
template <SingleDim I>
Tensor std(const Tensor& x, I dim, bool unbiased = true, bool keepdim = false) {
  return std(x, IntList{static_cast<int64_t>(dim)}, unbiased, keepdim);
}
template <SingleDim I>
Tensor amax(const Tensor& x, I dim, bool keepdim = false) {
  return amax(x, IntList{static_cast<int64_t>(dim)}, keepdim);
}
template <SingleDim I>
Tensor amin(const Tensor& x, I dim, bool keepdim = false) {
  return amin(x, IntList{static_cast<int64_t>(dim)}, keepdim);
}
// nullopt: index into the flattened tensor
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// ---- linear algebra ----
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
// relu(linear(x, weight, bias)) in one pass: the ReLU is applied as the GEMM stores its output
// (what Sequential runs for a Linear followed by a ReLU).
Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

// ---- nn functionals ----
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
// In training, updates running_mean/var in place (unbiased var) with momentum.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = {}, const Tensor& bias = {}, bool training = false,
                  double momentum = 0.1, double eps = 1e-5);
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const IntList& stride = {1, 1}, const IntList& padding = {0, 0},
              const IntList& dilation = {1, 1}, int64_t groups = 1);
Tensor max_pool2d(const Tensor& x, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0, 0}, const IntList& dilation = {1, 1});
Tensor avg_pool2d(const Tensor& x, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0, 0});
Tensor embedding(const Tensor& indices, const Tensor& weight);

// ---- join, split, index ----
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const IntList& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);

// ---- in place (return self) ----
Tensor& add_(Tensor& self, const Tensor& other);
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor& copy_(Tensor& self, const Tensor& src);
Tensor& fill_(Tensor& self, double value);

// ---- comparisons of whole tensors (data-dependent: RuntimeError on batched tensors) ----
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
bool equal(const Tensor& a, const Tensor& b);  // same shape and values

}  // namespace td
