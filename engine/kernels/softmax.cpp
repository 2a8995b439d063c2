// Softmax and log-softmax along one dim of a strided floating tensor, a row at a time.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>
#include <xsimd/xsimd.hpp>

#include "engine/dispatch.h"
#include "engine/kernels/exp_log.h"
#include "engine/kernels/kernels.h"
#include "engine/kernels/ordered_sum.h"
#include "engine/kernels/strided.h"

namespace td::kernels::TD_ISA {
namespace {

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
