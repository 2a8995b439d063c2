// Element-wise kernels: unary maps, activations, clamp, broadcasting binary ops (also in place)
// and where.
// They run the merged strided loop, or a flat one when every operand is contiguous; the
// floating transcendental maps run xsimd's vector math on every element.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <type_traits>
#include <xsimd/xsimd.hpp>

#include "engine/dispatch.h"
#include "engine/kernels/exp_log.h"
#include "engine/kernels/kernels.h"
#include "engine/kernels/simd.h"
#include "engine/kernels/strided.h"

namespace td::kernels::TD_ISA {
namespace {

Tensor cast_to(const Tensor& x, DType dt) {
  if (x.dtype() == dt) return x;
  Tensor out = Tensor::empty(x.shape(), dt);
  copy_into(x, out);
  return out;
}

// Integer +, - and * wrap in two's complement, as PyTorch's do: computed unsigned, where
// wrapping is defined (signed overflow is undefined behaviour). Floats are left as they are.
template <class T, class Op>
T wrapping(Op op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(op(static_cast<U>(a), static_cast<U>(b)));
  } else {
    return op(a, b);
  }
}

template <class T>
T apply_unary(UnaryKind k, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (k) {
      case UnaryKind::LogicalNot:
      case UnaryKind::BitNot:
        return !v;
      default:
        return v;  // abs, relu of bool are identities
    }
  } else if constexpr (std::is_integral_v<T>) {
    switch (k) {
      case UnaryKind::Neg:
        return wrapping(std::minus<>(), T(0), v);
      case UnaryKind::Abs:
        return v < 0 ? wrapping(std::minus<>(), T(0), v) : v;
      case UnaryKind::Relu:
        return v > 0 ? v : 0;
      case UnaryKind::BitNot:
        return ~v;
      case UnaryKind::Sign:
        return static_cast<T>((v > 0) - (v < 0));
      case UnaryKind::Relu6:
        return v < 0 ? 0 : (v > 6 ? 6 : v);
      default:
        return v;  // floor, ceil and round of an integer
    }
  } else {
    switch (k) {
      case UnaryKind::Neg:
        return -v;
      case UnaryKind::Abs:
        return std::abs(v);
      case UnaryKind::Exp:
        return std::exp(v);
      case UnaryKind::Log:
        return std::log(v);
      case UnaryKind::Sqrt:
        return std::sqrt(v);
      case UnaryKind::Rsqrt:
        return T(1) / std::sqrt(v);
      case UnaryKind::Tanh:
        return std::tanh(v);
      case UnaryKind::Sin:
        return std::sin(v);
      case UnaryKind::Cos:
        return std::cos(v);
      case UnaryKind::Log1p:
        return std::log1p(v);
      case UnaryKind::Expm1:
        return std::expm1(v);
      case UnaryKind::Reciprocal:
        return T(1) / v;
      case UnaryKind::Floor:
        return std::floor(v);
      case UnaryKind::Ceil:
        return std::ceil(v);
      case UnaryKind::Round:
        return std::nearbyint(v);  // half to even, as torch.round
      case UnaryKind::Sign:
        return static_cast<T>((v > 0) - (v < 0));  // 0 for NaN and -0.0, as torch
      case UnaryKind::Sigmoid:
        return T(1) / (T(1) + std::exp(-v));
      case UnaryKind::Relu:  // NaN and -0 kept, as torch's clamp_min(x, 0)
        return v < T(0) ? T(0) : v;
      case UnaryKind::Gelu:
        return T(0.5) * v * (T(1) + std::erf(v * T(M_SQRT1_2)));
      case UnaryKind::GeluTanh: {
        const T c = T(0.7978845608028654);  // sqrt(2 / pi)
        return T(0.5) * v * (T(1) + std::tanh(c * (v + T(0.044715) * v * v * v)));
      }
      case UnaryKind::LogicalNot:
        return v == T(0);
      case UnaryKind::BitNot:  // refused for floating tensors by bitwise_not
        return v;
      default:  // the activations: vector code only (simd_unary, activation)
        return v;
    }
    return v;
  }
}

