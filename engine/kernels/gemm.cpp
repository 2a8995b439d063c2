// The GEMM bridge: the only file that includes Eigen. Operands are mapped in place with their
// strides (a unit inner stride in either direction maps as a plain row- or column-major matrix,
// so Eigen's packed GEMM, or OpenBLAS behind it with EIGEN_USE_BLAS, reads them directly);
// results are fresh contiguous row-major tensors.
#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <type_traits>
#include <utility>
#include <xsimd/xsimd.hpp>

#include "engine/dispatch.h"
#include "engine/kernels/kernels.h"
#include "engine/kernels/simd.h"
#include "engine/kernels/small_gemm.h"
#include "engine/parallel.h"

#ifdef TD_WITH_OPENBLAS
// OpenBLAS runs on one thread; td's threads share the blocks of its products (blas_cut).
extern "C" void openblas_set_num_threads(int);
#endif

namespace td::kernels::TD_ISA {
namespace {

using Eigen::Dynamic;
template <class T>
using RowMat = Eigen::Matrix<T, Dynamic, Dynamic, Eigen::RowMajor>;
template <class T>
using ColMat = Eigen::Matrix<T, Dynamic, Dynamic, Eigen::ColMajor>;
template <class T>
using RowMap = Eigen::Map<const RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using ColMap = Eigen::Map<const ColMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using StridedMap = Eigen::Map<const RowMat<T>, Eigen::Unaligned, Eigen::Stride<Dynamic, Dynamic>>;
template <class T>
using OutMap = Eigen::Map<RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

// A strided 2-D operand: rows x cols with element strides rs (between rows) and cs.
template <class T>
struct Operand {
  const T* p;
  int64_t rows, cols, rs, cs;
};

enum class Layout { Row, Col, Strided };

// Strides of size-1 dims are arbitrary; normalise them so a unit inner stride is recognised.
template <class T>
Layout layout_of(Operand<T>& o) {
  if ((o.cs == 1 || o.cols <= 1) && (o.rows <= 1 || o.rs >= o.cols)) {
    o.cs = 1;
    if (o.rows <= 1) o.rs = std::max<int64_t>(o.cols, 1);
    return Layout::Row;
  }
  if ((o.rs == 1 || o.rows <= 1) && (o.cols <= 1 || o.cs >= o.rows)) {
    o.rs = 1;
    if (o.cols <= 1) o.cs = std::max<int64_t>(o.rows, 1);
    return Layout::Col;
  }
  return Layout::Strided;
}

// Calls f(map) with the operand mapped as an Eigen matrix expression.
template <class T, class F>
void with_map(Operand<T> o, F&& f) {
  switch (layout_of(o)) {
    case Layout::Row:
      f(RowMap<T>(o.p, o.rows, o.cols, Eigen::OuterStride<>(o.rs)));
      return;
    case Layout::Col:
      f(ColMap<T>(o.p, o.rows, o.cols, Eigen::OuterStride<>(o.cs)));
      return;
    case Layout::Strided:
      if ((o.rs == 0 && o.rows > 1) || (o.cs == 0 && o.cols > 1)) {
        // An expanded dim (stride 0): a one-row or one-column operand would go to BLAS's gemv
        // as a vector with increment 0, which it refuses (printing an error, leaving y
        // unwritten), so it is packed first.
        const RowMat<T> dense =
            StridedMap<T>(o.p, o.rows, o.cols, Eigen::Stride<Dynamic, Dynamic>(o.rs, o.cs));
        f(dense);
        return;
      }
      // Non-unit strides on both sides (e.g. a slice with a step): Eigen evaluates the map into
      // packed panels itself.
      f(StridedMap<T>(o.p, o.rows, o.cols, Eigen::Stride<Dynamic, Dynamic>(o.rs, o.cs)));
      return;
  }
}

// y = a @ b, or y += a @ b if add. Eigen computes a product with rows + cols + depth below
// EIGEN_GEMM_TO_COEFFBASED_THRESHOLD coefficient by coefficient, and on AVX-512 it takes some
// of them by a scalar dot product, which ones depending on where y's rows fall against 64-byte
// lines: a set's bits changed with its place in a chunk (MultiheadAttention's scores, float64
// Linear). Its path also depends on the operands' layouts, which differ between a set alone (a
// transposed view) and a batch (matmul's reshape copies it). Such a product is computed from
// row-major copies of a and b into an aligned buffer, then stored.
template <class T, class A, class B>
void product_into(OutMap<T>& y, const A& a, const B& b, bool add) {
  constexpr int64_t kCoeffBased = EIGEN_GEMM_TO_COEFFBASED_THRESHOLD;
  if (y.rows() + y.cols() + a.cols() < kCoeffBased) {
    alignas(64) T buf[kCoeffBased * kCoeffBased], abuf[kCoeffBased * kCoeffBased],
        bbuf[kCoeffBased * kCoeffBased];
    Eigen::Map<RowMat<T>, Eigen::Aligned64> t(buf, y.rows(), y.cols()),
        ra(abuf, a.rows(), a.cols()), rb(bbuf, b.rows(), b.cols());
    ra = a;
    rb = b;
    t.noalias() = ra * rb;
    if (add)
      y += t;
    else
      y = t;
  } else if (add) {
    y.noalias() += a * b;
  } else {
    y.noalias() = a * b;
  }
}

// One block of a product's output: rows [r0, r1), columns [c0, c1).
struct Block {
  int64_t r0, r1, c0, c1;
};

// How a product that goes to the BLAS is cut into blocks of its [m, n] output, computed one per
// task on one BLAS thread: by its shape only. OpenBLAS's last bits depend on the shape it is
// given (its AVX2 kernels round a product's columns differently when it is cut into two halves,
// or when its own threads cut it), so a shape-only cut keeps a set's result the same on any
// number of threads, with any chunk_size, in concurrent blocks of sets, and in a loop over the
// sets. Cut along the longer side, so each block repacks only the smaller operand; blocks of
// kBlasStep (the last one takes the rest) give a few tasks per thread.
// Our kernel's products are cut only when there are fewer of them than threads, and only into
// column blocks at least kMinCutSide wide and a multiple of it (the last one takes the rest), in
// which every output is computed exactly as in the whole product (same tile path, same row
// tiles, same k order, lanes independent): so the bits do not depend on the cut, and it may
// depend on the thread count.
struct Cut {
  int64_t parts = 1, step = 0;
  bool rows = false;
};

constexpr double kMinCutFlops = 8e6;  // below this a product is not worth a second thread
constexpr int64_t kMinCutSide = 64;   // the narrowest block OpenBLAS or our kernel runs at speed
constexpr int64_t kBlasStep = 256;

Cut blas_cut(int64_t m, int64_t n, int64_t k) {
  const bool rows = m > n;
  const int64_t side = rows ? m : n;
  if (2.0 * static_cast<double>(m) * n * k < kMinCutFlops || side < 2 * kBlasStep) return {};
  return {side / kBlasStep, kBlasStep, rows};
}

Cut kernel_cut(int64_t bt, int64_t m, int64_t n, int64_t k) {
  const int64_t threads = num_threads();
  if (threads == 1 || bt >= threads || 2.0 * static_cast<double>(m) * n * k < kMinCutFlops)
    return {};
  const int64_t parts = std::min<int64_t>(threads, n / kMinCutSide);
  if (parts <= 1) return {};
  return {parts, n / parts / kMinCutSide * kMinCutSide, false};
}

// Runs task(i, block) over the bt products of [m, k] x [k, n] matrices, each whole or in the
// blocks of blas_cut (the BLAS) or kernel_cut (ours). Threads share the tasks once each thread
// gets real work (waking a sleeping pool worker costs microseconds), claimed a few at a time: a
// thread the host slows down takes fewer instead of holding the others at the end of the op.
// Bias and ReLU are applied per block, in parallel as well.
template <class F>
void for_each_block(int64_t bt, int64_t m, int64_t n, int64_t k, bool blas, F&& task) {
  const Cut cut = blas ? blas_cut(m, n, k) : kernel_cut(bt, m, n, k);
  const int64_t tasks = bt * cut.parts;
  auto range = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      Block b{0, m, 0, n};
      if (cut.parts > 1) {
        int64_t& lo = cut.rows ? b.r0 : b.c0;
        int64_t& hi = cut.rows ? b.r1 : b.c1;
        const int64_t part = t % cut.parts;
        lo = part * cut.step;
        if (part + 1 < cut.parts) hi = lo + cut.step;
      }
      task(t / cut.parts, b);
    }
  };
  const int64_t threads = num_threads();
  if (threads > 1 && tasks > 1 && 2.0 * static_cast<double>(m) * n * k * bt > 4e6)
    parallel_claim(tasks, std::max<int64_t>(1, tasks / (8 * threads)), range);
  else
    range(0, tasks);
}

