#pragma once
// small_gemm.cpp's register-blocked product for the other kernel files: with b's panels packed
// by the caller (conv.cpp: a convolution's receptive fields, gathered straight from its input),
// and with every output one chain (gemm.cpp's bmm). For the kernel files only (TD_ISA names the
// level they are compiled for).
#include <cstdint>
#include <xsimd/xsimd.hpp>

namespace td::kernels::TD_ISA {

// The width of a panel: output columns per tile, two vectors.
inline constexpr int64_t kPanelCols = 2 * static_cast<int64_t>(xsimd::batch<float>::size);

// Where a panel's rows are: packed in `base` (offs null), or row p's two vectors at
// base + offs[p] and base + offs[p] + second (any alignment; a convolution's panel may span two
// output rows).
struct PanelRows {
  const float* base;
  const int64_t* offs;
  int64_t second = kPanelCols / 2;
};

// The b of c = a @ b, a panel at a time.
class PanelSource {
 public:
  // The panel of b(k0 + p, n0 + j) for p < kc, j < nc: packed into `panel` (aligned to 64
  // bytes: row p at panel + p * kPanelCols, zero for nc <= j < kPanelCols), or found in place.
  virtual PanelRows pack(int64_t n0, int64_t nc, int64_t k0, int64_t kc, float* panel) const = 0;

 protected:
  ~PanelSource() = default;
};

// c = a @ b (+ bias, a value per row of c, or null; then max(c, 0) if relu, NaN kept) for
// a [m, k] and c [m, n] with unit column stride and the given row strides, b [k, n] from src.
void small_gemm_panels(const float* a, int64_t ars, const PanelSource& src, const float* bias,
                       float* c, int64_t crs, int64_t m, int64_t n, int64_t k, bool relu);

// c = a @ b (+ bias, a value per row of c, or null) for a [m, k], b [k, n] and c [m, n], each
// with unit column stride and the given row stride.
void small_gemm_nn(const float* a, int64_t ars, const float* b, int64_t brs, const float* bias,
                   float* c, int64_t crs, int64_t m, int64_t n, int64_t k);

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