template <class T, class F>
Tensor map_unary(const Tensor& x, F f) {
  Tensor out = Tensor::empty(x.shape(), dtype_of<T>());
  const T* xp = ptr<T>(x);
  T* op = ptr<T>(out);
  if (x.is_contiguous()) {
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) op[i] = f(xp[i]);
  } else {
    Nest<2> nest(x.shape(), {x.strides(), out.strides()});
    nest.run([&](const std::array<int64_t, 2>& o) { op[o[1]] = f(xp[o[0]]); });
  }
  return out;
}

// Floating maps with xsimd's vectorised math (std::exp and friends do not vectorise). Every
// element goes through vf, the last ones in a zero-padded vector and a strided x gathered into
// out first: std:: differs from xsimd in the last bits, and where an element falls (in the tail
// or not, contiguous or not) changes with the number of sets a call holds, so a set's bits
// depended on chunk_size and threads (Tanh's did, with most shapes, on AVX-512's 16 floats).
template <class T, class V>
Tensor simd_map(const Tensor& x, V vf) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  Tensor out = Tensor::empty(x.shape(), dtype_of<T>());
  const T* xp = ptr<T>(x);
  T* op = ptr<T>(out);
  if (!x.is_contiguous()) {
    Nest<2> nest(x.shape(), {x.strides(), out.strides()});
    nest.run([&](const std::array<int64_t, 2>& o) { op[o[1]] = xp[o[0]]; });
    xp = op;
  }
  const int64_t n = x.numel();
  int64_t i = 0;
  for (; i + W <= n; i += W) vf(B::load_unaligned(xp + i)).store_unaligned(op + i);
  if (i < n) {
    alignas(64) T buf[W] = {};
    std::copy(xp + i, xp + n, buf);
    vf(B::load_aligned(buf)).store_aligned(buf);
    std::copy(buf, buf + (n - i), op + i);
  }
  return out;
}

// v raised to lo, then lowered to hi (so hi wins when hi < lo, as torch's hardtanh), a NaN kept
// (xsimd's min and max may drop it).
template <class T, class B>
B clamp_lanes(B v, T lo, T hi) {
  const B raised = xsimd::select(v < B(lo), B(lo), v);
  return xsimd::select(raised > B(hi), B(hi), raised);
}

