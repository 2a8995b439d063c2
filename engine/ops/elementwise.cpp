// Element-wise ops: unary maps, clamp, casts, broadcasting binary ops and where, with PyTorch's
// dtype rules. Public functions only pack attrs and dispatch (so vmap sees every call).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

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

// Bitwise ops are for bool and int64 tensors: TypeError naming every operand otherwise.
void check_bitwise(const char* op, std::span<const Tensor> in) {
  bool floating = false;
  for (const Tensor& t : in) floating |= is_floating(t.dtype());
  if (!floating) return;
  std::string got;
  for (const Tensor& t : in)
    got += (got.empty() ? "" : " and ") + std::string(dtype_name(t.dtype())) + " of shape " +
           shape_str(t.shape());
  throw_error<TypeError>("[", op, "] is not implemented for floating tensors (got ", got, ")");
}

// The dtype rules of op_list.h's element-wise lists.
enum class UnaryRule { Float, Signed, Keep, Bool, Bitwise, Floating, NoBool };
enum class BinaryRule { Promote, Sub, Div, Pow, Mod, Compare, Bitwise };

std::vector<Tensor> run_unary(const char* op, UnaryKind kind, UnaryRule rule,
                              std::span<const Tensor> in) {
  const Tensor& x = only_input(op, in);
  DType out = x.dtype();
  switch (rule) {
    case UnaryRule::Float:
      if (!is_floating(out)) out = DType::Float32;
      break;
    case UnaryRule::Signed:
      if (out == DType::Bool)
        throw_bool_not_implemented(
            op, {x.shape()}, kind == UnaryKind::Neg ? "; use logical_not to invert a mask" : "");
      break;
    case UnaryRule::Keep:  // sign of a bool: itself, as in torch
      break;
    case UnaryRule::Bool:
      out = DType::Bool;
      break;
    case UnaryRule::Bitwise:
      check_bitwise(op, in);
      break;
    case UnaryRule::Floating:
      check_floating(op, x);
      break;
    case UnaryRule::NoBool:
      if (out == DType::Bool) throw_bool_not_implemented(op, {x.shape()});
      if (!is_floating(out)) out = DType::Float32;
      break;
  }
  return {kernels::unary(kind, x, out)};
}

std::vector<Tensor> run_binary(const char* op, BinaryKind kind, BinaryRule rule,
                               std::span<const Tensor> in) {
  only_input(op, in, 2);
  const Tensor &a = in[0], &b = in[1];
  broadcast_shapes(op, a.shape(), b.shape());  // ValueError naming op
  DType compute = promote_types(a.dtype(), b.dtype());
  DType out = compute;
  switch (rule) {
    case BinaryRule::Promote:
      break;
    case BinaryRule::Div:
      if (!is_floating(compute)) compute = out = DType::Float32;
      break;
    case BinaryRule::Sub:
      // as torch: a bool operand is refused even when the other would promote it
      if (a.dtype() == DType::Bool || b.dtype() == DType::Bool)
        throw_error<TypeError>("[", op, "] subtraction with a bool tensor (", dtype_name(a.dtype()),
                               " of shape ", shape_str(a.shape()), " and ", dtype_name(b.dtype()),
                               " of shape ", shape_str(b.shape()),
                               ") is not supported; use logical_not to invert a mask, a ^ b "
                               "(bitwise_xor) for two");
      break;
    case BinaryRule::Bitwise:
      check_bitwise(op, in);
      break;
    case BinaryRule::Pow:
    case BinaryRule::Mod:
      // torch has none of these for bool (true ** true, true % true): an operand of another
      // dtype promotes it
      if (compute == DType::Bool) throw_bool_not_implemented(op, {a.shape(), b.shape()});
      // as torch: an integer division by zero is an error (a float one gives NaN)
      if (rule == BinaryRule::Mod && !is_floating(compute)) {
        const std::vector<int64_t> v = b.to_vector<int64_t>();
        if (std::find(v.begin(), v.end(), 0) != v.end())
          throw_error<RuntimeError>("[", op, "] ZeroDivisionError: an integer divisor (shape ",
                                    shape_str(b.shape()), ") holds 0");
      }
      break;
    case BinaryRule::Compare:
      out = DType::Bool;
      break;
  }
  return {kernels::binary(kind, a, b, compute, out)};
}

}  // namespace

