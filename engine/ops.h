#pragma once
// The public ops, as free functions with PyTorch's names, argument order, broadcasting and
// negative dims. An undefined Tensor ({}) stands for an absent optional argument.
#include <array>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "engine/op_list.h"
#include "engine/tensor.h"

namespace td {

// ---- factories (inside vmap they make unbatched tensors) ----
Tensor empty(const Shape& shape, DType dtype = kFloat32);
Tensor zeros(const Shape& shape, DType dtype = kFloat32);
Tensor ones(const Shape& shape, DType dtype = kFloat32);
// Without a dtype, as torch.full: the value's type decides (bool, int64 or float32).
Tensor full(const Shape& shape, Scalar value, std::optional<DType> dtype = std::nullopt);
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);
// As PyTorch: without a dtype the result is int64 when every bound is of an integral type and
// float32 (the default dtype) when any is floating: arange(5) int64, arange(0, 1, 0.25) float32.
Tensor arange(Scalar end, std::optional<DType> dtype = std::nullopt);
Tensor arange(Scalar start, Scalar end, Scalar step = 1, std::optional<DType> dtype = std::nullopt);
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
// float32 dropout's keep mask: 1 with probability 1 - p, else 0, from the draws dropout(x, p)
// takes on the next stream (see philox_keep_mask): dropout(x, p) == x * mask / (1 - p)
Tensor dropout_mask(const Shape& shape, double p);
// A uniform permutation of 0..n-1 (its own op: a Fisher-Yates shuffle per set).
Tensor randperm(int64_t n, DType dtype = kInt64);
// Sampling, as torch's, drawn through rand and randn (engine/ops/sampling.cpp), so each set of a
// vmap draws the same numbers batched, chunked or looped. randint: integers in [low, high).
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = kInt64);
Tensor randint(int64_t high, const Shape& shape, DType dtype = kInt64);
// mean + std * N(0, 1), mean and std broadcast; std < 0 (or NaN) is a ValueError.
Tensor normal(const Tensor& mean, const Tensor& std);
Tensor normal(const Tensor& mean, double std = 1);
Tensor normal(double mean, const Tensor& std);
Tensor normal(double mean, double std, const Shape& shape, DType dtype = kFloat32);
// In place, returning self: U[from, to) and N(mean, std) draws of self's shape and dtype.
const Tensor& uniform_(const Tensor& self, double from = 0, double to = 1);
const Tensor& normal_(const Tensor& self, double mean = 0, double std = 1);
// num_samples category indices (int64) per row of probs ([C] or [N, C]: non-negative weights,
// not necessarily normalised), with or without replacement: [num_samples] or [N, num_samples].
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);
// One category index per row of logits (the last dim), drawn with probability softmax(logits):
// torch.distributions.Categorical(logits=logits).sample(). Shape: logits' without its last dim.
Tensor categorical(const Tensor& logits);

// ---- element-wise ----
// The unary and binary ops of engine/op_list.h, declared from its lists, with their dtype rules:
//   Tensor neg(const Tensor& x); ... exp, log, sin (float32 for integer and bool inputs), floor,
//   ceil, round (half to even), sign (the dtype kept), logical_not, bitwise_not, ...
//   Tensor add(const Tensor& a, const Tensor& b); Tensor add(const Tensor& a, Scalar b); ...
// div is true division (integers give float32); remainder is a - b * floor(a / b) with the sign
// of b, as Python's %, fmod the same with the sign of a, as C's fmod; an integer divisor holding 0
// is a RuntimeError (torch's ZeroDivisionError). Bitwise ops (a & b, a | b, a ^ b, ~a) take bool
// and int64 tensors (bool with int64 promotes to int64); floating tensors raise TypeError as in
// PyTorch. A scalar operand takes PyTorch's "wrapped number" promotion (by its C++ type).
#define TD_X(name, family, kind, rule) Tensor name(const Tensor& x);
TD_UNARY_OPS(TD_X)
#undef TD_X
#define TD_BINARY_DECL_Own(name) Tensor name(const Tensor& a, const Tensor& b);
#define TD_BINARY_DECL_Plain(name) TD_BINARY_DECL_Own(name)
#define TD_BINARY_DECL_Scalar(name) TD_BINARY_DECL_Own(name) Tensor name(const Tensor& a, Scalar b);
#define TD_X(name, family, kind, rule, api) TD_BINARY_DECL_##api(name)
TD_BINARY_OPS(TD_X)
#undef TD_X
#undef TD_BINARY_DECL_Scalar
#undef TD_BINARY_DECL_Plain
#undef TD_BINARY_DECL_Own
Tensor sub(const Tensor& a, Scalar b);
Tensor pow(const Tensor& a, Scalar b);
Tensor pow(Scalar a, const Tensor& b);

