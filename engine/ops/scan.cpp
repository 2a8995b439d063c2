// Scans along one dim: cumsum and cumprod.
#include <cstdint>
#include <type_traits>
#include <vector>

#include "engine/ops.h"
#include "engine/ops/impls.h"
#include "engine/parallel.h"

namespace td {
namespace impl {

DType check_scan(OpId op, const Shape& x, DType t, const ScanAttrs& a, const char* what) {
  const char* name = op_name(op);
  check_one_dim(name, x, a.dim, what);
  if (a.dtype == DType::Bool)  // as torch ("cumsum_out_cpu" not implemented for 'Bool')
    throw_error<TypeError>("[", name, "] cannot scan in bool (input of ", what, " ", x,
                           "): give an integer or floating dtype");
  if (a.dtype) return *a.dtype;
  return is_floating(t) ? t : DType::Int64;
}

namespace {

// The accumulator of torch's CPU kernel: float32 sums and products in float64.
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;

// int64 wraps around on overflow, as torch, without signed overflow in C++.
template <bool Prod, class A>
A step(A acc, A v) {
  if constexpr (std::is_same_v<A, int64_t>) {
    const auto a = static_cast<uint64_t>(acc), b = static_cast<uint64_t>(v);
    return static_cast<int64_t>(Prod ? a * b : a + b);
  } else {
    return Prod ? acc * v : acc + v;
  }
}

// x and y contiguous as [outer, n, inner]; rows o in [o0, o1). With inner > 1 a whole inner
// row is accumulated at once (independent lanes: vectorisable); with inner == 1 each row is a
// plain sequential scan.
template <bool Prod, class T>
void scan_rows(const T* __restrict x, T* __restrict y, int64_t o0, int64_t o1, int64_t n,
               int64_t inner) {
  using A = Acc<T>;
  const A init = Prod ? A(1) : A(0);
  if (inner == 1) {
    for (int64_t o = o0; o < o1; ++o) {
      const T* xr = x + o * n;
      T* yr = y + o * n;
      A acc = init;
      for (int64_t i = 0; i < n; ++i) {
        acc = step<Prod>(acc, static_cast<A>(xr[i]));
        yr[i] = static_cast<T>(acc);
      }
    }
    return;
  }
  std::vector<A> acc(static_cast<size_t>(inner));
  A* __restrict ap = acc.data();
  for (int64_t o = o0; o < o1; ++o) {
    for (int64_t j = 0; j < inner; ++j) ap[j] = init;
    for (int64_t i = 0; i < n; ++i) {
      const T* xr = x + (o * n + i) * inner;
      T* yr = y + (o * n + i) * inner;
      for (int64_t j = 0; j < inner; ++j) {
        ap[j] = step<Prod>(ap[j], static_cast<A>(xr[j]));
        yr[j] = static_cast<T>(ap[j]);
      }
    }
  }
}

// Below this many elements a scan runs on one thread (a pool wake-up costs more).
constexpr int64_t kParallelScan = 1 << 16;

std::vector<Tensor> run_scan(OpId op, std::span<const Tensor> in, const OpAttrs& any) {
  const auto& a = attrs_as<ScanAttrs>(op, any);
  const char* name = op_name(op);
  if (in.size() != 1 || !in[0].defined())
    throw_error<ValueError>("[", name, "] expected one defined input tensor");
  const DType dt = check_scan(op, in[0].shape(), in[0].dtype(), a, shape_word());
  const Tensor x = in[0].to(dt).contiguous();
  Tensor y = Tensor::empty(x.shape(), dt);
  count_kernel(KernelKind::Other);
  if (y.numel() == 0) return {y};
  const int64_t nd = x.dim();
  const Shape& s = x.shape();
  const int64_t dim = check_one_dim(name, s, a.dim, shape_word());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= s[d];
  for (int64_t d = dim + 1; d < nd; ++d) inner *= s[d];
  const int64_t n = nd == 0 ? 1 : s[dim];
  // rows are independent and each is scanned the same way: the thread count changes no bit
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      auto rows = [&](int64_t o0, int64_t o1) {
        if (op == OpId::cumprod)
          scan_rows<true>(xp, yp, o0, o1, n, inner);
        else
          scan_rows<false>(xp, yp, o0, o1, n, inner);
      };
      if (y.numel() >= kParallelScan && outer > 1)
        parallel_for(outer, rows);
      else
        rows(0, outer);
    }
  });
  return {y};
}

}  // namespace

std::vector<Tensor> cumsum_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return run_scan(OpId::cumsum, in, attrs);
}
std::vector<Tensor> cumprod_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return run_scan(OpId::cumprod, in, attrs);
}

}  // namespace impl

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return call_op1(OpId::cumsum, {x}, ScanAttrs{.dim = dim, .dtype = dtype});
}
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return call_op1(OpId::cumprod, {x}, ScanAttrs{.dim = dim, .dtype = dtype});
}

}  // namespace td