// Whether a float32 product y [rows, cols] = x [rows, k] @ w^T goes to the BLAS (else to our
// register-blocked kernel); rows_in_k: x's and w's rows are contiguous in k.
template <class T>
bool goes_to_blas(int64_t rows, int64_t cols, int64_t k, bool rows_in_k) {
  if constexpr (std::is_same_v<T, float>)
    return !small_gemm_pays(rows, cols, k, rows_in_k);
  else
    return true;
}

// Narrow products (attention's q @ k^T and weights @ v per head, b [k, n] of at most kNarrowVecs
// vectors of columns): b is staged once per product in L1 as rows of whole vectors (transposed
// there when its rows are strided, read in place when its columns are contiguous and fill whole
// vectors), then R rows of c at a time cover all its columns. small_gemm_chain pads b to
// two-vector panels (half of weights @ v's FMAs wasted) and packs per panel. Every c(i, j) is the
// chain small_gemm_chain computes, fused multiply-adds over p in order from +0, so the two give
// the same bits.
using V = xsimd::batch<float>;
constexpr int64_t kW = static_cast<int64_t>(V::size);
constexpr int kNarrowVecs = 4;
constexpr int64_t kNarrowBuf = 8192;  // floats of staged b: 32 KiB
constexpr int kNarrowRows = 8;

