// The xtensor bridge: element-wise maps, broadcasting, reductions and softmax over raw strided
// data. Casts and broadcast copies go through xt::adapt views; the arithmetic kernels run a
// coalesced strided loop (xtensor's generic stepper is slow on dynamic-rank views), with a flat
// loop when every operand is contiguous.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <type_traits>
#include <xsimd/xsimd.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnoalias.hpp>

#include "engine/dispatch.h"
#include "engine/kernels/kernels.h"
#include "engine/kernels/simd.h"

namespace td::kernels::TD_ISA {
namespace {

// ---- strided iteration ----

// Strides of x (in elements) read as if broadcast to `shape` (stride 0 on new or size-1 dims).
Strides broadcast_strides(const Tensor& x, const Shape& shape) {
  const Shape& xs = x.shape();
  const Strides& xst = x.strides();
  size_t nd = shape.size(), off = nd - xs.size();
  Strides st(nd, 0);
  for (size_t i = 0; i < xs.size(); ++i) st[off + i] = xs[i] == 1 ? 0 : xst[i];
  return st;
}

// A loop nest over `shape` with N operands; size-1 dims are dropped and mergeable dims merged.
template <int N>
struct Nest {
  Shape shape;
  std::array<Strides, N> st;

  Nest(const Shape& s, std::array<Strides, N> strides) {
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] == 1) continue;
      bool merge = !shape.empty();
      for (int k = 0; k < N && merge; ++k) merge = st[k].back() == strides[k][d] * s[d];
      if (merge) {
        shape.back() *= s[d];
        for (int k = 0; k < N; ++k) st[k].back() = strides[k][d];
      } else {
        shape.push_back(s[d]);
        for (int k = 0; k < N; ++k) st[k].push_back(strides[k][d]);
      }
    }
  }

  // Calls f(offsets) for every element, in row-major order of the (merged) shape.
  template <class F>
  void run(F&& f) const {
    for (int64_t n : shape)
      if (n == 0) return;
    std::array<int64_t, N> off{};
    if (shape.empty()) {
      f(off);
      return;
    }
    const int64_t nd = static_cast<int64_t>(shape.size());
    const int64_t inner = shape[nd - 1];
    std::array<int64_t, N> inner_st;
    for (int k = 0; k < N; ++k) inner_st[k] = st[k][nd - 1];
    std::vector<int64_t> idx(nd, 0);
    while (true) {
      std::array<int64_t, N> o = off;
      for (int64_t i = 0; i < inner; ++i) {
        f(o);
        for (int k = 0; k < N; ++k) o[k] += inner_st[k];
      }
      int64_t d = nd - 2;
      for (; d >= 0; --d) {
        for (int k = 0; k < N; ++k) off[k] += st[k][d];
        if (++idx[d] < shape[d]) break;
        for (int k = 0; k < N; ++k) off[k] -= st[k][d] * shape[d];
        idx[d] = 0;
      }
      if (d < 0) return;
    }
  }
};

template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

// ---- copy / cast through xt::adapt ----

template <class T>
auto adapt(const Tensor& t, const Shape& shape, const Strides& strides) {
  std::vector<size_t> sh(shape.begin(), shape.end());
  std::vector<std::ptrdiff_t> st(strides.begin(), strides.end());
  // xtensor sizes the buffer as numel (it only indexes through the strides), and refuses any
  // other size for a non-owning buffer.
  return xt::adapt(ptr<T>(t), static_cast<size_t>(shape_numel(shape)), xt::no_ownership(), sh, st);
}

template <class S, class D>
void copy_typed(const Tensor& src, const Tensor& dst) {
  const Shape& shape = dst.shape();
  if (src.is_contiguous() && dst.is_contiguous() && src.shape() == shape) {
    const S* s = ptr<S>(src);
    D* d = ptr<D>(dst);
    const int64_t n = dst.numel();
    if constexpr (std::is_same_v<S, D>) {
      std::memcpy(d, s, static_cast<size_t>(n) * sizeof(D));
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<D>(s[i]);
    }
    return;
  }
  if (shape.empty()) {
    *ptr<D>(dst) = static_cast<D>(*ptr<S>(src));
    return;
  }
  if (dst.is_contiguous()) {
    // Gathering into a contiguous buffer: the merged strided loop beats xtensor's stepper.
    const S* s = ptr<S>(src);
    D* d = ptr<D>(dst);
    Nest<2> nest(shape, {broadcast_strides(src, shape), dst.strides()});
    nest.run([&](const std::array<int64_t, 2>& o) { d[o[1]] = static_cast<D>(s[o[0]]); });
    return;
  }
  auto s = adapt<S>(src, shape, broadcast_strides(src, shape));
  auto d = adapt<D>(dst, shape, dst.strides());
  xt::noalias(d) = xt::cast<D>(s);
}

