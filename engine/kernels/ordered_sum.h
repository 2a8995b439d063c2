#pragma once
// The one order of every floating sum of the kernels (reductions, softmax, row sums), in double.
// For the kernel files only (TD_ISA names the level they are compiled for).
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <xsimd/xsimd.hpp>

#include "engine/kernels/simd.h"

namespace td::kernels::TD_ISA {
namespace {

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

}  // namespace
}  // namespace td::kernels::TD_ISA
