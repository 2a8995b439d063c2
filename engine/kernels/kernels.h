#pragma once
// The kernel bridges. Eigen is included only in eigen_kernels.cpp (GEMM), xtensor only in
// xtensor_kernels.cpp (element-wise, broadcast, reduction); small_gemm.cpp is our own
// register-blocked GEMM for small float matrices, behind gemm_nt. Inputs are unbatched tensors of
// any strides; outputs are freshly allocated contiguous tensors unless `out` is given.
#include <cstdint>

#include "engine/tensor.h"

namespace td::kernels {

// dst (any strides, dst.shape() == src.shape() after broadcasting src) = src cast to dst's dtype.
void copy_into(const Tensor& src, const Tensor& dst);

// BitNot: bool and int64 only
enum class UnaryKind {
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Tanh,
  Sigmoid,
  Relu,
  Gelu,
  GeluTanh,
  LogicalNot,
  BitNot,
  Sin,
  Cos,
  Log1p,
  Expm1,
  Reciprocal,
  Floor,
  Ceil,
  Round,
  Sign
};
// Result dtype `out_dtype`; computation in the promoted floating type where needed.
Tensor unary(UnaryKind kind, const Tensor& x, DType out_dtype);
// An integral x has integral bounds (a floating one promotes x first): compared exactly.
Tensor clamp(const Tensor& x, Scalar lo, Scalar hi, bool has_lo, bool has_hi);

// Bit*: bool and int64 only
// Remainder: the divisor's sign (Python's %); Fmod: the dividend's (C's fmod). Integer divisors
// are checked for 0 by the op.
enum class BinaryKind {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Maximum,
  Minimum,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  LogicalAnd,
  LogicalOr,
  BitAnd,
  BitOr,
  BitXor,
  Remainder,
  Fmod
};
// Comparisons and logical ops: their result is bool.
bool is_predicate(BinaryKind kind);
// Broadcasting; both inputs are first cast to compute_dtype, the result has out_dtype.
Tensor binary(BinaryKind kind, const Tensor& a, const Tensor& b, DType compute_dtype,
              DType out_dtype);
// out op= b in place (b broadcast to out's shape).
void binary_inplace(BinaryKind kind, const Tensor& out, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, DType out_dtype);

enum class ReduceKind { Sum, Mean, Var, Std, Amax, Amin, Argmax, Argmin };
// dims normalised, non-empty, unique. `unbiased` for Var/Std.
Tensor reduce(ReduceKind kind, const Tensor& x, const IntList& dims, bool keepdim,
              bool unbiased);
Tensor softmax(const Tensor& x, int64_t dim, bool log);
// p[0] + ... + p[n - 1], and the sum of (p[i] - m)^2, in double and in the one order every
// floating reduction takes: a row's result depends on its values alone, not on where it lies
// (so chunked, looped and unchunked vmapped calls agree bit for bit).
double row_sum(const float* p, int64_t n);
double row_sum(const double* p, int64_t n);
double row_sum_squares(const float* p, int64_t n, double m);
double row_sum_squares(const double* p, int64_t n, double m);

// dst[r * dst_rows + k] = src[r * src_rows + step * k] for k in [0, n), r in [0, rows), step 1
// or 2, reading no element past each row's src[step * (n - 1)]: im2col's rows, all of a tap's
// rows in one call (they are short: a call and a scalar tail per row cost more than the copy).
void copy_rows(const float* src, int64_t src_rows, int step, float* dst, int64_t dst_rows,
               int64_t n, int64_t rows);
void copy_rows(const double* src, int64_t src_rows, int step, double* dst, int64_t dst_rows,
               int64_t n, int64_t rows);

// C[b] = A[b] @ B[b] for 3-D A [Bt, M, K] and B [Bt, K, N] (any strides; Bt may be 1 on either
// side to broadcast). Counts one Gemm kernel.
Tensor bmm(const Tensor& a, const Tensor& b);
// The thread count of the BLAS behind Eigen (OpenBLAS), if any: always 1 (set once at start-up;
// td's threads share the blocks of its products instead).
void set_blas_threads(int threads);

// y[b] = x[b] @ w[b]^T + bias[b], then max(., 0) if relu, for x [Bx, N, K], w [Bw, M, K] and
// bias [Bb, M] or undefined (any strides), where each leading size is the batch B or 1 (shared).
// Result [B, N, M]. Small float matrices run the register-blocked kernel of small_gemm.cpp, the
// rest Eigen (OpenBLAS); either way bias and ReLU are applied while the output is in cache.
// Counts one Gemm kernel.
Tensor gemm_nt(const Tensor& x, const Tensor& w, const Tensor& bias, bool relu = false);

}  // namespace td::kernels