bool narrow_pays(int64_t n, int64_t k) {
  const int64_t vecs = (n + kW - 1) / kW;
  return vecs <= kNarrowVecs && k * vecs * kW <= kNarrowBuf;
}

template <int R, int NV>
void narrow_tile(const float* a, int64_t ars, int64_t acs, const float* b, int64_t ld, int64_t k,
                 float* c, int64_t crs, int64_t n) {
  V acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = V(0.0f);
  for (int64_t p = 0; p < k; ++p) {
    V bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = V::load_unaligned(b + p * ld + v * kW);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V av(a[r * ars + p * acs]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = fmadd(av, bv[v], acc[r][v]);
    }
  }
  const int64_t tail = n - (NV - 1) * kW;  // columns in the last vector, 1..kW
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v + 1 < NV; ++v) acc[r][v].store_unaligned(c + r * crs + v * kW);
    if (tail == kW) {
      acc[r][NV - 1].store_unaligned(c + r * crs + (NV - 1) * kW);
    } else {
      alignas(64) float tmp[kW];
      acc[r][NV - 1].store_aligned(tmp);
      std::copy(tmp, tmp + tail, c + r * crs + (NV - 1) * kW);
    }
  }
}

using NarrowTile = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*,
                            int64_t, int64_t);

template <int NV, int... R>
constexpr std::array<NarrowTile, sizeof...(R)> narrow_row_tiles(std::integer_sequence<int, R...>) {
  return {narrow_tile<R + 1, NV>...};
}