Tensor cast_to(const Tensor& x, DType dt) {
  if (x.dtype() == dt) return x;
  Tensor out = Tensor::empty(x.shape(), dt);
  copy_into(x, out);
  return out;
}

// ---- element-wise ops ----

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
      case UnaryKind::Relu:
        return v > 0 ? v : (std::isnan(v) ? v : T(0));
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

// r = vf(v) with the lanes where `bad` holds recomputed by f (chosen by value, so an element's
// bits still do not depend on its position).
template <class T, class B, class Bad, class F>
B with_scalar_lanes(B r, B v, Bad bad, F f) {
  if (!xsimd::any(bad(v))) return r;
  alignas(64) T vs[B::size], rs[B::size];
  v.store_aligned(vs);
  r.store_aligned(rs);
  for (size_t i = 0; i < B::size; ++i)
    if (bad(B(vs[i])).get(0)) rs[i] = f(vs[i]);
  return B::load_aligned(rs);
}

// xsimd 8.1's exp is inf from 88.376 (float) / 709.437 (double) on, where the true value is
// finite up to 88.723 / 709.783, and 0 where it is subnormal; std::exp takes those lanes.
template <class T, class B>
B exp_lanes(B v) {
  const B edge(std::is_same_v<T, float> ? T(87) : T(708));
  return with_scalar_lanes<T>(
      xsimd::exp(v), v, [&](B u) { return xsimd::abs(u) > edge; }, [](T u) { return std::exp(u); });
}

// xsimd 8.1's log of a subnormal double is off by up to 37 (log(8.35e-309) gave -746.2, not
// -709.4); std::log takes subnormal lanes.
template <class T, class B>
B log_lanes(B v) {
  const B tiny(std::numeric_limits<T>::min());
  return with_scalar_lanes<T>(
      xsimd::log(v), v, [&](B u) { return (u < tiny) & (u > B(T(0))); },
      [](T u) { return std::log(u); });
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

}  // namespace