template <class T>
std::optional<Tensor> simd_unary(UnaryKind kind, const Tensor& x) {
  using B = xsimd::batch<T>;
  switch (kind) {
    case UnaryKind::Exp:
      return simd_map<T>(x, [](B v) { return exp_lanes<T>(v); });
    case UnaryKind::Log:
      return simd_map<T>(x, [](B v) { return log_lanes<T>(v); });
    case UnaryKind::Tanh:
      return simd_map<T>(x, [](B v) { return xsimd::tanh(v); });
    case UnaryKind::Sqrt:
      return simd_map<T>(x, [](B v) { return sqrt_exact(v); });
    case UnaryKind::Rsqrt:
      return simd_map<T>(x, [](B v) { return div_exact(B(T(1)), sqrt_exact(v)); });
    case UnaryKind::Sigmoid:
      return simd_map<T>(x, [](B v) { return div_exact(B(T(1)), B(T(1)) + exp_lanes<T>(-v)); });
    case UnaryKind::Gelu:
      return simd_map<T>(
          x, [](B v) { return B(T(0.5)) * v * (B(T(1)) + xsimd::erf(v * B(T(M_SQRT1_2)))); });
    case UnaryKind::GeluTanh:
      return simd_map<T>(x, [](B v) {
        const B inner = B(T(0.7978845608028654)) * (v + B(T(0.044715)) * v * v * v);
        return B(T(0.5)) * v * (B(T(1)) + xsimd::tanh(inner));
      });
    case UnaryKind::Silu:
      return simd_map<T>(x, [](B v) { return div_exact(v, B(T(1)) + exp_lanes<T>(-v)); });
    case UnaryKind::Selu:
      return simd_map<T>(x, [](B v) {
        const B neg = B(T(1.6732632423543772)) * xsimd::expm1(v);
        return B(T(1.0507009873554805)) * xsimd::select(v > B(T(0)), v, neg);
      });
    case UnaryKind::Mish:  // x tanh(softplus(x)); exp's overflow to inf gives x, as it should
      return simd_map<T>(x, [](B v) { return v * xsimd::tanh(xsimd::log1p(exp_lanes<T>(v))); });
    case UnaryKind::Hardswish:
      return simd_map<T>(x, [](B v) { return v * clamp_lanes(v + B(T(3)), T(0), T(6)) / B(T(6)); });
    case UnaryKind::Hardsigmoid:
      return simd_map<T>(x, [](B v) { return clamp_lanes(v + B(T(3)), T(0), T(6)) / B(T(6)); });
    case UnaryKind::Relu6:
      return simd_map<T>(x, [](B v) { return clamp_lanes(v, T(0), T(6)); });
    case UnaryKind::Softsign:
      return simd_map<T>(x, [](B v) { return div_exact(v, B(T(1)) + xsimd::abs(v)); });
    case UnaryKind::Tanhshrink:
      return simd_map<T>(x, [](B v) { return v - xsimd::tanh(v); });
    case UnaryKind::LogSigmoid:  // min(x, 0) - log(1 + exp(-|x|)): no overflow either way
      return simd_map<T>(x, [](B v) {
        return xsimd::min(v, B(T(0))) - xsimd::log1p(exp_lanes<T>(-xsimd::abs(v)));
      });
    default:
      return std::nullopt;
  }
}

template <class T>
T apply_binary(BinaryKind k, T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (k) {
      case BinaryKind::Add:
      case BinaryKind::Maximum:
      case BinaryKind::LogicalOr:
      case BinaryKind::BitOr:
        return a || b;
      case BinaryKind::Mul:
      case BinaryKind::Minimum:
      case BinaryKind::LogicalAnd:
      case BinaryKind::BitAnd:
        return a && b;
      case BinaryKind::Sub:
      case BinaryKind::BitXor:
        return a != b;
      case BinaryKind::Div:
        return a;  // unreachable: div computes in float
      case BinaryKind::Pow:
        return a || !b;
      default:
        return a;
    }
  } else {
    switch (k) {
      case BinaryKind::Add:
        return wrapping(std::plus<>(), a, b);
      case BinaryKind::Sub:
        return wrapping(std::minus<>(), a, b);
      case BinaryKind::Mul:
        return wrapping(std::multiplies<>(), a, b);
      case BinaryKind::Div:
        if constexpr (std::is_integral_v<T>)
          return b == 0 ? 0 : a / b;
        else
          return a / b;
      case BinaryKind::Pow:
        if constexpr (std::is_integral_v<T>) {
          if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
          T r = 1, base = a;
          for (T e = b; e > 0; e >>= 1, base = wrapping(std::multiplies<>(), base, base))
            if (e & 1) r = wrapping(std::multiplies<>(), r, base);
          return r;
        } else {
          return std::pow(a, b);
        }
      case BinaryKind::Maximum:
        if constexpr (std::is_floating_point_v<T>)
          if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
        return a > b ? a : b;
      case BinaryKind::Minimum:
        if constexpr (std::is_floating_point_v<T>)
          if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
        return a < b ? a : b;
      case BinaryKind::Remainder:
      case BinaryKind::Fmod: {
        T r;
        if constexpr (std::is_integral_v<T>)
          r = b == -1 ? 0 : a % b;  // INT64_MIN % -1 overflows in C++; the answer is 0
        else
          r = std::fmod(a, b);
        if (k == BinaryKind::Remainder && r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
      }
      // refused for floating tensors by the bitwise ops
      case BinaryKind::BitAnd:
        if constexpr (std::is_integral_v<T>) return a & b;
        return a;
      case BinaryKind::BitOr:
        if constexpr (std::is_integral_v<T>) return a | b;
        return a;
      case BinaryKind::BitXor:
        if constexpr (std::is_integral_v<T>) return a ^ b;
        return a;
      default:
        return a;
    }
  }
}