#define TD_X(name, family, kind, rule)                                          \
  std::vector<Tensor> name##_impl(std::span<const Tensor> in, const OpAttrs&) { \
    return run_unary(#name, UnaryKind::kind, UnaryRule::rule, in);              \
  }
TD_UNARY_OPS(TD_X)
#undef TD_X

std::vector<Tensor> gelu_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  check_floating("gelu", only_input("gelu", in));  // no integer promotion: torch refuses them
  const bool tanh = attrs_as<GeluAttrs>(OpId::gelu, attrs).tanh_approximation;
  return run_unary("gelu", tanh ? UnaryKind::GeluTanh : UnaryKind::Gelu, UnaryRule::Float, in);
}
std::vector<Tensor> clamp_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<ClampAttrs>(OpId::clamp, attrs);
  const Tensor& x = only_input("clamp", in);
  if (!a.min && !a.max)
    throw_error<ValueError>("[clamp] at least one of min and max must be given");
  DType out = promote_with_scalar(x.dtype(), a.floating_bound);
  // a bound must fit the result dtype, as torch checks (no silent inf bound for float32)
  if (a.min) check_scalar_fits("clamp", *a.min, out);
  if (a.max) check_scalar_fits("clamp", *a.max, out);
  Tensor xc = out == x.dtype() ? x : x.to(out);
  return {kernels::clamp(xc, a.min.value_or(Scalar()), a.max.value_or(Scalar()), a.min.has_value(),
                         a.max.has_value())};
}

namespace {

// Activations with scalar arguments: floating inputs only, as torch's (hardtanh also takes
// integers, its bounds truncated to integers as torch's are).
std::vector<Tensor> run_activation(OpId op, UnaryKind kind, std::span<const Tensor> in,
                                   const OpAttrs& attrs) {
  const char* name = op_name(op);
  const Tensor& x = only_input(name, in);
  const auto& a = attrs_as<ActivationAttrs>(op, attrs);
  if (kind == UnaryKind::Hardtanh) {
    if (x.dtype() == DType::Bool) throw_bool_not_implemented(name, {x.shape()});
    if (!is_floating(x.dtype()))
      return {kernels::clamp(x, Scalar(static_cast<int64_t>(a.min_val)),
                             Scalar(static_cast<int64_t>(a.max_val)), true, true)};
  }
  check_floating(name, x);
  switch (kind) {
    case UnaryKind::LeakyRelu:
      return {kernels::activation(kind, x, a.negative_slope, 0)};
    case UnaryKind::Elu:  // celu(x, alpha) = elu with its input scaled by 1 / alpha
      if (op == OpId::celu && a.alpha == 0)
        throw_error<RuntimeError>("[celu] ZeroDivisionError: alpha must not be 0 (input shape ",
                                  shape_str(x.shape()), ")");
      return {kernels::activation(kind, x, a.alpha, op == OpId::celu ? 1 / a.alpha : 1)};
    case UnaryKind::Softplus:
      return {kernels::activation(kind, x, a.beta, a.threshold)};
    default:
      return {kernels::activation(kind, x, a.min_val, a.max_val)};
  }
}

}  // namespace

std::vector<Tensor> leaky_relu_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return run_activation(OpId::leaky_relu, UnaryKind::LeakyRelu, in, attrs);
}
std::vector<Tensor> elu_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return run_activation(OpId::elu, UnaryKind::Elu, in, attrs);
}
std::vector<Tensor> celu_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return run_activation(OpId::celu, UnaryKind::Elu, in, attrs);
}
std::vector<Tensor> softplus_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return run_activation(OpId::softplus, UnaryKind::Softplus, in, attrs);
}
std::vector<Tensor> hardtanh_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return run_activation(OpId::hardtanh, UnaryKind::Hardtanh, in, attrs);
}