namespace {

template <class T>
bool apply_predicate(BinaryKind k, T a, T b) {
  switch (k) {
    case BinaryKind::Eq:
      return a == b;
    case BinaryKind::Ne:
      return a != b;
    case BinaryKind::Lt:
      return a < b;
    case BinaryKind::Le:
      return a <= b;
    case BinaryKind::Gt:
      return a > b;
    case BinaryKind::Ge:
      return a >= b;
    case BinaryKind::LogicalAnd:
      return a != T(0) && b != T(0);
    case BinaryKind::LogicalOr:
      return a != T(0) || b != T(0);
    default:
      return false;
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

// ---- reductions ----

const char* reduce_name(ReduceKind kind) {
  static constexpr const char* kNames[] = {"sum",  "mean", "var",    "std",
                                           "amax", "amin", "argmax", "argmin"};
  return kNames[static_cast<int>(kind)];
}

// Integer sums accumulate unsigned, so they wrap (as PyTorch's) rather than overflow.
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

// Readers of one slot's reduced elements: a contiguous run, or gathered through offsets.
template <class T>
struct Run {
  const T* p;
  T operator()(int64_t i) const { return p[i]; }
};
template <class T>
struct Gather {
  const T* base;
  const int64_t* offsets;
  T operator()(int64_t i) const { return base[offsets[i]]; }
};

template <class T, class At>
constexpr bool kFloatRun = std::is_floating_point_v<T>&& std::is_same_v<At, Run<T>>;

// Every floating sum, in double, takes one order whatever the layout of its elements (a
// contiguous run, columns, or gathered), so a reduction's bits do not depend on the input's
// strides, which vmap's chunks and blocks of sets change: while whole groups of kSumLanes last,
// element i goes to lane i % kSumLanes (four vectors: chains that hide the add latency); the
// lanes are combined by sum_lanes; the rest follow in order.
constexpr int64_t kSumW = static_cast<int64_t>(xsimd::batch<double>::size);
constexpr int64_t kSumLanes = 4 * kSumW;

// lane(l) for l < kSumLanes
template <class L>
double sum_lanes(L lane) {
  double s = 0;
  for (int64_t l = 0; l < kSumW; ++l)
    s += (lane(l) + lane(kSumW + l)) + (lane(2 * kSumW + l) + lane(3 * kSumW + l));
  return s;
}

// acc + d * d rounded once on every path: GCC would contract it in some paths and not in others
// (xsimd's AVX-512 fma is a * b + c, left to the compiler), so a variance's bits would depend on
// the layout. Without FMA hardware nothing is fused. aarch64 always has FMA, and xsimd's NEON fma
// is fused (vfmaq_f64), so its scalar steps must be too.
inline double add_square(double acc, double d) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  return std::fma(d, d, acc);
#else
  return acc + d * d;
#endif
}
template <class A>
xsimd::batch<double, A> add_square(xsimd::batch<double, A> acc, xsimd::batch<double, A> d) {
  return fmadd(d, d, acc);
}

// Sum steps: acc = step(acc, v) for each element v (a double or a batch of them).
constexpr auto kPlus = [](auto acc, auto v) { return acc + v; };
inline auto squares_about(double m) {
  return [m](auto acc, auto v) { return add_square(acc, v - m); };
}

// p[0 .. kSumW) as doubles. xsimd 8.1 widens float through a buffer, element by element, which
// made a float sum about twice as slow as the compiler's own loop: one conversion instead.
template <class T>
xsimd::batch<double> load_double(const T* p) {
  using B = xsimd::batch<double>;
  if constexpr (std::is_same_v<T, float>) {
#if defined(__AVX512F__)
    if constexpr (B::size == 8) return B(_mm512_cvtps_pd(_mm256_loadu_ps(p)));
#elif defined(__AVX__)
    if constexpr (B::size == 4) return B(_mm256_cvtps_pd(_mm_loadu_ps(p)));
#endif
  }
  return B::load_unaligned(p);
}

// step over a contiguous floating run.
template <class T, class G>
double run_sum(const T* p, int64_t n, G step) {
  using B = xsimd::batch<double>;
  constexpr int64_t W = kSumW;
  B a0(0.0), a1(0.0), a2(0.0), a3(0.0);
  int64_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    a0 = step(a0, load_double(p + i));
    a1 = step(a1, load_double(p + i + W));
    a2 = step(a2, load_double(p + i + 2 * W));
    a3 = step(a3, load_double(p + i + 3 * W));
  }
  alignas(64) double lane[kSumLanes];
  a0.store_aligned(lane);
  a1.store_aligned(lane + W);
  a2.store_aligned(lane + 2 * W);
  a3.store_aligned(lane + 3 * W);
  double s = sum_lanes([&](int64_t l) { return lane[l]; });
  for (; i < n; ++i) s = step(s, static_cast<double>(p[i]));
  return s;
}

// step over at(0 .. n-1) in A, from 0. Integer adds reassociate, so the compiler vectorises a
// run of those.
template <class A, class T, class At, class G>
A sum_of(int64_t n, At at, G step) {
  if constexpr (kFloatRun<T, At>) {
    return run_sum(at.p, n, step);
  } else if constexpr (std::is_floating_point_v<T>) {
    double lane[kSumLanes] = {};
    const int64_t whole = n / kSumLanes * kSumLanes;
    int64_t i = 0;
    for (; i < whole; i += kSumLanes)
      for (int64_t l = 0; l < kSumLanes; ++l)
        lane[l] = step(lane[l], static_cast<double>(at(i + l)));
    double s = sum_lanes([&](int64_t l) { return lane[l]; });
    for (; i < n; ++i) s = step(s, static_cast<double>(at(i)));
    return s;
  } else {
    A s = 0;
    for (int64_t i = 0; i < n; ++i) s = step(s, static_cast<A>(at(i)));
    return s;
  }
}

// Whether v replaces the running best b: a NaN beats every number and is never replaced itself,
// and a tie keeps b, so the first best element wins. Bitwise, not short-circuit: loops of it
// then vectorise.
template <bool IsMax, class T>
bool beats(T v, T b) {
  const bool better = IsMax ? v > b : v < b;
  if constexpr (std::is_floating_point_v<T>)
    return (b == b) & ((v != v) | better);
  else
    return better;
}

// The best element of a contiguous floating run p[0 .. n-1], n >= 1, or NaN if there is one:
// vector maxima (minima) with a separate NaN flag, as xsimd leaves max's NaN handling open.
template <bool IsMax, class T>
T best_of_run(const T* p, int64_t n) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  T best = p[0];
  int64_t i = 0;
  if (n >= W) {
    B lanes = B::load_unaligned(p);
    auto nan = xsimd::isnan(lanes);  // not lanes != lanes: xsimd 8's != is false for NaN
    for (i = W; i + W <= n; i += W) {
      const B v = B::load_unaligned(p + i);
      lanes = IsMax ? xsimd::max(lanes, v) : xsimd::min(lanes, v);
      nan = nan | xsimd::isnan(v);
    }
    if (xsimd::any(nan)) return std::numeric_limits<T>::quiet_NaN();
    T l[W];
    lanes.store_unaligned(l);
    for (T v : l)
      if (beats<IsMax>(v, best)) best = v;
  }
  for (; i < n; ++i)
    if (beats<IsMax>(p[i], best)) best = p[i];
  return best;
}