// out[i] = f(a[i], b[i]) with a, b of type T broadcast to out's shape.
template <class T, class O, class F>
void map_binary(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const T* ap = ptr<T>(a);
  const T* bp = ptr<T>(b);
  O* op = ptr<O>(out);
  const Shape& shape = out.shape();
  const int64_t n = out.numel();
  if (out.is_contiguous() && a.shape() == shape && b.shape() == shape && a.is_contiguous() &&
      b.is_contiguous()) {
    for (int64_t i = 0; i < n; ++i) op[i] = f(ap[i], bp[i]);
    return;
  }
  if (out.is_contiguous() && b.numel() == 1 && a.shape() == shape && a.is_contiguous()) {
    const T bv = *bp;
    for (int64_t i = 0; i < n; ++i) op[i] = f(ap[i], bv);
    return;
  }
  Nest<3> nest(shape, {broadcast_strides(a, shape), broadcast_strides(b, shape), out.strides()});
  nest.run([&](const std::array<int64_t, 3>& o) { op[o[2]] = f(ap[o[0]], bp[o[1]]); });
}

template <class T>
void binary_typed(BinaryKind kind, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (is_predicate(kind)) {
    switch (kind) {
#define TD_PRED(K, EXPR)                                                   \
  case BinaryKind::K:                                                      \
    map_binary<T, bool>(a, b, out, [](T x, T y) -> bool { return EXPR; }); \
    return;
      TD_PRED(Eq, x == y)
      TD_PRED(Ne, x != y)
      TD_PRED(Lt, x < y)
      TD_PRED(Le, x <= y)
      TD_PRED(Gt, x > y)
      TD_PRED(Ge, x >= y)
      TD_PRED(LogicalAnd, x != T(0) && y != T(0))
      TD_PRED(LogicalOr, x != T(0) || y != T(0))
#undef TD_PRED
      default:
        return;
    }
  }
  // One instantiation per kind so the per-element switch folds away.
  switch (kind) {
#define TD_ARITH(K)                                                                          \
  case BinaryKind::K:                                                                        \
    map_binary<T, T>(a, b, out, [](T x, T y) { return apply_binary(BinaryKind::K, x, y); }); \
    return;
    TD_ARITH(Add)
    TD_ARITH(Sub)
    TD_ARITH(Mul)
    TD_ARITH(Div)
    TD_ARITH(Pow)
    TD_ARITH(Maximum)
    TD_ARITH(Minimum)
    TD_ARITH(BitAnd)
    TD_ARITH(BitOr)
    TD_ARITH(BitXor)
    TD_ARITH(Remainder)
    TD_ARITH(Fmod)
#undef TD_ARITH
    default:
      return;
  }
}

}  // namespace

Tensor unary(UnaryKind kind, const Tensor& x, DType out_dtype) {
  if (kind == UnaryKind::LogicalNot) {
    Tensor xb = cast_to(x, DType::Bool);
    count_kernel(KernelKind::Elementwise);
    return map_unary<bool>(xb, [](bool v) { return !v; });
  }
  Tensor xc = cast_to(x, out_dtype);
  count_kernel(KernelKind::Elementwise);
  return visit_dtype(out_dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      if (auto r = simd_unary<T>(kind, xc)) return *r;
    }
    switch (kind) {
#define TD_UN(K)     \
  case UnaryKind::K: \
    return map_unary<T>(xc, [](T v) { return apply_unary(UnaryKind::K, v); });
      TD_UN(Neg)
      TD_UN(Abs)
      TD_UN(Exp)
      TD_UN(Log)
      TD_UN(Sqrt)
      TD_UN(Rsqrt)
      TD_UN(Tanh)
      TD_UN(Sigmoid)
      TD_UN(Relu)
      TD_UN(Gelu)
      TD_UN(GeluTanh)
#undef TD_UN
      default:
        return map_unary<T>(xc, [kind](T v) { return apply_unary(kind, v); });
    }
  });
}

