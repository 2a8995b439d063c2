#pragma once
// Explicit forms of xsimd 8.1 operations that its AVX-512 code leaves to the compiler.
#include <type_traits>
#include <xsimd/xsimd.hpp>

#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace td::kernels {

// a * b + c rounded once. xsimd 8.1's AVX-512 fma is a * b + c left to the compiler's
// contraction (-ffp-contract=off would split every FMA of the GEMM kernel in two).
template <class T, class A>
xsimd::batch<T, A> fmadd(xsimd::batch<T, A> a, xsimd::batch<T, A> b, xsimd::batch<T, A> c) {
#ifdef __AVX512F__
  if constexpr (std::is_base_of_v<xsimd::avx512f, A> && std::is_same_v<T, float>)
    return _mm512_fmadd_ps(a, b, c);
  if constexpr (std::is_base_of_v<xsimd::avx512f, A> && std::is_same_v<T, double>)
    return _mm512_fmadd_pd(a, b, c);
#endif
  return xsimd::fma(a, b, c);
}

// Correctly rounded sqrt and a / b, as the scalar code's. xsimd 8.1 computes aarch64's float ones
// from NEON's estimates and two Newton steps: an ulp or so off, and sqrt(-0) is +0, not -0.
template <class T, class A>
xsimd::batch<T, A> sqrt_exact(xsimd::batch<T, A> v) {
#ifdef __aarch64__
  if constexpr (std::is_base_of_v<xsimd::neon64, A> && std::is_same_v<T, float>)
    return vsqrtq_f32(v);
#endif
  return xsimd::sqrt(v);
}
template <class T, class A>
xsimd::batch<T, A> div_exact(xsimd::batch<T, A> a, xsimd::batch<T, A> b) {
#ifdef __aarch64__
  if constexpr (std::is_base_of_v<xsimd::neon64, A> && std::is_same_v<T, float>)
    return vdivq_f32(a, b);
#endif
  return a / b;
}

}  // namespace td::kernels