// kNarrowTiles[NV - 1][R - 1]: R rows by NV vectors
constexpr std::array<std::array<NarrowTile, kNarrowRows>, kNarrowVecs> kNarrowTiles = {
    narrow_row_tiles<1>(std::make_integer_sequence<int, kNarrowRows>()),
    narrow_row_tiles<2>(std::make_integer_sequence<int, kNarrowRows>()),
    narrow_row_tiles<3>(std::make_integer_sequence<int, kNarrowRows>()),
    narrow_row_tiles<4>(std::make_integer_sequence<int, kNarrowRows>())};

// Rows per tile by vectors of columns: the accumulators, b's vectors and a broadcast in
// registers (32 on AVX-512, 16 below), and at least 8 chains where they fit to hide the FMA
// latency (more rows per tile measured slower)
constexpr int narrow_rows(int vecs) {
  constexpr int kWide[kNarrowVecs] = {8, 8, 8, 6}, kNarrow[kNarrowVecs] = {8, 6, 4, 3};
  return (kW == 16 ? kWide : kNarrow)[vecs - 1];
}

// dst[p * ld + j] = src[j * rs + p] for j < n, p < k: 8x8 blocks transposed in registers (a
// scalar transpose cost as much as q @ k^T's products)
void transpose_rows(const float* src, int64_t rs, int64_t n, int64_t k, float* dst, int64_t ld) {
  int64_t p0 = 0;
#ifdef __AVX2__
  const int64_t full = k / 8 * 8;
  int64_t j0 = 0;
  for (; j0 + 8 <= n; j0 += 8)
    for (int64_t p = 0; p < full; p += 8)
      transpose8x8(src + j0 * rs + p, rs, dst + p * ld + j0, ld);
  p0 = full;
  for (int64_t j = j0; j < n; ++j)  // rows past the last block of 8, at the depths done above
    for (int64_t p = 0; p < p0; ++p) dst[p * ld + j] = src[j * rs + p];
#endif
  for (int64_t j = 0; j < n; ++j)
    for (int64_t p = p0; p < k; ++p) dst[p * ld + j] = src[j * rs + p];
}

// c = a @ b as small_gemm_chain, for narrow_pays(n, k)
void narrow_gemm(const float* a, int64_t ars, int64_t acs, const float* b, int64_t brs, int64_t bcs,
                 float* c, int64_t crs, int64_t m, int64_t n, int64_t k) {
  const int vecs = static_cast<int>((n + kW - 1) / kW);
  const int64_t ld = vecs * kW;
  alignas(64) float buf[kNarrowBuf];
  const float* rows = b;
  int64_t rs = brs;
  if (bcs != 1 || n % kW != 0) {
    if (brs == 1) {  // b^T's rows are contiguous (k of q @ k^T)
      transpose_rows(b, bcs, n, k, buf, ld);
    } else {
      for (int64_t p = 0; p < k; ++p)
        for (int64_t j = 0; j < n; ++j) buf[p * ld + j] = b[p * brs + j * bcs];
    }
    for (int64_t p = 0; p < k; ++p) std::fill(buf + p * ld + n, buf + (p + 1) * ld, 0.0f);
    rows = buf;
    rs = ld;
  }
  const int full = narrow_rows(vecs);
  for (int64_t i = 0; i < m; i += full) {
    const int r = static_cast<int>(std::min<int64_t>(full, m - i));
    kNarrowTiles[vecs - 1][r - 1](a + i * ars, ars, acs, rows, rs, k, c + i * crs, crs, n);
  }
}