std::vector<Tensor> to_dtype_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const Tensor& x = only_input("to", in);
  Tensor out = Tensor::empty(x.shape(), attrs_as<CastAttrs>(OpId::to_dtype, attrs).dtype);
  kernels::copy_into(x, out);
  return {out};
}

#define TD_X(name, family, kind, rule, api)                                     \
  std::vector<Tensor> name##_impl(std::span<const Tensor> in, const OpAttrs&) { \
    return run_binary(#name, BinaryKind::kind, BinaryRule::rule, in);           \
  }
TD_BINARY_OPS(TD_X)
#undef TD_X

std::vector<Tensor> where_impl(std::span<const Tensor> in, const OpAttrs&) {
  only_input("where", in, 3);
  const Tensor &c = in[0], &a = in[1], &b = in[2];
  if (c.dtype() != DType::Bool)
    throw_error<TypeError>("[where] condition must be a bool tensor, got ", dtype_name(c.dtype()),
                           " of shape ", shape_str(c.shape()));
  broadcast_shapes("where", broadcast_shapes("where", c.shape(), a.shape()), b.shape());
  return {kernels::where(c, a, b, promote_types(a.dtype(), b.dtype()))};
}

// masked_fill(x, mask, value): value (0-d, or [B, 1, ...] under vmap, already x's dtype) where
// mask is set; as torch's out-of-place masked_fill, x and mask broadcast against each other.
std::vector<Tensor> masked_fill_impl(std::span<const Tensor> in, const OpAttrs&) {
  only_input("masked_fill", in, 3);
  const Tensor &x = in[0], &m = in[1], &v = in[2];
  if (m.dtype() != DType::Bool)
    throw_error<TypeError>("[masked_fill] mask must be a bool tensor, got ", dtype_name(m.dtype()),
                           " of shape ", shape_str(m.shape()));
  broadcast_shapes("masked_fill", broadcast_shapes("masked_fill", x.shape(), m.shape()),
                   v.shape());
  return {kernels::where(m, v, x, x.dtype())};
}

}  // namespace impl

// ---- public functions ----

#define TD_X(name, family, kind, rule) \
  Tensor name(const Tensor& x) { return call_op1(OpId::name, {x}, {}); }
TD_UNARY_OPS(TD_X)
#undef TD_X

Tensor gelu(const Tensor& x, bool tanh_approximation) {
  return call_op1(OpId::gelu, {x}, GeluAttrs{.tanh_approximation = tanh_approximation});
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  // bool bounds keep a bool input bool, which torch has no clamp for (an int bound promotes it)
  const bool bool_bounds = (min || max) && (!min || min->is_bool()) && (!max || max->is_bool());
  if (x.defined() && x.dtype() == DType::Bool && bool_bounds)
    throw_bool_not_implemented("clamp", {x.shape()});
  const bool floating = (min && min->is_floating_point()) || (max && max->is_floating_point());
  return call_op1(OpId::clamp, {x}, ClampAttrs{.min = min, .max = max, .floating_bound = floating});
}

namespace {

int category(DType t) { return t == DType::Bool ? 0 : (is_floating(t) ? 2 : 1); }

// c10's combine_categories: the higher tier wins unless the lower one has a higher category.
std::optional<DType> combine_tiers(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  return category(*lower) > category(*higher) ? promote_types(*higher, *lower) : *higher;
}

// The kernels take the plain maximum dtype of their inputs; with two operands it differs from
// result_type only for a 0-d operand wider than a dimensioned one of the same category (a 0-d
// float64 with float32 data), so that operand is cast down. dim() is the logical rank.
Tensor tier_cast(const Tensor& t, const Tensor& other) {
  if (t.defined() && other.defined() && t.dtype() > other.dtype() && t.dim() == 0 &&
      other.dim() != 0 && category(t.dtype()) == category(other.dtype()))
    return t.to(other.dtype());
  return t;
}

}  // namespace

DType result_type(const std::vector<Tensor>& tensors, const std::vector<Scalar>& scalars) {
  std::optional<DType> dimensioned, zero_dim, wrapped;
  auto fold = [](std::optional<DType>& acc, DType t) { acc = acc ? promote_types(*acc, t) : t; };
  for (const Tensor& t : tensors)
    if (t.defined()) fold(t.dim() == 0 ? zero_dim : dimensioned, t.dtype());
  for (const Scalar& s : scalars) fold(wrapped, s.dtype());
  return combine_tiers(dimensioned, combine_tiers(zero_dim, wrapped)).value_or(DType::Float32);
}

