// Element-wise ops: unary maps, clamp, casts, broadcasting binary ops and where, with PyTorch's
// dtype rules. Public functions only pack attrs and dispatch (so vmap sees every call).
#include <cmath>

#include "engine/kernels/kernels.h"
#include "engine/ops.h"
#include "engine/ops/impls.h"

namespace td {
namespace impl {
namespace {

using kernels::BinaryKind;
using kernels::UnaryKind;

const Tensor& only_input(const char* op, std::span<const Tensor> in, size_t n = 1) {
  if (in.size() != n)
    throw_error<ValueError>("[", op, "] expected ", n, " inputs, got ", in.size());
  for (const Tensor& t : in)
    if (!t.defined()) throw_error<ValueError>("[", op, "] got an undefined tensor");
  return in[0];
}

// Float ops compute in float32 for integer and bool inputs.
std::vector<Tensor> float_unary(const char* op, UnaryKind kind, std::span<const Tensor> in) {
  const Tensor& x = only_input(op, in);
  DType out = is_floating(x.dtype()) ? x.dtype() : DType::Float32;
  return {kernels::unary(kind, x, out)};
}

// Sign-aware ops keep the dtype and reject bool, as PyTorch does.
std::vector<Tensor> same_unary(const char* op, UnaryKind kind, std::span<const Tensor> in) {
  const Tensor& x = only_input(op, in);
  if (x.dtype() == DType::Bool)
    throw_error<TypeError>("[", op, "] is not supported for bool tensors (shape ",
                           shape_str(x.shape()), "); use logical_not to invert a mask");
  return {kernels::unary(kind, x, x.dtype())};
}

std::vector<Tensor> run_binary(const char* op, BinaryKind kind, std::span<const Tensor> in) {
  only_input(op, in, 2);
  const Tensor &a = in[0], &b = in[1];
  broadcast_shapes(op, a.shape(), b.shape());  // ValueError naming op
  DType compute = promote_types(a.dtype(), b.dtype());
  DType out = compute;
  switch (kind) {
    case BinaryKind::Div:
      if (!is_floating(compute)) compute = out = DType::Float32;
      break;
    case BinaryKind::Sub:
      if (compute == DType::Bool)
        throw_error<TypeError>("[sub] subtraction of two bool tensors (shapes ",
                               shape_str(a.shape()), " and ", shape_str(b.shape()),
                               ") is not supported; use logical_xor or logical_not");
      break;
    default:
      if (kernels::is_predicate(kind)) out = DType::Bool;
      break;
  }
  return {kernels::binary(kind, a, b, compute, out)};
}

}  // namespace

#define TD_FLOAT_UNARY(name, kind)                                              \
  std::vector<Tensor> name##_impl(std::span<const Tensor> in, const OpAttrs&) { \
    return float_unary(#name, UnaryKind::kind, in);                             \
  }
TD_FLOAT_UNARY(exp, Exp)
TD_FLOAT_UNARY(log, Log)
TD_FLOAT_UNARY(sqrt, Sqrt)
TD_FLOAT_UNARY(rsqrt, Rsqrt)
TD_FLOAT_UNARY(tanh, Tanh)
TD_FLOAT_UNARY(sigmoid, Sigmoid)
#undef TD_FLOAT_UNARY

std::vector<Tensor> neg_impl(std::span<const Tensor> in, const OpAttrs&) {
  return same_unary("neg", UnaryKind::Neg, in);
}
std::vector<Tensor> abs_impl(std::span<const Tensor> in, const OpAttrs&) {
  return same_unary("abs", UnaryKind::Abs, in);
}
std::vector<Tensor> relu_impl(std::span<const Tensor> in, const OpAttrs&) {
  return same_unary("relu", UnaryKind::Relu, in);
}
std::vector<Tensor> gelu_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return float_unary("gelu", attrs.flag ? UnaryKind::GeluTanh : UnaryKind::Gelu, in);
}
std::vector<Tensor> logical_not_impl(std::span<const Tensor> in, const OpAttrs&) {
  return {kernels::unary(UnaryKind::LogicalNot, only_input("logical_not", in), DType::Bool)};
}

std::vector<Tensor> clamp_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const Tensor& x = only_input("clamp", in);
  if (!attrs.has_min && !attrs.has_max)
    throw_error<ValueError>("[clamp] at least one of min and max must be given");
  auto integral = [](double v) { return std::isfinite(v) && v == std::floor(v); };
  bool float_bound =
      (attrs.has_min && !integral(attrs.alpha)) || (attrs.has_max && !integral(attrs.beta));
  DType out = promote_with_scalar(x.dtype(), float_bound);
  Tensor xc = out == x.dtype() ? x : x.to(out);
  return {kernels::clamp(xc, attrs.alpha, attrs.beta, attrs.has_min, attrs.has_max)};
}