Tensor gelu(const Tensor& x, bool tanh_approximation = false);
// A floating bound makes an integral x float32 (PyTorch's scalar promotion).
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
// Activations, with torch.nn.functional's names and defaults (the parameterless ones, silu, selu,
// mish, hardswish, hardsigmoid, logsigmoid, relu6, softsign, tanhshrink, come from op_list.h).
// Floating inputs only, as torch's, but hardtanh (integers too, its bounds truncated).
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor elu(const Tensor& x, double alpha = 1);
Tensor celu(const Tensor& x, double alpha = 1);
// log(1 + exp(beta x)) / beta, x itself where beta x > threshold
Tensor softplus(const Tensor& x, double beta = 1, double threshold = 20);
Tensor hardtanh(const Tensor& x, double min_val = -1, double max_val = 1);
// The first half of x along dim times the sigmoid of the second (dim's size must be even).
Tensor glu(const Tensor& x, int64_t dim = -1);
// x where x > 0, else weight * x; weight has 1 element or one per channel (dim 1; a 1-D input
// has one channel, as in torch 1.13).
Tensor prelu(const Tensor& x, const Tensor& weight);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// Bool masks of NaN, infinite and finite elements (integer and bool elements are always finite).
// Comparisons underneath, so vmap batches them through those ops' rules.
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);

// PyTorch's result_type: dimensioned tensors rank above 0-d tensors (by LOGICAL rank, so a
// per-set 0-d tensor inside vmap stays 0-d), which rank above scalars; a lower tier counts only
// when its category (bool < integral < floating) is higher: randn({2}) + scalar_tensor(1.0,
// kFloat64) is float32, arange(3) * 2.0 is float32. Undefined tensors are skipped.
DType result_type(const std::vector<Tensor>& tensors, const std::vector<Scalar>& scalars = {});

Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
Tensor where(const Tensor& cond, Scalar a, Scalar b);  // float32 for floats, int64 for ints
// torch's out-of-place masked_fill: x where mask is false, value (cast to x's dtype; a tensor
// value must be 0-d) where it is true; mask is bool and broadcasts with x.
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);
// The 0-d tensor a scalar operand of t becomes (its dtype is result_type({like}, {value})).
Tensor wrap_scalar(Scalar value, const Tensor& like);

Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator%(const Tensor& a, const Tensor& b);
Tensor operator%(const Tensor& a, Scalar b);
Tensor operator%(Scalar a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, Scalar b);
Tensor operator<=(const Tensor& a, Scalar b);
Tensor operator>(const Tensor& a, Scalar b);
Tensor operator>=(const Tensor& a, Scalar b);
Tensor operator<(Scalar a, const Tensor& b);
Tensor operator<=(Scalar a, const Tensor& b);
Tensor operator>(Scalar a, const Tensor& b);
Tensor operator>=(Scalar a, const Tensor& b);
// == and != are element-wise (bool tensors), as in PyTorch; use equal() for a bool answer.
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, Scalar b);
Tensor operator!=(const Tensor& a, Scalar b);
Tensor operator==(Scalar a, const Tensor& b);
Tensor operator!=(Scalar a, const Tensor& b);
Tensor operator&(const Tensor& a, const Tensor& b);  // bitwise_and
Tensor operator|(const Tensor& a, const Tensor& b);  // bitwise_or
Tensor operator^(const Tensor& a, const Tensor& b);  // bitwise_xor
Tensor operator~(const Tensor& a);                   // bitwise_not
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
// Whether every / any element is nonzero (Bool; NaN counts as nonzero), as torch.all / any.
Tensor all(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor any(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
template <SingleDim I>
Tensor all(const Tensor& x, I dim, bool keepdim = false) {
  return all(x, IntList{static_cast<int64_t>(dim)}, keepdim);
}
template <SingleDim I>
Tensor any(const Tensor& x, I dim, bool keepdim = false) {
  return any(x, IntList{static_cast<int64_t>(dim)}, keepdim);
}
// torch.max / torch.min: of every element (0-d; ValueError when x is empty), the values and
// indices along one dim, or the element-wise maximum / minimum of two tensors.
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& a, const Tensor& b);
Tensor min(const Tensor& a, const Tensor& b);
// nullopt: index into the flattened tensor
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// log(sum(exp(x))) over dims, computed stably (integer inputs give float32)
Tensor logsumexp(const Tensor& x, const IntList& dims, bool keepdim = false);
template <SingleDim I>
Tensor logsumexp(const Tensor& x, I dim, bool keepdim = false) {
  return logsumexp(x, IntList{static_cast<int64_t>(dim)}, keepdim);
}

// ---- scans and sorting along one dim (0-d: dim 0 or -1, as one element) ----
// torch.cumsum / torch.cumprod: integer and bool inputs give int64, floating ones keep their
// dtype (float32 accumulates in float64 and rounds each output, as torch on CPU); a dtype casts
// x to it first (bool refused, as torch).
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
// torch.sort: the values and their int64 indices along dim. Always stable (`stable` is accepted
// and changes nothing): equal elements keep their order, so results are deterministic. NaN
// sorts above every number: last ascending, first descending, as torch; -0 and 0 are equal.
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false,
                               bool stable = false);