// The public functions of op_list.h's binary ops, by their last column.
#define TD_BINARY_FN_Own(name)                                           \
  Tensor name(const Tensor& a, const Tensor& b) {                        \
    return call_op1(OpId::name, {tier_cast(a, b), tier_cast(b, a)}, {}); \
  }
#define TD_BINARY_FN_Scalar(name)                                 \
  TD_BINARY_FN_Own(name) Tensor name(const Tensor& a, Scalar b) { \
    return name(a, wrap_scalar(b, a));                            \
  }
#define TD_BINARY_FN_Plain(name) \
  Tensor name(const Tensor& a, const Tensor& b) { return call_op1(OpId::name, {a, b}, {}); }
#define TD_X(name, family, kind, rule, api) TD_BINARY_FN_##api(name)
TD_BINARY_OPS(TD_X)
#undef TD_X

void impl::check_sub_scalar(const char* op, const Tensor& t, Scalar s) {
  if (s.is_bool())
    throw_error<TypeError>("[", op, "] subtraction with a bool scalar (",
                           s.to_int() ? "true" : "false", ", tensor of shape ",
                           shape_str(t.shape()), ", ", dtype_name(t.dtype()),
                           ") is not supported; use logical_not to invert a mask");
}

Tensor sub(const Tensor& a, Scalar b) {
  impl::check_sub_scalar("sub", a, b);
  return sub(a, wrap_scalar(b, a));
}