std::vector<Tensor> to_dtype_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const Tensor& x = only_input("to", in);
  Tensor out = Tensor::empty(x.shape(), attrs.dtype);
  kernels::copy_into(x, out);
  return {out};
}

#define TD_BINARY(name, kind)                                                   \
  std::vector<Tensor> name##_impl(std::span<const Tensor> in, const OpAttrs&) { \
    return run_binary(#name, BinaryKind::kind, in);                             \
  }
TD_BINARY(add, Add)
TD_BINARY(sub, Sub)
TD_BINARY(mul, Mul)
TD_BINARY(div, Div)
TD_BINARY(pow, Pow)
TD_BINARY(maximum, Maximum)
TD_BINARY(minimum, Minimum)
TD_BINARY(eq, Eq)
TD_BINARY(ne, Ne)
TD_BINARY(lt, Lt)
TD_BINARY(le, Le)
TD_BINARY(gt, Gt)
TD_BINARY(ge, Ge)
TD_BINARY(logical_and, LogicalAnd)
TD_BINARY(logical_or, LogicalOr)
#undef TD_BINARY

std::vector<Tensor> where_impl(std::span<const Tensor> in, const OpAttrs&) {
  only_input("where", in, 3);
  const Tensor &c = in[0], &a = in[1], &b = in[2];
  if (c.dtype() != DType::Bool)
    throw_error<TypeError>("[where] condition must be a bool tensor, got ", dtype_name(c.dtype()),
                           " of shape ", shape_str(c.shape()));
  broadcast_shapes("where", broadcast_shapes("where", c.shape(), a.shape()), b.shape());
  return {kernels::where(c, a, b, promote_types(a.dtype(), b.dtype()))};
}

}  // namespace impl

// ---- public functions ----

#define TD_UNARY_FN(name) \
  Tensor name(const Tensor& x) { return call_op1(OpId::name, {x}, {}); }
TD_UNARY_FN(neg)
TD_UNARY_FN(abs)
TD_UNARY_FN(exp)
TD_UNARY_FN(log)
TD_UNARY_FN(sqrt)
TD_UNARY_FN(rsqrt)
TD_UNARY_FN(tanh)
TD_UNARY_FN(sigmoid)
TD_UNARY_FN(relu)
TD_UNARY_FN(logical_not)
#undef TD_UNARY_FN

Tensor gelu(const Tensor& x, bool tanh_approximation) {
  OpAttrs a;
  a.flag = tanh_approximation;
  return call_op1(OpId::gelu, {x}, a);
}

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  OpAttrs a;
  a.has_min = min.has_value();
  a.has_max = max.has_value();
  a.alpha = min.value_or(0);
  a.beta = max.value_or(0);
  return call_op1(OpId::clamp, {x}, a);
}

#define TD_BINARY_FN(name)                                                                   \
  Tensor name(const Tensor& a, const Tensor& b) { return call_op1(OpId::name, {a, b}, {}); } \
  Tensor name(const Tensor& a, double b) { return name(a, wrap_scalar(b, a)); }
TD_BINARY_FN(add)
TD_BINARY_FN(sub)
TD_BINARY_FN(mul)
TD_BINARY_FN(div)
TD_BINARY_FN(pow)
TD_BINARY_FN(maximum)
TD_BINARY_FN(minimum)
TD_BINARY_FN(eq)
TD_BINARY_FN(ne)
TD_BINARY_FN(lt)
TD_BINARY_FN(le)
TD_BINARY_FN(gt)
TD_BINARY_FN(ge)
#undef TD_BINARY_FN

Tensor logical_and(const Tensor& a, const Tensor& b) {
  return call_op1(OpId::logical_and, {a, b}, {});
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return call_op1(OpId::logical_or, {a, b}, {});
}
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return call_op1(OpId::where, {cond, a, b}, {});
}
Tensor where(const Tensor& cond, const Tensor& a, double b) {
  return where(cond, a, wrap_scalar(b, a));
}
Tensor where(const Tensor& cond, double a, const Tensor& b) {
  return where(cond, wrap_scalar(a, b), b);
}

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, b); }
Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
Tensor operator/(const Tensor& a, double b) { return div(a, b); }
Tensor operator+(double a, const Tensor& b) { return add(wrap_scalar(a, b), b); }
Tensor operator-(double a, const Tensor& b) { return sub(wrap_scalar(a, b), b); }
Tensor operator*(double a, const Tensor& b) { return mul(wrap_scalar(a, b), b); }
Tensor operator/(double a, const Tensor& b) { return div(wrap_scalar(a, b), b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator<(const Tensor& a, double b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, double b) { return le(a, b); }
Tensor operator>(const Tensor& a, double b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, double b) { return ge(a, b); }
Tensor operator&&(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
Tensor operator||(const Tensor& a, const Tensor& b) { return logical_or(a, b); }
Tensor operator!(const Tensor& a) { return logical_not(a); }

}  // namespace td