// Index of the first element of p equal to best (the first NaN if best is NaN); there is one.
template <class T>
int64_t find_first(const T* p, int64_t n, T best) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  const bool nan = best != best;
  const B bv(best);
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const B v = B::load_unaligned(p + i);
    if (xsimd::any(nan ? xsimd::isnan(v) : v == bv)) break;
  }
  while (nan ? p[i] == p[i] : p[i] != best) ++i;
  return i;
}

// Index of the first best element of at(0 .. n-1), n >= 1 (the first NaN if there is one). On a
// floating run the vector lanes lose which of several equal elements came first (-0 and +0,
// NaNs), so a search finds it.
template <bool IsMax, class T, class At>
int64_t first_best(int64_t n, At at) {
  if constexpr (kFloatRun<T, At>) {
    return find_first(at.p, n, best_of_run<IsMax>(at.p, n));
  } else {
    int64_t bi = 0;
    for (int64_t i = 1; i < n; ++i)
      if (beats<IsMax>(at(i), at(bi))) bi = i;
    return bi;
  }
}

// The value of that element. Equal numbers other than zeros are identical, so only a zero or
// NaN best needs the search (for its sign or payload).
template <bool IsMax, class T, class At>
T best_value(int64_t n, At at) {
  if constexpr (kFloatRun<T, At>) {
    const T best = best_of_run<IsMax>(at.p, n);
    return best == best && best != T(0) ? best : at(find_first(at.p, n, best));
  } else {
    return at(first_best<IsMax, T>(n, at));
  }
}

template <class O, class A>
O sum_result(ReduceKind kind, A s, int64_t r) {
  if (kind == ReduceKind::Mean)
    return static_cast<O>(static_cast<double>(s) / static_cast<double>(r));
  return static_cast<O>(s);
}

// From the sum of squared deviations.
template <class O>
O var_result(ReduceKind kind, double ss, int64_t r, bool unbiased) {
  double v = ss / static_cast<double>(unbiased ? r - 1 : r);
  if (unbiased && r <= 1) v = std::numeric_limits<double>::quiet_NaN();
  return static_cast<O>(kind == ReduceKind::Std ? std::sqrt(v) : v);
}