Tensor activation(UnaryKind kind, const Tensor& x, double a, double b) {
  count_kernel(KernelKind::Elementwise);
  return visit_dtype(x.dtype(), [&](auto tag) -> Tensor {
    using T = decltype(tag);
    if constexpr (!std::is_floating_point_v<T>) {
      throw_error<TypeError>("[activation] expects a floating tensor, got ", x.dtype());
    } else {
      using B = xsimd::batch<T>;
      const B pa(static_cast<T>(a)), pb(static_cast<T>(b)), zero(T(0));
      switch (kind) {
        case UnaryKind::LeakyRelu:
          return simd_map<T>(x, [=](B v) { return xsimd::select(v > zero, v, v * pa); });
        case UnaryKind::Elu:  // alpha (exp(x * input_scale) - 1) for x <= 0
          return simd_map<T>(
              x, [=](B v) { return xsimd::select(v > zero, v, pa * xsimd::expm1(v * pb)); });
        case UnaryKind::Softplus:  // beta x above the threshold: x, where exp would overflow
          return simd_map<T>(x, [=](B v) {
            const B z = v * pa;
            return xsimd::select(z > pb, v, xsimd::log1p(exp_lanes<T>(z)) / pa);
          });
        case UnaryKind::Hardtanh:
          return simd_map<T>(x, [=](B v) { return clamp_lanes(v, T(a), T(b)); });
        default:
          throw_error<ValueError>("[activation] not an activation kind");
      }
    }
  });
}

Tensor clamp(const Tensor& x, Scalar lo, Scalar hi, bool has_lo, bool has_hi) {
  count_kernel(KernelKind::Elementwise);
  return visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T l = static_cast<T>(lo.to_double()), h = static_cast<T>(hi.to_double());
      return map_unary<T>(x, [=](T v) -> T {
        if (std::isnan(v)) return v;
        // a NaN bound gives NaN, as torch's min(max(v, lo), hi) does
        if (has_lo && (v < l || std::isnan(l))) v = l;
        if (has_hi && (v > h || std::isnan(h))) v = h;
        return v;
      });
    } else {
      const int64_t l = lo.to_int(), h = hi.to_int();
      return map_unary<T>(x, [=](T v) -> T {
        int64_t d = static_cast<int64_t>(v);
        if (has_lo && d < l) d = l;
        if (has_hi && d > h) d = h;
        return static_cast<T>(d);
      });
    }
  });
}

Tensor binary(BinaryKind kind, const Tensor& a, const Tensor& b, DType compute_dtype,
              DType out_dtype) {
  Shape shape = broadcast_shapes("binary", a.shape(), b.shape());
  Tensor ac = cast_to(a, compute_dtype), bc = cast_to(b, compute_dtype);
  const DType natural = is_predicate(kind) ? DType::Bool : compute_dtype;
  Tensor out = Tensor::empty(shape, natural);
  count_kernel(KernelKind::Elementwise);
  if (out.numel() > 0)
    visit_dtype(compute_dtype, [&](auto tag) { binary_typed<decltype(tag)>(kind, ac, bc, out); });
  return cast_to(out, out_dtype);
}

