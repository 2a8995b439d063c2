#pragma once
// Explicit forms of xsimd 8.1 operations that its AVX-512 code leaves to the compiler, and an
// 8x8 transpose in registers.
#include <cstdint>
#include <type_traits>
#include <xsimd/xsimd.hpp>

#if defined(__AVX2__) || defined(__AVX512F__)
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

// relu's max(v, 0) as the fused kernels store it: a NaN v is kept and so is -0, as torch's
// clamp_min (maxps returns its second operand when either is NaN or both are zero).
template <class T, class A>
xsimd::batch<T, A> relu_keep_nan(xsimd::batch<T, A> v) {
  return xsimd::max(xsimd::batch<T, A>(T(0)), v);
}

#ifdef __AVX2__
// In the including kernel file's level (TD_ISA): one name per level, so that no level's copy is
// linked in for another's.
namespace TD_ISA {
// dst[c * ld + i] = src[i * rs + c] for i, c < 8: a block of rows transposed in registers (packing
// a GEMM's panel from rows contiguous in k; a scalar transpose cost as much as a small product).
inline void transpose8x8(const float* src, int64_t rs, float* dst, int64_t ld) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * rs);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4)
    for (int h = 0; h < 2; ++h) {
      r[i + h] = _mm256_shuffle_ps(t[i + h], t[i + h + 2], _MM_SHUFFLE(1, 0, 1, 0));
      r[i + h + 2] = _mm256_shuffle_ps(t[i + h], t[i + h + 2], _MM_SHUFFLE(3, 2, 3, 2));
    }
  // r[0], r[2], r[1], r[3] hold columns (0,4), (1,5), (2,6), (3,7) of rows 0-3; r[4..7] the same
  // for rows 4-7
  const int order[4] = {0, 2, 1, 3};
  for (int c = 0; c < 4; ++c) {
    const __m256 lo = r[order[c]], hi = r[4 + order[c]];
    _mm256_storeu_ps(dst + c * ld, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(dst + (c + 4) * ld, _mm256_permute2f128_ps(lo, hi, 0x31));
  }
}
}  // namespace TD_ISA
#endif

}  // namespace td::kernels