// One output slot from its r reduced elements at(0 .. r-1), in row-major order of the reduced
// dims (argmax counts in that order).
template <class T, class O, class At>
O reduce_slot(ReduceKind kind, int64_t r, At at, bool unbiased) {
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean:
      return sum_result<O>(kind, sum_of<Acc<T>, T>(r, at, kPlus), r);
    case ReduceKind::Var:
    case ReduceKind::Std: {
      const double m = sum_of<double, T>(r, at, kPlus) / static_cast<double>(r);
      const double ss = sum_of<double, T>(r, at, squares_about(m));
      return var_result<O>(kind, ss, r, unbiased);
    }
    case ReduceKind::Amax:
      return static_cast<O>(best_value<true, T>(r, at));
    case ReduceKind::Amin:
      return static_cast<O>(best_value<false, T>(r, at));
    case ReduceKind::Argmax:
      return static_cast<O>(first_best<true, T>(r, at));
    case ReduceKind::Argmin:
      return static_cast<O>(first_best<false, T>(r, at));
  }
  return O{};
}

// Running bests of m columns over the reduced rows: best[j] and its row index bi[j].
template <bool IsMax, class T>
void best_columns(const T* xp, const Nest<1>& red, int64_t m, T* best, int64_t* bi) {
  std::copy_n(xp, m, best);
  std::fill_n(bi, m, 0);
  int64_t i = 0;
  red.run([&](const std::array<int64_t, 1>& o) {
    const T* row = xp + o[0];
    if (i > 0)
      for (int64_t j = 0; j < m; ++j) {
        const bool take = beats<IsMax>(row[j], best[j]);
        best[j] = take ? row[j] : best[j];
        bi[j] = take ? i : bi[j];
      }
    ++i;
  });
}

// Columns reduced at a time: their accumulators (kSumLanes each for a floating sum) stay in L1.
constexpr int64_t kColumnBlock = 64;

// out[j] = column j's step (made by step_of(j)) over the r rows at red's offsets from xp, in
// sum_of's order.
template <class T, class S>
void column_sums(const T* xp, const Nest<1>& red, int64_t r, int64_t m, S step_of, double* out) {
  const int64_t whole = r / kSumLanes * kSumLanes;
  if (whole == 0) {  // fewer rows than lanes: straight into out (the lanes would sum to 0)
    std::fill_n(out, m, 0.0);
    red.run([&](const std::array<int64_t, 1>& o) {
      const T* row = xp + o[0];
      for (int64_t j = 0; j < m; ++j) out[j] = step_of(j)(out[j], static_cast<double>(row[j]));
    });
    return;
  }
  double lane[kSumLanes][kColumnBlock];
  for (auto& l : lane) std::fill_n(l, m, 0.0);
  auto combine = [&] {
    for (int64_t j = 0; j < m; ++j) out[j] = sum_lanes([&](int64_t l) { return lane[l][j]; });
  };
  int64_t i = 0;
  red.run([&](const std::array<int64_t, 1>& o) {
    const T* row = xp + o[0];
    if (i < whole) {
      double* acc = lane[i % kSumLanes];
      for (int64_t j = 0; j < m; ++j) acc[j] = step_of(j)(acc[j], static_cast<double>(row[j]));
    } else {
      if (i == whole) combine();
      for (int64_t j = 0; j < m; ++j) out[j] = step_of(j)(out[j], static_cast<double>(row[j]));
    }
    ++i;
  });
  if (whole == r) combine();
}