void binary_inplace(BinaryKind kind, const Tensor& out, const Tensor& b) {
  // add_ and mul_ check their operands first, naming themselves: these guard the contract
  Shape shape = broadcast_shapes("binary_inplace", out.shape(), b.shape());
  if (shape != out.shape())
    throw_error<ValueError>("[binary_inplace] operand of shape ", shape_str(b.shape()),
                            " does not broadcast to the output shape ", shape_str(out.shape()));
  if (is_predicate(kind))
    throw_error<TypeError>("[binary_inplace] comparison ops cannot run in place");
  Tensor bc = cast_to(b, out.dtype());
  count_kernel(KernelKind::Elementwise);
  if (out.numel() == 0) return;
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // Reads out through its own strides and writes back in place (same offsets).
    T* op = ptr<T>(out);
    const T* bp = ptr<T>(bc);
    Nest<2> nest(shape, {out.strides(), broadcast_strides(bc, shape)});
    nest.run([&](const std::array<int64_t, 2>& o) {
      op[o[0]] = apply_binary(kind, op[o[0]], bp[o[1]]);
    });
  });
}

namespace {

// c ? a : b through the bits, without a branch
template <class T>
inline T pick(bool c, T a, T b) {
  using U = std::conditional_t<sizeof(T) == 8, uint64_t,
                               std::conditional_t<sizeof(T) == 4, uint32_t, uint8_t>>;
  static_assert(sizeof(U) == sizeof(T));
  U ua, ub;
  std::memcpy(&ua, &a, sizeof(T));
  std::memcpy(&ub, &b, sizeof(T));
  const U m = static_cast<U>(U(0) - static_cast<U>(c));
  const U ur = static_cast<U>((ua & m) | (ub & static_cast<U>(~m)));
  T out;
  std::memcpy(&out, &ur, sizeof(T));
  return out;
}

}  // namespace

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, DType out_dtype) {
  Shape shape = broadcast_shapes("where", cond.shape(), a.shape());
  shape = broadcast_shapes("where", shape, b.shape());
  Tensor cc = cast_to(cond, DType::Bool), ac = cast_to(a, out_dtype), bc = cast_to(b, out_dtype);
  Tensor out = Tensor::empty(shape, out_dtype);
  count_kernel(KernelKind::Elementwise);
  if (out.numel() == 0) return out;
  visit_dtype(out_dtype, [&](auto tag) {
    using T = decltype(tag);
    const bool* cp = ptr<bool>(cc);
    const T* ap = ptr<T>(ac);
    const T* bp = ptr<T>(bc);
    T* op = ptr<T>(out);
    Nest<4> nest(shape, {broadcast_strides(cc, shape), broadcast_strides(ac, shape),
                         broadcast_strides(bc, shape), out.strides()});
    const int64_t sc = nest.inner_stride(0), sa = nest.inner_stride(1), sb = nest.inner_stride(2),
                  so = nest.inner_stride(3);
    nest.rows([&](const std::array<int64_t, 4>& o, int64_t n) {
      const bool* c = cp + o[0];
      const T* x = ap + o[1];
      const T* y = bp + o[2];
      T* r = op + o[3];
      // contiguous rows with a value or a scalar on either side (masked_fill's): picked by
      // bit masks, which vectorise, instead of a branch on every element
      if (sc == 1 && so == 1 && sa == 1 && sb == 1) {
        for (int64_t i = 0; i < n; ++i) r[i] = pick(c[i], x[i], y[i]);
      } else if (sc == 1 && so == 1 && sa == 1 && sb == 0) {
        const T v = *y;
        for (int64_t i = 0; i < n; ++i) r[i] = pick(c[i], x[i], v);
      } else if (sc == 1 && so == 1 && sa == 0 && sb == 1) {
        const T v = *x;
        for (int64_t i = 0; i < n; ++i) r[i] = pick(c[i], v, y[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) r[i * so] = c[i * sc] ? x[i * sa] : y[i * sb];
      }
    });
  });
  return out;
}

}  // namespace td::kernels::TD_ISA