// sort's indices alone.
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
// torch.topk: the k largest (smallest) elements along dim and their int64 indices, always in
// order (also with sorted = false); equal values keep their order (the lower index first) and
// NaN counts as the largest. k outside [0, size of dim] is an IndexError naming k and the shape.
// Bool inputs are accepted (torch 1.13 refuses them).
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                               bool sorted = true);

// ---- linear algebra ----
Tensor matmul(const Tensor& a, const Tensor& b);
// weight [out, in] (bias [out]) or, as in torch, [in]: then x @ weight, plus a bias that
// broadcasts to it for an input of 1 or at least 4 dims
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
// relu(batch_norm(...)) in one pass over the activations (what Sequential runs for a
// BatchNorm1d or BatchNorm2d followed by a ReLU).
Tensor batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight = {}, const Tensor& bias = {}, bool training = false,
                       double momentum = 0.1, double eps = 1e-5);
// A size parameter of conv/pool: one integer (the same for both spatial dims, as libtorch's
// IntArrayRef accepts: conv2d(x, w, {}, 2, 1)) or a list ({2}, {2, 3}).
struct IntOrList {
  IntList values;
  IntOrList() = default;
  IntOrList(int64_t v) : values{v} {}  // NOLINT(google-explicit-constructor)
  IntOrList(std::initializer_list<int64_t> v) : values(v) {}
  IntOrList(const IntList& v) : values(v) {}               // NOLINT
  IntOrList(const std::vector<int64_t>& v) : values(v) {}  // NOLINT
  operator const IntList&() const { return values; }       // NOLINT
};
// conv2d's padding: numbers, or torch's strings "valid" (none) and "same" (the output keeps the
// input's size: stride 1 only; an odd total puts its extra element last, as torch).
struct ConvPadding : IntOrList {
  using IntOrList::IntOrList;
  ConvPadding(const IntOrList& v) : IntOrList(v) {}  // NOLINT(google-explicit-constructor)
  ConvPadding(const std::string& mode);              // NOLINT: ValueError unless valid or same
  template <size_t N>  // a literal only: 0 would also convert to a const char*
  ConvPadding(const char (&mode)[N]) : ConvPadding(std::string(mode)) {}  // NOLINT
  std::string mode;
};
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const IntOrList& stride = {1, 1}, const ConvPadding& padding = {0, 0},
              const IntOrList& dilation = {1, 1}, int64_t groups = 1);
