#pragma once
// xsimd's vector exp and log, with std's for the lanes where xsimd 8.1's are wrong (chosen by
// value, so an element's bits do not depend on where it lies). For the kernel files only (TD_ISA
// names the level they are compiled for).
#include <cmath>
#include <limits>
#include <type_traits>
#include <xsimd/xsimd.hpp>

namespace td::kernels::TD_ISA {
namespace {

// r = vf(v) with the lanes where `bad` holds recomputed by f (chosen by value, so an element's
// bits still do not depend on its position).
template <class T, class B, class Bad, class F>
[[gnu::noinline]] B scalar_lanes(B r, B v, Bad bad, F f) {
  alignas(64) T vs[B::size], rs[B::size];
  v.store_aligned(vs);
  r.store_aligned(rs);
  for (size_t i = 0; i < B::size; ++i)
    if (bad(B(vs[i])).get(0)) rs[i] = f(vs[i]);
  return B::load_aligned(rs);
}
// (the rare lanes out of line, so that the common path inlines into its loop)
template <class T, class B, class Bad, class F>
B with_scalar_lanes(B r, B v, Bad bad, F f) {
  return xsimd::any(bad(v)) ? scalar_lanes<T>(r, v, bad, f) : r;
}

// xsimd 8.1's exp is inf from 88.376 (float) / 709.437 (double) on, where the true value is
// finite up to 88.723 / 709.783, and 0 where it is subnormal; std::exp takes those lanes. Below
// -104 / -746 the true value is under half the least subnormal, so 0: those lanes (a masked
// softmax's -inf) are set directly, not one at a time.
template <class T, class B>
[[gnu::always_inline]] inline B exp_lanes(B v) {
  const B edge(std::is_same_v<T, float> ? T(87) : T(708));
  const B zero_below(std::is_same_v<T, float> ? T(-104) : T(-746));
  const B r = xsimd::select(v < zero_below, B(T(0)), xsimd::exp(v));
  return with_scalar_lanes<T>(
      r, v, [&](B u) { return (xsimd::abs(u) > edge) & (u >= zero_below); },
      [](T u) { return std::exp(u); });
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

}  // namespace
}  // namespace td::kernels::TD_ISA
