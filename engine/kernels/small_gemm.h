#pragma once
// The register-blocked float32 GEMM for an ensemble's small per-set matrices (see small_gemm.cpp).
#include <cstdint>

namespace td::kernels {

// The operands of the product that follows (the next set's), or null where there is none or it
// is the same: prefetched while this product finishes.
struct SmallGemmNext {
  const float* x = nullptr;
  const float* w = nullptr;
  const float* bias = nullptr;
};

// y = x @ w^T (+ bias) (then max(., 0) if relu), for x [m, k] and w [n, k] with element strides
// (rows, cols), bias [n] with stride bs (or null), y [m, n] row-major with row stride yrs.
void small_gemm_nt(const float* x, int64_t xrs, int64_t xcs, const float* w, int64_t wrs,
                   int64_t wcs, const float* bias, int64_t bs, float* y, int64_t yrs, int64_t m,
                   int64_t n, int64_t k, bool relu, const SmallGemmNext& next = {});

// Whether small_gemm_nt beats the BLAS for one [m, k] x [k, n] product: x must stay in L2
// while every panel of w passes it.
bool small_gemm_pays(int64_t m, int64_t n, int64_t k);

}  // namespace td::kernels
