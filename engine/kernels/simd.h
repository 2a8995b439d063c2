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

}  // namespace td::kernels