// op[j] for m contiguous kept columns xp[j], with the reduced rows at red's offsets (r of them).
// Rows stream into m accumulators rather than striding down each column; every column still
// sees its rows in order, as argmax's first-index rule needs.
template <class T, class O>
void reduce_columns(ReduceKind kind, const T* xp, const Nest<1>& red, int64_t r, int64_t m, O* op,
                    bool unbiased) {
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean: {
      Acc<T> acc[kColumnBlock];
      if constexpr (std::is_floating_point_v<T>) {
        column_sums(
            xp, red, r, m, [](int64_t) { return kPlus; }, acc);
      } else {
        std::fill_n(acc, m, 0);
        red.run([&](const std::array<int64_t, 1>& o) {
          const T* row = xp + o[0];
          for (int64_t j = 0; j < m; ++j) acc[j] += Acc<T>(row[j]);
        });
      }
      for (int64_t j = 0; j < m; ++j) op[j] = sum_result<O>(kind, acc[j], r);
      return;
    }
    case ReduceKind::Var:
    case ReduceKind::Std: {
      double mean[kColumnBlock], ss[kColumnBlock];
      column_sums(
          xp, red, r, m, [](int64_t) { return kPlus; }, mean);
      for (int64_t j = 0; j < m; ++j) mean[j] /= static_cast<double>(r);
      column_sums(
          xp, red, r, m, [&](int64_t j) { return squares_about(mean[j]); }, ss);
      for (int64_t j = 0; j < m; ++j) op[j] = var_result<O>(kind, ss[j], r, unbiased);
      return;
    }
    default: {
      const bool is_max = kind == ReduceKind::Amax || kind == ReduceKind::Argmax;
      const bool is_arg = kind == ReduceKind::Argmax || kind == ReduceKind::Argmin;
      T best[kColumnBlock];
      int64_t bi[kColumnBlock];
      if (is_max)
        best_columns<true>(xp, red, m, best, bi);
      else
        best_columns<false>(xp, red, m, best, bi);
      for (int64_t j = 0; j < m; ++j)
        op[j] = is_arg ? static_cast<O>(bi[j]) : static_cast<O>(best[j]);
      return;
    }
  }
}

template <class T, class O>
void reduce_typed(ReduceKind kind, const Tensor& x, const std::vector<bool>& is_red,
                  const Tensor& out, bool unbiased) {
  Shape rs, ks;
  Strides rst, kst;
  for (int64_t d = 0; d < x.dim(); ++d) {
    (is_red[d] ? rs : ks).push_back(x.shape()[d]);
    (is_red[d] ? rst : kst).push_back(x.strides()[d]);
  }
  // Merging keeps row-major order, so argmax indexes still count in the logical order.
  const Nest<1> red(rs, {rst}), kept(ks, {kst});
  const int64_t r = shape_numel(rs);
  const T* xp = ptr<T>(x);
  O* op = ptr<O>(out);
  int64_t slot = 0;
  // Every slot's reduced elements are one contiguous run.
  if (red.shape.empty() || (red.shape.size() == 1 && red.st[0][0] == 1)) {
    kept.run([&](const std::array<int64_t, 1>& o) {
      op[slot++] = reduce_slot<T, O>(kind, r, Run<T>{xp + o[0]}, unbiased);
    });
    return;
  }
  // The innermost kept dims are contiguous: reduce blocks of columns.
  if (!kept.shape.empty() && kept.st[0].back() == 1) {
    const int64_t m = kept.shape.back();
    Shape outer_shape(kept.shape.begin(), kept.shape.end() - 1);
    Strides outer_strides(kept.st[0].begin(), kept.st[0].end() - 1);
    Nest<1>(outer_shape, {outer_strides}).run([&](const std::array<int64_t, 1>& o) {
      for (int64_t j = 0; j < m; j += kColumnBlock)
        reduce_columns<T, O>(kind, xp + o[0] + j, red, r, std::min(kColumnBlock, m - j),
                             op + slot + j, unbiased);
      slot += m;
    });
    return;
  }
  std::vector<int64_t> offsets;
  try {
    offsets.reserve(r);
  } catch (const std::exception&) {  // length_error or bad_alloc: r of an expanded x is unbounded
    throw_error<RuntimeError>("[", reduce_name(kind), "] cannot allocate the offsets of ", r,
                              " reduced elements (input of shape ", x.shape(), ")");
  }
  red.run([&](const std::array<int64_t, 1>& o) { offsets.push_back(o[0]); });
  kept.run([&](const std::array<int64_t, 1>& o) {
    op[slot++] = reduce_slot<T, O>(kind, r, Gather<T>{xp + o[0], offsets.data()}, unbiased);
  });
}

