// Softmax and log-softmax along one dim of a strided floating tensor, a row at a time.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>
#include <xsimd/xsimd.hpp>

#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include "engine/dispatch.h"
#include "engine/kernels/exp_log.h"
#include "engine/kernels/kernels.h"
#include "engine/kernels/ordered_sum.h"
#include "engine/kernels/strided.h"

namespace td::kernels::TD_ISA {
namespace {

// R contiguous rows at once, each as if alone: every element's exp goes through exp_lanes (the
// tail in a padded vector) and the sum runs in double in a fixed order, so a row's bits depend
// on its values alone. Short rows (attention's, 32 keys) are bound by the latency of their max,
// sum and reciprocal; the rows' chains side by side overlap.
template <class T, int R>
void softmax_rows(const T* const* a, T* const* b, int64_t n, bool log) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  constexpr T lowest = -std::numeric_limits<T>::infinity();
  const int64_t full = n / W * W;
  T mx[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    B lanes(lowest);
    for (int64_t i = 0; i < full; i += W) lanes = xsimd::max(lanes, B::load_unaligned(a[r] + i));
    // the lanes' max (a NaN, met or not here, makes the row's sum and so the whole row NaN)
    T m;
#ifdef __AVX512F__
    if constexpr (W == 16)
      m = _mm512_reduce_max_ps(lanes);
    else if constexpr (W == 8)
      m = _mm512_reduce_max_pd(lanes);
    else
#endif
    {
      alignas(64) T lane[W];
      lanes.store_aligned(lane);
      for (int64_t w = W / 2; w >= 1; w /= 2)
        for (int64_t l = 0; l < w; ++l) lane[l] = lane[l + w] > lane[l] ? lane[l + w] : lane[l];
      m = lane[0];
    }
    for (int64_t i = full; i < n; ++i) m = a[r][i] > m ? a[r][i] : m;
    mx[r] = std::isinf(m) && m < 0 ? T(0) : m;  // all -inf: avoid inf - inf
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const B vmx(mx[r]);
    for (int64_t i = 0; i < full; i += W)
      exp_lanes<T>(B::load_unaligned(a[r] + i) - vmx).store_unaligned(b[r] + i);
    if (full < n) {
      alignas(64) T buf[W] = {};
      std::copy(a[r] + full, a[r] + n, buf);
      exp_lanes<T>(B::load_aligned(buf) - vmx).store_aligned(buf);
      std::copy(buf, buf + (n - full), b[r] + full);
    }
  }
  double s[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) s[r] = run_sum(b[r], n, kPlus);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    // vectors by hand: GCC left these loops scalar
    if (log) {
      const T ls = static_cast<T>(std::log(s[r]));
      const B vmx(mx[r]), vls(ls);
      for (int64_t i = 0; i < full; i += W)
        ((B::load_unaligned(a[r] + i) - vmx) - vls).store_unaligned(b[r] + i);
      for (int64_t k = full; k < n; ++k) b[r][k] = a[r][k] - mx[r] - ls;
    } else {
      const T inv = static_cast<T>(1.0 / s[r]);
      const B vinv(inv);
      for (int64_t i = 0; i < full; i += W)
        (B::load_unaligned(b[r] + i) * vinv).store_unaligned(b[r] + i);
      for (int64_t k = full; k < n; ++k) b[r][k] *= inv;
    }
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
  if (xs == 1 && os == 1) {
    // contiguous rows, kGroup at a time
    constexpr int kGroup = 8;
    const T* a[kGroup];
    T* b[kGroup];
    int held = 0;
    nest.run([&](const std::array<int64_t, 2>& o) {
      a[held] = xp + o[0];
      b[held] = op + o[1];
      if (++held == kGroup) {
        softmax_rows<T, kGroup>(a, b, n, log);
        held = 0;
      }
    });
    for (int r = 0; r < held; ++r) softmax_rows<T, 1>(a + r, b + r, n, log);
    return;
  }
  std::vector<T> in_row(xs == 1 ? 0 : n), out_row(os == 1 ? 0 : n);
  nest.run([&](const std::array<int64_t, 2>& o) {
    const T* a = xp + o[0];
    if (xs != 1) {
      for (int64_t i = 0; i < n; ++i) in_row[i] = a[i * xs];
      a = in_row.data();
    }
    T* b = os == 1 ? op + o[1] : out_row.data();
    softmax_rows<T, 1>(&a, &b, n, log);
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