template <class T>
void bmm_typed(const Tensor& a, const Tensor& b, const Tensor& out) {
  // one batch dim [Bt, ., .] or two [B1, B2, ., .] (entry i is (i / B2, i % B2)); a size 1
  // broadcasts
  const int64_t nb = out.dim() - 2, b2 = nb == 2 ? out.size(1) : 1;
  const int64_t m = out.size(nb), n = out.size(nb + 1), k = a.size(nb + 1);
  const int64_t bt = out.size(0) * b2;
  T* po = out.data<T>();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  auto batch_stride = [&](const Tensor& t, int64_t d) {
    return d < nb && t.size(d) > 1 ? t.stride(d) : 0;
  };
  const int64_t sa = batch_stride(a, 0), sa2 = batch_stride(a, 1);
  const int64_t sb = batch_stride(b, 0), sb2 = batch_stride(b, 1);
  auto at_a = [&](int64_t i) { return pa + i / b2 * sa + i % b2 * sa2; };
  auto at_b = [&](int64_t i) { return pb + i / b2 * sb + i % b2 * sb2; };
  const int64_t a1 = a.stride(nb), a2 = a.stride(nb + 1), b1 = b.stride(nb), b2s = b.stride(nb + 1);
  if constexpr (std::is_same_v<T, float>) {
    // Our kernel, by b's size alone: each output's bits then do not depend on m, which differs
    // between a set alone and a batch folded into it (matmul against a shared matrix). Many
    // tiny products (attention's q @ k^T per head) cost a BLAS call and a zero fill each.
    if (small_gemm_chain_pays(n, k)) {
      const bool narrow = narrow_pays(n, k);
      for_each_block(bt, m, n, k, false, [&](int64_t i, Block blk) {
        if (narrow) {
          narrow_gemm(at_a(i) + blk.r0 * a1, a1, a2, at_b(i) + blk.c0 * b2s, b1, b2s,
                      po + i * m * n + blk.r0 * n + blk.c0, n, blk.r1 - blk.r0, blk.c1 - blk.c0, k);
          return;
        }
        small_gemm_chain(at_a(i) + blk.r0 * a1, a1, a2, at_b(i) + blk.c0 * b2s, b1, b2s,
                         po + i * m * n + blk.r0 * n + blk.c0, n, blk.r1 - blk.r0, blk.c1 - blk.c0,
                         k);
      });
      return;
    }
  }
  for_each_block(bt, m, n, k, true, [&](int64_t i, Block blk) {
    OutMap<T> y(po + i * m * n + blk.r0 * n + blk.c0, blk.r1 - blk.r0, blk.c1 - blk.c0,
                Eigen::OuterStride<>(n));
    if (k == 0) {
      y.setZero();
      return;
    }
    Operand<T> oa{at_a(i) + blk.r0 * a1, blk.r1 - blk.r0, k, a1, a2};
    Operand<T> ob{at_b(i) + blk.c0 * b2s, k, blk.c1 - blk.c0, b1, b2s};
    with_map(oa, [&](const auto& ma) {
      with_map(ob, [&](const auto& mb) { product_into<T>(y, ma, mb, false); });
    });
  });
}

// One product, or one block of it, y = act(x @ w^T + bias), y [n, m] row-major with row stride
// ys: Eigen (OpenBLAS) into a bias-initialised y, else the register-blocked kernel.
template <class T>
void gemm_nt_one(Operand<T> x, Operand<T> w, const T* bias, int64_t bs, T* po, int64_t ys,
                 bool relu, bool blas, const SmallGemmNext& next) {
  const int64_t n = x.rows, k = x.cols, m = w.rows;
  if (!blas) {
    if constexpr (std::is_same_v<T, float>)
      small_gemm_nt(x.p, x.rs, x.cs, w.p, w.rs, w.cs, bias, bs, po, ys, n, m, k, relu, next);
    return;
  }
  OutMap<T> y(po, n, m, Eigen::OuterStride<>(ys));
  if (bias) {
    Eigen::Map<const Eigen::Matrix<T, 1, Dynamic>, Eigen::Unaligned, Eigen::InnerStride<>> bv(
        bias, 1, m, Eigen::InnerStride<>(bs));
    y.rowwise() = bv;
  } else {
    y.setZero();
  }
  if (k > 0) {
    // w^T is [K, M] with strides swapped: no transpose copy.
    Operand<T> wt{w.p, k, m, w.cs, w.rs};
    with_map(x, [&](const auto& mx) {
      with_map(wt, [&](const auto& mwt) { product_into<T>(y, mx, mwt, true); });
    });
  }
  if (relu) {
    // v < 0 ? 0 : v keeps a NaN, as relu does (Eigen's cwiseMax turns it into 0)
    for (int64_t r = 0; r < n; ++r)
      for (T* p = po + r * ys; p < po + r * ys + m; ++p) *p = *p < T(0) ? T(0) : *p;
  }
}