// relu(conv2d(...)) in one pass where the GEMM writes the output planes (what Sequential runs
// for a Conv2d followed by a ReLU).
Tensor conv2d_relu(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                   const IntOrList& stride = {1, 1}, const ConvPadding& padding = {0, 0},
                   const IntOrList& dilation = {1, 1}, int64_t groups = 1);
// batch_norm(conv2d(...), running_mean, running_var, bn_weight, bn_bias, training=false, eps),
// then relu if relu, in one op: BatchNorm's per-channel affine applied to each output plane as
// the convolution writes it, with the bits of the separate ops (what Sequential runs for a
// Conv2d followed by a BatchNorm2d in eval mode). The BatchNorm's tensors are 1-D, one value per
// output channel; bn_weight and bn_bias may be undefined (1 and 0).
Tensor conv2d_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         const IntOrList& stride, const ConvPadding& padding,
                         const IntOrList& dilation, int64_t groups, const Tensor& running_mean,
                         const Tensor& running_var, const Tensor& bn_weight, const Tensor& bn_bias,
                         double eps, bool relu = false);
// torch.nn.functional.conv1d: x [N, C, L] or unbatched [C, L], weight [out, in/groups, k];
// stride, padding and dilation one value each (padding also "same"/"valid"). The conv2d op over
// a unit height, so vmap batches it through conv2d's rule.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const IntOrList& stride = 1, const ConvPadding& padding = 0,
              const IntOrList& dilation = 1, int64_t groups = 1);
// "same" padding for a kernel (kh, kw) and dilation, as pad's {left, right, top, bottom};
// ValueError (naming op) if it overflows.
std::array<int64_t, 4> conv_same_padding(int64_t kh, int64_t kw, int64_t dh, int64_t dw,
                                         const char* op = "conv2d");
// ceil_mode: as torch's, the output length rounds up (a last window running past the end takes
// the elements that exist), but no window starts in the right padding only.
Tensor max_pool2d(const Tensor& x, const IntOrList& kernel_size, const IntOrList& stride = {},
                  const IntOrList& padding = {0, 0}, const IntOrList& dilation = {1, 1},
                  bool ceil_mode = false);
// return_indices=True: the output and each window's argmax as int64 iy * W + ix in its plane.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const IntOrList& kernel_size,
                                                   const IntOrList& stride = {},
                                                   const IntOrList& padding = {0, 0},
                                                   const IntOrList& dilation = {1, 1},
                                                   bool ceil_mode = false);
// As torch's: ceil_mode as max_pool2d's; a window divides by its size counting the padding
// (count_include_pad) but not what a ceil_mode window runs past it, or by divisor_override.
Tensor avg_pool2d(const Tensor& x, const IntOrList& kernel_size, const IntOrList& stride = {},
                  const IntOrList& padding = {0, 0}, bool ceil_mode = false,
                  bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
// 1-D pools over x [N, C, L] or [C, L]: the 2-D pools over a unit height (indices are
// positions along L, as torch's).
Tensor max_pool1d(const Tensor& x, const IntOrList& kernel_size, const IntOrList& stride = {},
                  const IntOrList& padding = 0, const IntOrList& dilation = 1,
                  bool ceil_mode = false);
std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, const IntOrList& kernel_size,
                                                   const IntOrList& stride = {},
                                                   const IntOrList& padding = 0,
                                                   const IntOrList& dilation = 1,
                                                   bool ceil_mode = false);
Tensor avg_pool1d(const Tensor& x, const IntOrList& kernel_size, const IntOrList& stride = {},
                  const IntOrList& padding = 0, bool ceil_mode = false,
                  bool count_include_pad = true);