// One contiguous row: every element's exp goes through exp_lanes (the tail in a padded vector)
// and the sum runs in double in a fixed order, so a row's bits depend on its values alone.
template <class T>
void softmax_row(const T* a, T* b, int64_t n, bool log) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  constexpr T lowest = -std::numeric_limits<T>::infinity();
  B lanes(lowest);
  int64_t i = 0;
  for (; i + W <= n; i += W) lanes = xsimd::max(lanes, B::load_unaligned(a + i));
  alignas(64) T lane_max[W];
  lanes.store_aligned(lane_max);
  T mx = lowest;  // a NaN, met or not here, makes the row's sum and so the whole row NaN
  for (T v : lane_max) mx = v > mx ? v : mx;
  for (; i < n; ++i) mx = a[i] > mx ? a[i] : mx;
  if (std::isinf(mx) && mx < 0) mx = 0;  // all -inf: avoid inf - inf
  const B vmx(mx);
  i = 0;
  for (; i + W <= n; i += W) exp_lanes<T>(B::load_unaligned(a + i) - vmx).store_unaligned(b + i);
  if (i < n) {
    alignas(64) T buf[W] = {};
    std::copy(a + i, a + n, buf);
    exp_lanes<T>(B::load_aligned(buf) - vmx).store_aligned(buf);
    std::copy(buf, buf + (n - i), b + i);
  }
  const double s = run_sum(b, n, kPlus);
  if (log) {
    const T ls = static_cast<T>(std::log(s));
    for (int64_t k = 0; k < n; ++k) b[k] = a[k] - mx - ls;
  } else {
    const T inv = static_cast<T>(1.0 / s);
    for (int64_t k = 0; k < n; ++k) b[k] *= inv;
  }
}

// Rows along `dim`; a strided row is gathered and scattered so that it meets the same code.
template <class T>
void softmax_typed(const Tensor& x, int64_t dim, bool log, const Tensor& out) {
  const T* xp = ptr<T>(x);
  T* op = ptr<T>(out);
  const int64_t n = x.shape()[dim], xs = x.strides()[dim], os = out.strides()[dim];
  Shape outer = x.shape();
  outer[dim] = 1;
  Nest<2> nest(outer, {x.strides(), out.strides()});
  std::vector<T> in_row(xs == 1 ? 0 : n), out_row(os == 1 ? 0 : n);
  nest.run([&](const std::array<int64_t, 2>& o) {
    const T* a = xp + o[0];
    if (xs != 1) {
      for (int64_t i = 0; i < n; ++i) in_row[i] = a[i * xs];
      a = in_row.data();
    }
    T* b = os == 1 ? op + o[1] : out_row.data();
    softmax_row(a, b, n, log);
    if (os != 1)
      for (int64_t i = 0; i < n; ++i) op[o[1] + i * os] = out_row[i];
  });
}

}  // namespace

void copy_into(const Tensor& src, const Tensor& dst) {
  if (src.dim() > dst.dim() || broadcast_shapes("copy_", src.shape(), dst.shape()) != dst.shape())
    throw_error<ValueError>("[copy_] source of shape ", shape_str(src.shape()),
                            " does not broadcast to the destination shape ",
                            shape_str(dst.shape()));
  count_kernel(KernelKind::Copy);
  if (dst.numel() == 0) return;
  visit_dtype(src.dtype(), [&](auto s) {
    visit_dtype(dst.dtype(), [&](auto d) { copy_typed<decltype(s), decltype(d)>(src, dst); });
  });
}

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
    nest.run([&](const std::array<int64_t, 4>& o) { op[o[3]] = cp[o[0]] ? ap[o[1]] : bp[o[2]]; });
  });
  return out;
}

Tensor reduce(ReduceKind kind, const Tensor& x, const IntList& dims, bool keepdim, bool unbiased) {
  Shape out_shape, keep_shape = x.shape();
  std::vector<bool> red(x.dim(), false);
  for (int64_t d : dims) red[d] = true;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (red[d])
      keep_shape[d] = 1;
    else
      out_shape.push_back(x.shape()[d]);
  }
  DType out_dtype;
  switch (kind) {
    case ReduceKind::Sum:
      out_dtype = is_floating(x.dtype()) ? x.dtype() : DType::Int64;
      break;
    case ReduceKind::Argmax:
    case ReduceKind::Argmin:
      out_dtype = DType::Int64;
      break;
    default:
      out_dtype = x.dtype();
  }
  Tensor out = Tensor::empty(out_shape, out_dtype);
  count_kernel(KernelKind::Reduce);
  if (out.numel() > 0) {
    visit_dtype(x.dtype(), [&](auto xt) {
      visit_dtype(out_dtype, [&](auto ot) {
        using T = decltype(xt);
        using O = decltype(ot);
        // Only the meaningful (T, O) pairs are instantiated.
        if constexpr (std::is_same_v<T, O> || std::is_same_v<O, int64_t>)
          reduce_typed<T, O>(kind, x, red, out, unbiased);
      });
    });
  }
  if (keepdim)
    return Tensor::from_storage_unchecked(out.storage(), out_dtype, keep_shape,
                                          contiguous_strides(keep_shape));
  return out;
}