template <class T>
void gemm_nt_typed(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
                   bool relu) {
  const int64_t bt = out.size(0), n = out.size(1), m = out.size(2), k = x.size(2);
  const int64_t sx = x.size(0) == 1 ? 0 : x.stride(0);
  const int64_t sw = w.size(0) == 1 ? 0 : w.stride(0);
  const int64_t sb = !bias.defined() || bias.size(0) == 1 ? 0 : bias.stride(0);
  const int64_t bs = bias.defined() && m > 1 ? bias.stride(1) : 1;
  const T* pb = bias.defined() ? bias.data<T>() : nullptr;
  const T *px = x.data<T>(), *pw = w.data<T>();
  T* po = out.data<T>();
  const int64_t xrs = x.stride(1), xcs = x.stride(2), wrs = w.stride(1), wcs = w.stride(2);
  const bool blas = goes_to_blas<T>(n, m, k, xcs == 1 && wcs == 1);
  for_each_block(bt, n, m, k, blas, [&](int64_t i, Block b) {
    // the next set's operands, for the kernel to prefetch
    SmallGemmNext next;
    if constexpr (std::is_same_v<T, float>)
      if (i + 1 < bt) {
        if (sx) next.x = px + (i + 1) * sx;
        if (sw) next.w = pw + (i + 1) * sw;
        if (sb && pb) next.bias = pb + (i + 1) * sb;
      }
    gemm_nt_one<T>({px + i * sx + b.r0 * xrs, b.r1 - b.r0, k, xrs, xcs},
                   {pw + i * sw + b.c0 * wrs, b.c1 - b.c0, k, wrs, wcs},
                   pb ? pb + i * sb + b.c0 * bs : nullptr, bs, po + i * n * m + b.r0 * m + b.c0, m,
                   relu, blas, next);
  });
}

// Integer matmul (no BLAS for it): a plain strided loop, accumulating unsigned so that it wraps
// as torch's does (signed overflow is undefined behaviour).
void bmm_int(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t bt = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  int64_t* po = out.data<int64_t>();
  const int64_t* pa = a.data<int64_t>();
  const int64_t* pb = b.data<int64_t>();
  const int64_t sa = a.size(0) == 1 ? 0 : a.stride(0);
  const int64_t sb = b.size(0) == 1 ? 0 : b.stride(0);
  for (int64_t i = 0; i < bt; ++i)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        uint64_t acc = 0;
        for (int64_t j = 0; j < k; ++j)
          acc += static_cast<uint64_t>(pa[i * sa + r * a.stride(1) + j * a.stride(2)]) *
                 static_cast<uint64_t>(pb[i * sb + j * b.stride(1) + c * b.stride(2)]);
        po[(i * m + r) * n + c] = static_cast<int64_t>(acc);
      }
}

void check_gemm_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() == DType::Bool) throw_bool_not_implemented(op, {a.shape(), b.shape()});
}

}  // namespace

