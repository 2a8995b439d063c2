#pragma once
// small_gemm.cpp's register-blocked product for the other kernel files (gemm.cpp's bmm).
#include <cstdint>

namespace td::kernels::TD_ISA {

// c = a @ b for float a [m, k] and b [k, n] with any element strides (a(i, p) at
// a + i * ars + p * acs, b(p, j) at b + p * brs + j * bcs), c [m, n] row-major with row stride
// crs. Every c(i, j) is one chain of fused multiply-adds over p in order from zero, so its bits
// depend on row i of a and column j of b alone: not on m, n, the strides or the tiles, so a
// matmul's batch folded into m and one set alone give the same bits.
void small_gemm_chain(const float* a, int64_t ars, int64_t acs, const float* b, int64_t brs,
                      int64_t bcs, float* c, int64_t crs, int64_t m, int64_t n, int64_t k);

// Whether small_gemm_chain runs a product with b [k, n] (b must stay in L2 while a's rows pass).
bool small_gemm_chain_pays(int64_t n, int64_t k);

}  // namespace td::kernels::TD_ISA
