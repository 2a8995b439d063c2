// The xtensor bridge: element-wise maps, broadcasting, reductions and softmax over raw strided
// data. Casts and broadcast copies go through xt::adapt views; the arithmetic kernels run a
// coalesced strided loop (xtensor's generic stepper is slow on dynamic-rank views), with a flat
// loop when every operand is contiguous.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <xsimd/xsimd.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnoalias.hpp>

#include "engine/dispatch.h"
#include "engine/kernels/kernels.h"

namespace td::kernels {
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

template <class T>
T apply_unary(UnaryKind k, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (k) {
      case UnaryKind::LogicalNot:
        return !v;
      default:
        return v;  // abs, relu of bool are identities
    }
  } else if constexpr (std::is_integral_v<T>) {
    switch (k) {
      case UnaryKind::Neg:
        return -v;
      case UnaryKind::Abs:
        return v < 0 ? -v : v;
      case UnaryKind::Relu:
        return v > 0 ? v : 0;
      default:
        return v;
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

// Contiguous floating maps with xsimd's vectorised math (std::exp and friends do not vectorise).
template <class T, class V>
Tensor simd_map(const Tensor& x, UnaryKind kind, V vf) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  Tensor out = Tensor::empty(x.shape(), dtype_of<T>());
  const T* xp = ptr<T>(x);
  T* op = ptr<T>(out);
  const int64_t n = x.numel();
  int64_t i = 0;
  for (; i + W <= n; i += W) vf(B::load_unaligned(xp + i)).store_unaligned(op + i);
  for (; i < n; ++i) op[i] = apply_unary(kind, xp[i]);
  return out;
}

template <class T>
std::optional<Tensor> simd_unary(UnaryKind kind, const Tensor& x) {
  using B = xsimd::batch<T>;
  switch (kind) {
    case UnaryKind::Exp:
      return simd_map<T>(x, kind, [](B v) { return xsimd::exp(v); });
    case UnaryKind::Log:
      return simd_map<T>(x, kind, [](B v) { return xsimd::log(v); });
    case UnaryKind::Tanh:
      return simd_map<T>(x, kind, [](B v) { return xsimd::tanh(v); });
    case UnaryKind::Sqrt:
      return simd_map<T>(x, kind, [](B v) { return xsimd::sqrt(v); });
    case UnaryKind::Rsqrt:
      return simd_map<T>(x, kind, [](B v) { return B(T(1)) / xsimd::sqrt(v); });
    case UnaryKind::Sigmoid:
      return simd_map<T>(x, kind, [](B v) { return B(T(1)) / (B(T(1)) + xsimd::exp(-v)); });
    case UnaryKind::Gelu:
      return simd_map<T>(
          x, kind, [](B v) { return B(T(0.5)) * v * (B(T(1)) + xsimd::erf(v * B(T(M_SQRT1_2)))); });
    case UnaryKind::GeluTanh:
      return simd_map<T>(x, kind, [](B v) {
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
        return a || b;
      case BinaryKind::Mul:
      case BinaryKind::Minimum:
      case BinaryKind::LogicalAnd:
        return a && b;
      case BinaryKind::Sub:
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
        return a + b;
      case BinaryKind::Sub:
        return a - b;
      case BinaryKind::Mul:
        return a * b;
      case BinaryKind::Div:
        if constexpr (std::is_integral_v<T>)
          return b == 0 ? 0 : a / b;
        else
          return a / b;
      case BinaryKind::Pow:
        if constexpr (std::is_integral_v<T>) {
          if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
          T r = 1, base = a;
          for (T e = b; e > 0; e >>= 1, base *= base)
            if (e & 1) r *= base;
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
      default:
        return a;
    }
  }
}

}  // namespace

bool is_predicate(BinaryKind k) {
  switch (k) {
    case BinaryKind::Eq:
    case BinaryKind::Ne:
    case BinaryKind::Lt:
    case BinaryKind::Le:
    case BinaryKind::Gt:
    case BinaryKind::Ge:
    case BinaryKind::LogicalAnd:
    case BinaryKind::LogicalOr:
      return true;
    default:
      return false;
  }
}

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
#undef TD_ARITH
    default:
      return;
  }
}

// ---- reductions ----

// Offsets (in elements) of the reduced elements of one output slot, in row-major order of the
// reduced dims; and the loop over the kept dims.
struct ReducePlan {
  std::vector<int64_t> inner;  // offsets of reduced elements
  Shape kept_shape;
  Strides kept_strides;
};

ReducePlan plan_reduce(const Tensor& x, const IntList& dims) {
  ReducePlan p;
  const int64_t nd = x.dim();
  std::vector<bool> red(nd, false);
  for (int64_t d : dims) red[d] = true;
  Shape rs;
  Strides rst;
  for (int64_t d = 0; d < nd; ++d) {
    if (red[d]) {
      rs.push_back(x.shape()[d]);
      rst.push_back(x.strides()[d]);
    } else {
      p.kept_shape.push_back(x.shape()[d]);
      p.kept_strides.push_back(x.strides()[d]);
    }
  }
  int64_t r = shape_numel(rs);
  p.inner.reserve(r);
  if (r > 0) {
    // No merging here: argmax indexes must follow the logical row-major order.
    std::vector<int64_t> idx(rs.size(), 0);
    int64_t off = 0;
    for (int64_t i = 0; i < r; ++i) {
      p.inner.push_back(off);
      for (int64_t d = static_cast<int64_t>(rs.size()) - 1; d >= 0; --d) {
        off += rst[d];
        if (++idx[d] < rs[d]) break;
        off -= rst[d] * rs[d];
        idx[d] = 0;
      }
    }
  }
  return p;
}

template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

template <class T, class O>
void reduce_typed(ReduceKind kind, const Tensor& x, const ReducePlan& p, const Tensor& out,
                  bool unbiased) {
  const T* xp = ptr<T>(x);
  O* op = ptr<O>(out);
  const int64_t r = static_cast<int64_t>(p.inner.size());
  const int64_t* in = p.inner.data();
  int64_t slot = 0;
  Nest<1> nest(p.kept_shape, {p.kept_strides});
  nest.run([&](const std::array<int64_t, 1>& o) {
    const T* base = xp + o[0];
    O result{};
    switch (kind) {
      case ReduceKind::Sum:
      case ReduceKind::Mean: {
        Acc<T> s = 0;
        for (int64_t i = 0; i < r; ++i) s += static_cast<Acc<T>>(base[in[i]]);
        if (kind == ReduceKind::Mean)
          result = static_cast<O>(static_cast<double>(s) / static_cast<double>(r));
        else
          result = static_cast<O>(s);
        break;
      }
      case ReduceKind::Var:
      case ReduceKind::Std: {
        double s = 0;
        for (int64_t i = 0; i < r; ++i) s += static_cast<double>(base[in[i]]);
        const double m = s / static_cast<double>(r);
        double ss = 0;
        for (int64_t i = 0; i < r; ++i) {
          const double d = static_cast<double>(base[in[i]]) - m;
          ss += d * d;
        }
        double v = ss / static_cast<double>(unbiased ? r - 1 : r);
        if (unbiased && r <= 1) v = std::numeric_limits<double>::quiet_NaN();
        result = static_cast<O>(kind == ReduceKind::Std ? std::sqrt(v) : v);
        break;
      }
      case ReduceKind::Amax:
      case ReduceKind::Amin:
      case ReduceKind::Argmax:
      case ReduceKind::Argmin: {
        const bool is_max = kind == ReduceKind::Amax || kind == ReduceKind::Argmax;
        T best = base[in[0]];
        int64_t bi = 0;
        for (int64_t i = 1; i < r; ++i) {
          const T v = base[in[i]];
          bool better;
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(best)) break;  // NaN wins, first one
            better = std::isnan(v) || (is_max ? v > best : v < best);
          } else {
            better = is_max ? v > best : v < best;
          }
          if (better) {
            best = v;
            bi = i;
          }
        }
        if (kind == ReduceKind::Argmax || kind == ReduceKind::Argmin)
          result = static_cast<O>(bi);
        else
          result = static_cast<O>(best);
        break;
      }
    }
    op[slot++] = result;
  });
}