void set_blas_threads(int threads) {
#ifdef TD_WITH_OPENBLAS
  openblas_set_num_threads(threads);
#else
  (void)threads;
#endif
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  // 4-D operands (two batch dims that do not merge into one without a copy) are matmul's, float
  if ((a.dim() != 3 && a.dim() != 4) || b.dim() != a.dim() ||
      (a.dim() == 4 && a.dtype() != DType::Float32 && a.dtype() != DType::Float64))
    throw_error<ValueError>("[bmm] expects 3-D operands (or float 4-D ones), got ", a.shape(),
                            " and ", b.shape());
  if (a.dtype() != b.dtype())
    throw_error<TypeError>("[bmm] dtype mismatch: ", a.dtype(), " and ", b.dtype());
  check_gemm_dtype("bmm", a, b);
  const int64_t nb = a.dim() - 2;
  Shape shape(a.shape().begin(), a.shape().begin() + nb);
  bool ok = a.size(nb + 1) == b.size(nb);
  for (int64_t d = 0; d < nb; ++d) {
    const int64_t x = a.size(d), y = b.size(d);
    ok = ok && (x == y || x == 1 || y == 1);
    shape[d] = x == 1 ? y : x;
  }
  if (!ok)
    throw_error<ValueError>("[bmm] shapes ", a.shape(), " and ", b.shape(),
                            " cannot be multiplied");
  shape.push_back(a.size(nb));
  shape.push_back(b.size(nb + 1));
  Tensor out = Tensor::empty(shape, a.dtype());
  count_kernel(KernelKind::Gemm);
  count_multiply_adds(out.numel() * a.size(nb + 1));
  if (out.numel() == 0) return out;
  switch (a.dtype()) {
    case DType::Float32:
      bmm_typed<float>(a, b, out);
      break;
    case DType::Float64:
      bmm_typed<double>(a, b, out);
      break;
    default:
      bmm_int(a, b, out);
      break;
  }
  return out;
}

Tensor gemm_nt(const Tensor& x, const Tensor& w, const Tensor& bias, bool relu) {
  const bool ok = x.dim() == 3 && w.dim() == 3 && x.size(2) == w.size(2) &&
                  (x.size(0) == w.size(0) || x.size(0) == 1 || w.size(0) == 1);
  if (!ok)
    throw_error<ValueError>("[gemm_nt] shapes ", x.shape(), " and ", w.shape(),
                            " do not give x @ w^T");
  const int64_t bt = x.size(0) == 1 ? w.size(0) : x.size(0);
  if (bias.defined() &&
      (bias.dim() != 2 || bias.size(1) != w.size(1) || (bias.size(0) != bt && bias.size(0) != 1)))
    throw_error<ValueError>("[gemm_nt] bias of shape ", bias.shape(), " for weight ", w.shape());
  if (x.dtype() != w.dtype() || (bias.defined() && bias.dtype() != x.dtype()))
    throw_error<TypeError>("[gemm_nt] dtype mismatch: ", x.dtype(), " and ", w.dtype());
  check_gemm_dtype("gemm_nt", x, w);
  Tensor out = Tensor::empty({bt, x.size(1), w.size(1)}, x.dtype());
  count_kernel(KernelKind::Gemm);
  count_multiply_adds(out.numel() * x.size(2));
  if (out.numel() == 0) return out;
  switch (x.dtype()) {
    case DType::Float32:
      gemm_nt_typed<float>(x, w, bias, out, relu);
      break;
    case DType::Float64:
      gemm_nt_typed<double>(x, w, bias, out, relu);
      break;
    default: {
      bmm_int(x, w.transpose(1, 2), out);
      int64_t* po = out.data<int64_t>();
      const int64_t* pb = bias.defined() ? bias.data<int64_t>() : nullptr;
      const int64_t rows = x.size(1), cols = w.size(1);
      const int64_t sb = pb && bias.size(0) > 1 ? bias.stride(0) : 0;
      const int64_t bs = pb ? bias.stride(1) : 0;
      for (int64_t i = 0; i < bt; ++i)
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) {
            int64_t& v = po[(i * rows + r) * cols + c];
            if (pb) v = static_cast<int64_t>(static_cast<uint64_t>(v) + pb[i * sb + c * bs]);
            if (relu) v = std::max<int64_t>(v, 0);
          }
    }
  }
  return out;
}

}  // namespace td::kernels::TD_ISA