// Adaptive pools as torch's: output i averages (or maxes) input [floor(i L / out),
// ceil((i + 1) L / out)). x [N, C, L] / [C, L] (1d) or [N, C, H, W] / [C, H, W] (2d); a 2d
// output_size entry nullopt keeps that dim's size. Size 1 is a plain reduction.
Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size);
Tensor adaptive_avg_pool2d(const Tensor& x,
                           const std::array<std::optional<int64_t>, 2>& output_size);
Tensor adaptive_max_pool2d(const Tensor& x,
                           const std::array<std::optional<int64_t>, 2>& output_size);
// torch.nn.functional.group_norm: x [N, C, *] normalised over each group of C / num_groups
// channels (and all of *), then weight and bias [C] per channel.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
// torch.nn.functional.instance_norm: x [N, C, *] normalised per sample and channel over *
// (use_input_stats), or with running_mean/var [C]. In use_input_stats with running stats, these
// are updated in place with momentum from the batch's mean of per-instance means and unbiased
// variances, as torch.
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = {},
                     const Tensor& running_var = {}, const Tensor& weight = {},
                     const Tensor& bias = {}, bool use_input_stats = true, double momentum = 0.1,
                     double eps = 1e-5);
Tensor embedding(const Tensor& indices, const Tensor& weight);
// torch.einsum: letters a-z A-Z, "->" and an output (else the letters seen once, sorted), "..."
// for broadcast dims, a repeated letter in one operand for its diagonal. Each operand's private
// letters are summed first, then operands are combined left to right by matmul.
Tensor einsum(std::string_view equation, std::span<const Tensor> operands);
inline Tensor einsum(std::string_view equation, std::initializer_list<Tensor> operands) {
  return einsum(equation, std::span<const Tensor>(operands.begin(), operands.size()));
}
template <class... Ts>
requires(sizeof...(Ts) > 0 && (std::same_as<std::remove_cvref_t<Ts>, Tensor> && ...)) Tensor
    einsum(std::string_view equation, const Ts&... operands) {
  return einsum(equation, {operands...});
}
// torch.nn.functional.scaled_dot_product_attention (PyTorch 2.x's math): q [..., L, E],
// k [..., S, E], v [..., S, Ev] -> softmax(q k^T * scale + mask) v [..., L, Ev], scale 1/sqrt(E)
// by default. A bool mask keeps where true, a float mask is added; it broadcasts to [..., L, S].
// is_causal masks keys after each query (not with attn_mask). A row with every key masked gives
// NaN, as torch's math path. Dropout on the weights only when dropout_p > 0.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask = {},
                                    double dropout_p = 0.0, bool is_causal = false,
                                    std::optional<double> scale = {});

// The point-wise part of a recurrent step, after its two products (torch's fused LSTM and GRU
// cells): gates_x (the input's, with b_ih) and gates_h (the hidden state's, with b_hh) broadcast
// over their leading dims with the state. LSTM: gates [..., 4H] in the order i, f, g, o; returns
// {h, c'} with c' = sigmoid(f) * c + sigmoid(i) * tanh(g) and h = sigmoid(o) * tanh(c'). GRU:
// gates [..., 3H] in the order r, z, n; r and z = sigmoid(x + h), n = tanh(x_n + r * h_n), and
// h' = n + z * (h - n).
std::pair<Tensor, Tensor> lstm_pointwise(const Tensor& gates_x, const Tensor& gates_h,
                                         const Tensor& c);
Tensor gru_pointwise(const Tensor& gates_x, const Tensor& gates_h, const Tensor& h);
// torch.nn.functional.pad: pad = {left, right} of the last dim, then of the one before, ...;
// negative values crop. mode "constant" (value), or "reflect", "replicate", "circular", which
// pad 1-3 trailing dims of an input with one or two dims more (circular: two), as torch 1.13.
Tensor pad(const Tensor& x, const IntList& pad, const std::string& mode = "constant",
           double value = 0.0);