template <class T>
void softmax_typed(const Tensor& x, int64_t dim, bool log, const Tensor& out) {
  const T* xp = ptr<T>(x);
  T* op = ptr<T>(out);
  const int64_t n = x.shape()[dim], xs = x.strides()[dim], os = out.strides()[dim];
  Shape outer = x.shape();
  outer[dim] = 1;
  Nest<2> nest(outer, {x.strides(), out.strides()});
  nest.run([&](const std::array<int64_t, 2>& o) {
    const T* a = xp + o[0];
    T* b = op + o[1];
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, a[i * xs]);
    if (std::isinf(mx) && mx < 0) mx = 0;  // all -inf: avoid inf - inf
    if (log) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += std::exp(a[i * xs] - mx);
      const T ls = static_cast<T>(std::log(s));
      for (int64_t i = 0; i < n; ++i) b[i * os] = a[i * xs] - mx - ls;
    } else {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) {
        const T e = std::exp(a[i * xs] - mx);
        b[i * os] = e;
        s += e;
      }
      const T inv = static_cast<T>(1.0 / s);
      for (int64_t i = 0; i < n; ++i) b[i * os] *= inv;
    }
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
      if (xc.is_contiguous())
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

Tensor clamp(const Tensor& x, double lo, double hi, bool has_lo, bool has_hi) {
  count_kernel(KernelKind::Elementwise);
  return visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return map_unary<T>(x, [=](T v) -> T {
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(v)) return v;
        if (has_lo && v < static_cast<T>(lo)) v = static_cast<T>(lo);
        if (has_hi && v > static_cast<T>(hi)) v = static_cast<T>(hi);
        return v;
      } else {
        double d = static_cast<double>(v);
        if (has_lo && d < lo) d = lo;
        if (has_hi && d > hi) d = hi;
        return static_cast<T>(d);
      }
    });
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
  ReducePlan plan = plan_reduce(x, dims);
  count_kernel(KernelKind::Reduce);
  if (out.numel() > 0) {
    visit_dtype(x.dtype(), [&](auto xt) {
      visit_dtype(out_dtype, [&](auto ot) {
        using T = decltype(xt);
        using O = decltype(ot);
        // Only the meaningful (T, O) pairs are instantiated.
        if constexpr (std::is_same_v<T, O> || std::is_same_v<O, int64_t>)
          reduce_typed<T, O>(kind, x, plan, out, unbiased);
      });
    });
  }
  if (keepdim)
    return Tensor::from_storage(out.storage(), out_dtype, keep_shape,
                                contiguous_strides(keep_shape));
  return out;
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

}  // namespace td::kernels