// As PyTorch: an integral tensor to a negative integral scalar power raises (it would truncate to
// 0); a tensor of exponents takes integer powers (2 ** -1 == 0, 1 ** -2 == 1, -1 ** -1 == -1).
Tensor pow(const Tensor& a, Scalar b) {
  if (!is_floating(a.dtype()) && !b.is_floating_point() && b.to_int() < 0)
    throw_error<RuntimeError>("[pow] Integers to negative integer powers are not allowed (base ",
                              dtype_name(a.dtype()), " of shape ", a.shape(), ", exponent ",
                              b.to_int(), ")");
  // torch computes these scalar exponents of a floating result as sqrt, rsqrt, reciprocal and
  // products, not std::pow: pow(-inf, 0.5) is NaN, pow(-0.0, -0.5) -inf, pow(1e20f, -2) 0
  const DType rt = result_type({a}, {b});
  if (is_floating(rt) && !b.is_bool()) {
    const double e = b.to_double();
    const Tensor x = a.to(rt);
    if (e == 0.5) return sqrt(x);
    if (e == -0.5) return rsqrt(x);
    if (e == -1) return reciprocal(x);
    if (e == 2) return mul(x, x);
    if (e == 3) return mul(mul(x, x), x);
    if (e == -2) return reciprocal(mul(x, x));
    // torch's scalar kernel computes std::pow(float, double); where rounding the exponent to
    // float32 would change which case of pow applies, compute in float64 as it does: 1e-310
    // (to 0: NaN ** 1e-310 is NaN, not 1), 16777217 (to the even 16777216: (-1) ** 16777217 is
    // -1). Its vectorised loop over runs of 16 elements rounds to float; that is not followed.
    const double ae = std::abs(e);
    if (rt == DType::Float32 && ae <= std::numeric_limits<float>::max() &&
        static_cast<float>(e) != e && (static_cast<float>(e) == 0 || ae >= 0x1p23))
      return pow(x.to(DType::Float64), b).to(DType::Float32);
  }
  return pow(a, wrap_scalar(b, a));
}
Tensor pow(Scalar a, const Tensor& b) { return pow(wrap_scalar(a, b), b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return call_op1(OpId::where, {cond, tier_cast(a, b), tier_cast(b, a)}, {});
}
// where's scalar must fit the result dtype (torch: "value cannot be converted to type float
// without overflow"), unlike an arithmetic operand, which is cast.
Tensor where(const Tensor& cond, const Tensor& a, Scalar b) {
  Tensor bt = wrap_scalar(b, a);
  impl::check_scalar_fits("where", b, bt.dtype());
  return where(cond, a, bt);
}
Tensor where(const Tensor& cond, Scalar a, const Tensor& b) {
  Tensor at = wrap_scalar(a, b);
  impl::check_scalar_fits("where", a, at.dtype());
  return where(cond, at, b);
}
Tensor where(const Tensor& cond, Scalar a, Scalar b) {
  const DType t = result_type({}, {a, b});
  // int64 values are written exactly (through a double, 2^53 + 1 came back as 2^53)
  auto wrap = [t](Scalar v) {
    return t == DType::Int64 ? wrap_scalar(v.to_int(), Tensor()) : scalar_tensor(v.to_double(), t);
  };
  return where(cond, wrap(a), wrap(b));
}

// As torch, the value is cast to x's dtype; a tensor value must be 0-d.
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  if (!x.defined() || !mask.defined() || !value.defined())
    throw_error<ValueError>("[masked_fill] expected defined input, mask and value tensors");
  if (value.dim() != 0)
    throw_error<ValueError>("[masked_fill] value must be a 0-d tensor, got ", shape_word(), " ",
                            value.shape(), " (input ", x.shape(), ", mask ", mask.shape(), ")");
  return call_op1(OpId::masked_fill, {x, mask, value.to(x.dtype())}, {});
}
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  if (!x.defined())
    throw_error<ValueError>("[masked_fill] expected a defined input tensor");
  const Tensor v = x.dtype() == DType::Int64 && value.is_integral()
                       ? wrap_scalar(value.to_int(), Tensor())
                       : scalar_tensor(value.to_double(), DType::Float64).to(x.dtype());
  return call_op1(OpId::masked_fill, {x, mask, v.to(x.dtype())}, {});
}

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return add(wrap_scalar(a, b), b); }
Tensor operator-(Scalar a, const Tensor& b) {
  impl::check_sub_scalar("sub", b, a);
  return sub(wrap_scalar(a, b), b);
}
Tensor operator*(Scalar a, const Tensor& b) { return mul(wrap_scalar(a, b), b); }
Tensor operator/(Scalar a, const Tensor& b) { return div(wrap_scalar(a, b), b); }
Tensor operator%(const Tensor& a, const Tensor& b) { return remainder(a, b); }
Tensor operator%(const Tensor& a, Scalar b) { return remainder(a, b); }
Tensor operator%(Scalar a, const Tensor& b) { return remainder(wrap_scalar(a, b), b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator<(const Tensor& a, Scalar b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, Scalar b) { return le(a, b); }
Tensor operator>(const Tensor& a, Scalar b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, Scalar b) { return ge(a, b); }
Tensor operator<(Scalar a, const Tensor& b) { return gt(b, a); }
Tensor operator<=(Scalar a, const Tensor& b) { return ge(b, a); }
Tensor operator>(Scalar a, const Tensor& b) { return lt(b, a); }
Tensor operator>=(Scalar a, const Tensor& b) { return le(b, a); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator==(const Tensor& a, Scalar b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, Scalar b) { return ne(a, b); }
Tensor operator==(Scalar a, const Tensor& b) { return eq(b, a); }
Tensor operator!=(Scalar a, const Tensor& b) { return ne(b, a); }
Tensor operator&(const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }
Tensor operator~(const Tensor& a) { return bitwise_not(a); }
Tensor operator&&(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
Tensor operator||(const Tensor& a, const Tensor& b) { return logical_or(a, b); }
Tensor isnan(const Tensor& x) { return ne(x, x); }
Tensor isinf(const Tensor& x) {
  return is_floating(x.dtype()) ? eq(abs(x), std::numeric_limits<double>::infinity()) : ne(x, x);
}
// x - x is 0 for a finite x and NaN for an infinite or NaN one
Tensor isfinite(const Tensor& x) { return is_floating(x.dtype()) ? eq(x - x, 0) : eq(x, x); }

Tensor operator!(const Tensor& a) { return logical_not(a); }

}  // namespace td