namespace {
#ifdef __AVX512F__
// A register of every other element of [a, b] (even lanes), and the masks of a row's tail.
inline __m512 evens(__m512 a, __m512 b) {
  return _mm512_permutex2var_ps(
      a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b);
}
inline __m512d evens(__m512d a, __m512d b) {
  return _mm512_permutex2var_pd(a, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), b);
}
inline __m512 load_masked(const float* p, uint32_t m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512d load_masked(const double* p, uint32_t m) { return _mm512_maskz_loadu_pd(m, p); }
inline void store_masked(float* p, uint32_t m, __m512 v) { _mm512_mask_storeu_ps(p, m, v); }
inline void store_masked(double* p, uint32_t m, __m512d v) { _mm512_mask_storeu_pd(p, m, v); }
#endif

template <class T>
void copy_rows_typed(const T* src, int64_t src_rows, int step, T* dst, int64_t dst_rows, int64_t n,
                     int64_t rows) {
#ifdef __AVX512F__
  constexpr int64_t W = 64 / sizeof(T);  // lanes
  constexpr uint32_t all = (1u << W) - 1;
  auto mask = [](int64_t k) { return k >= W ? all : k <= 0 ? 0u : (1u << k) - 1; };
  // W outputs take step * (W - 1) + 1 inputs; the row's tail masked
  const int64_t full = n / W * W, rest = n - full;
  const uint32_t tail = mask(rest);
  if (step == 1) {
    for (int64_t r = 0; r < rows; ++r, src += src_rows, dst += dst_rows) {
      for (int64_t k = 0; k < full; k += W) store_masked(dst + k, all, load_masked(src + k, all));
      if (rest > 0) store_masked(dst + full, tail, load_masked(src + full, tail));
    }
    return;
  }
  if (step == 2) {
    const int64_t need = 2 * rest - 1;
    const uint32_t ma = mask(need), mb = mask(need - W);
    for (int64_t r = 0; r < rows; ++r, src += src_rows, dst += dst_rows) {
      for (int64_t k = 0; k < full; k += W)
        store_masked(dst + k, all,
                     evens(load_masked(src + 2 * k, all), load_masked(src + 2 * k + W, all >> 1)));
      if (rest > 0)
        store_masked(dst + full, tail,
                     evens(load_masked(src + 2 * full, ma), load_masked(src + 2 * full + W, mb)));
    }
    return;
  }
#endif
  for (int64_t r = 0; r < rows; ++r, src += src_rows, dst += dst_rows)
    for (int64_t k = 0; k < n; ++k) dst[k] = src[step * k];
}
}  // namespace

void copy_rows(const float* src, int64_t src_rows, int step, float* dst, int64_t dst_rows,
               int64_t n, int64_t rows) {
  copy_rows_typed(src, src_rows, step, dst, dst_rows, n, rows);
}
void copy_rows(const double* src, int64_t src_rows, int step, double* dst, int64_t dst_rows,
               int64_t n, int64_t rows) {
  copy_rows_typed(src, src_rows, step, dst, dst_rows, n, rows);
}

double row_sum(const float* p, int64_t n) { return run_sum(p, n, kPlus); }
double row_sum(const double* p, int64_t n) { return run_sum(p, n, kPlus); }
double row_sum_squares(const float* p, int64_t n, double m) {
  return run_sum(p, n, squares_about(m));
}
double row_sum_squares(const double* p, int64_t n, double m) {
  return run_sum(p, n, squares_about(m));
}

Tensor softmax(const Tensor& x, int64_t dim, bool log) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  count_kernel(KernelKind::Reduce);
  if (out.numel() == 0) return out;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) softmax_typed<T>(x, dim, log, out);
  });
  return out;
}

}  // namespace td::kernels::TD_ISA