// ---- join, split, index ----
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const IntList& sizes, int64_t dim = 0);
// Braces are a list of sections, as torch.split(x, [2]) is: without this overload, split(x, {2})
// would convert the braces to a split_size.
inline std::vector<Tensor> split(const Tensor& x, std::initializer_list<int64_t> sizes,
                                 int64_t dim = 0) {
  return split(x, IntList(sizes), dim);
}
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// torch.scatter: x with src's elements written where index points along dim (for a 2-D x and
// dim 0, out[index[i][j]][j] = src[i][j]). index is int64 with as many dims as x and src (a 0-d
// one counts as 1-D of size 1, as in gather), no larger than src in any dim nor than x in any
// but dim, and its values lie in [0, x.size(dim)); src has x's dtype; the value form writes
// value cast to x's dtype. Where index repeats a position the last in index's row-major order
// wins (torch leaves that unspecified), so the result is deterministic, batched or not.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value);
// As scatter, but adding src's elements to x's, in index's row-major order (reproducible).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// torch.scatter_reduce: reduce is "sum", "prod", "mean", "amax" or "amin"; with include_self
// false an element that is written to starts from the first value landing on it instead of its
// own. An integer mean rounds down, as torch's; NaN propagates through amax and amin.
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self = true);

// ---- in place (return self) ----
// The result type of the op must be castable to self's dtype (no float into an integer tensor),
// and other must broadcast to self's shape. Self may not have elements sharing one memory
// location (an expanded view) unless the op is fill_, as in torch, and other may be self's own view
// but, as in torch, not overlap it otherwise (x.add_(x.t()) is a RuntimeError; clone() it first).
// A Tensor is a handle to its storage: a const one (a module's Param) or a temporary view (x[0],
// x.slice(...)) is written through too, as with libtorch's const in-place ops; a non-const self
// is returned as it came.
#define TD_INPLACE(name, Other)                        \
  const Tensor& name(const Tensor& self, Other other); \
  inline Tensor& name(Tensor& self, Other other) {     \
    name(static_cast<const Tensor&>(self), other);     \
    return self;                                       \
  }
TD_INPLACE(add_, const Tensor&)
TD_INPLACE(mul_, const Tensor&)
TD_INPLACE(sub_, const Tensor&)
TD_INPLACE(div_, const Tensor&)
TD_INPLACE(add_, Scalar)
TD_INPLACE(mul_, Scalar)
TD_INPLACE(sub_, Scalar)
TD_INPLACE(div_, Scalar)
TD_INPLACE(copy_, const Tensor&)
TD_INPLACE(fill_, Scalar)
#undef TD_INPLACE
// In-place scatter, scatter_add and scatter_reduce (their rules above): self is written, and as
// in torch neither src nor index may share memory with it.
#define TD_SCATTER_INPLACE(name, Src)                                                \
  const Tensor& name(const Tensor& self, int64_t dim, const Tensor& index, Src src); \
  inline Tensor& name(Tensor& self, int64_t dim, const Tensor& index, Src src) {     \
    name(static_cast<const Tensor&>(self), dim, index, src);                         \
    return self;                                                                     \
  }
TD_SCATTER_INPLACE(scatter_, const Tensor&)
TD_SCATTER_INPLACE(scatter_, Scalar)
TD_SCATTER_INPLACE(scatter_add_, const Tensor&)
#undef TD_SCATTER_INPLACE
const Tensor& scatter_reduce_(const Tensor& self, int64_t dim, const Tensor& index,
                              const Tensor& src, const std::string& reduce,
                              bool include_self = true);
inline Tensor& scatter_reduce_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                               const std::string& reduce, bool include_self = true) {
  scatter_reduce_(static_cast<const Tensor&>(self), dim, index, src, reduce, include_self);
  return self;
}

// ---- comparisons of whole tensors (data-dependent: RuntimeError on batched tensors) ----
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
bool equal(const Tensor& a, const Tensor& b);  // same shape and values
// Same shape, dtype and bits (a NaN matches its own bits, -0 does not match 0).
bool same_bytes(const Tensor& a, const Tensor& b);

}  // namespace td
