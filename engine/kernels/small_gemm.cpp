// Register-blocked float32 GEMM for the small matrices of an ensemble (tens to hundreds of rows
// and columns, one product per set). OpenBLAS spends a quarter of such a call packing and in
// per-call setup; here one NR-column panel of w^T is packed at a time (it stays in L1) while MR
// rows of x stream past it from L2, and bias and ReLU are applied as each tile is stored.

#include <xsimd/xsimd.hpp>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <utility>

#include "engine/kernels/kernels.h"
#include "engine/kernels/simd.h"
#include "engine/kernels/small_gemm.h"

namespace td::kernels::TD_ISA {
namespace {

using V = xsimd::batch<float>;
constexpr int64_t W = static_cast<int64_t>(V::size);
constexpr int64_t NR = kPanelCols;  // panel width: two vectors
constexpr int64_t MR = 6;           // tile rows: 12 accumulators, 2 panel vectors, 1 broadcast
constexpr int64_t KC = 2048 / W;    // panel depth: KC x NR floats = 16 KiB, half of L1

// The operands of one product c = a @ b^T: a [rows, k] is read a scalar at a time (any
// strides), b [cols, k] is packed NR columns at a time (or src packs them, b null); c(i, j) is
// at c + i * crs + j * ccs.
// The bias is per column (col_bias) or per row (row_bias), with stride bs.
struct Product {
  const float* a;
  int64_t ars, acs;
  const float* b;
  int64_t brs, bcs;
  const float* col_bias;
  const float* row_bias;
  int64_t bs;
  float* c;
  int64_t crs, ccs;
  int64_t rows, cols, k;
  bool relu;
  const float* next_b;     // b and bias of the product that comes next (same shapes), or null:
  const float* next_bias;  // their first lines are fetched while this one's last panel runs
  bool one_chain = false;  // every output one FMA chain in k order (small_gemm_chain)
  const PanelSource* src = nullptr;
};

// One R x nc tile (R <= MR + 2, nc <= NR) over kc steps of the packed panel. first: start from the
// bias (a packed column row and/or a scalar per row); otherwise continue from what c holds.
// Row p of a panel: packed (aligned, NR floats apart) or, gathered (G), at panel + offs[p].
template <bool G>
inline V panel_load(const float* panel, const int64_t* offs, int64_t p, int64_t j) {
  if constexpr (G) return V::load_unaligned(panel + offs[p] + j);
  return V::load_aligned(panel + p * NR + j);
}

template <int R, bool G>
void tile(const float* a, int64_t ars, int64_t acs, const float* panel, const int64_t* offs,
          int64_t second, int64_t kc, const float* col_init, const float* row_init, bool first,
          bool relu, bool one_chain, float* c, int64_t crs, int64_t ccs, int64_t nc) {
  // Every loop over the R rows is unrolled, so the accumulators stay in registers from the
  // start to the store (a loop with branches inside kept them on the stack: a tenth of a tile
  // at depth 64).
  V acc[R][2];
  alignas(64) float tmp[R][NR];
  const int64_t hi = G ? second : W;  // where a row's second vector starts
  const bool dense = ccs == 1 && nc == NR;
  if (first) {
    const V b0 = col_init ? V::load_aligned(col_init) : V(0.0f);
    const V b1 = col_init ? V::load_aligned(col_init + W) : V(0.0f);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V rb(row_init ? row_init[r] : 0.0f);
      acc[r][0] = b0 + rb;
      acc[r][1] = b1 + rb;
    }
  } else if (dense) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc[r][0] = V::load_unaligned(c + r * crs);
      acc[r][1] = V::load_unaligned(c + r * crs + W);
    }
  } else {
    for (int r = 0; r < R; ++r)
      for (int64_t j = 0; j < NR; ++j) tmp[r][j] = j < nc ? c[r * crs + j * ccs] : 0.0f;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc[r][0] = V::load_aligned(tmp[r]);
      acc[r][1] = V::load_aligned(tmp[r] + W);
    }
  }
  int64_t p = 0;
  if constexpr (R <= 3) {
    // 2R accumulators are too few chains to hide the FMA latency: odd steps go to a second set
    // (unless each output must be one chain)
    if (!one_chain) {
      V odd[R][2];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) odd[r][0] = odd[r][1] = V(0.0f);
      for (; p + 2 <= kc; p += 2) {
        const V b0 = panel_load<G>(panel, offs, p, 0);
        const V b1 = panel_load<G>(panel, offs, p, hi);
        const V c0 = panel_load<G>(panel, offs, p + 1, 0);
        const V c1 = panel_load<G>(panel, offs, p + 1, hi);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const V av(a[r * ars + p * acs]);
          const V aw(a[r * ars + (p + 1) * acs]);
          acc[r][0] = fmadd(av, b0, acc[r][0]);
          acc[r][1] = fmadd(av, b1, acc[r][1]);
          odd[r][0] = fmadd(aw, c0, odd[r][0]);
          odd[r][1] = fmadd(aw, c1, odd[r][1]);
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc[r][0] += odd[r][0];
        acc[r][1] += odd[r][1];
      }
    }
  }
  for (; p < kc; ++p) {
    const V b0 = panel_load<G>(panel, offs, p, 0);
    const V b1 = panel_load<G>(panel, offs, p, hi);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V av(a[r * ars + p * acs]);
      acc[r][0] = fmadd(av, b0, acc[r][0]);
      acc[r][1] = fmadd(av, b1, acc[r][1]);
    }
  }
  if (relu) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc[r][0] = relu_keep_nan(acc[r][0]);
      acc[r][1] = relu_keep_nan(acc[r][1]);
    }
  }
  if (dense) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc[r][0].store_unaligned(c + r * crs);
      acc[r][1].store_unaligned(c + r * crs + W);
    }
    return;
  }
  if (ccs == 1 && nc >= W) {  // the first vector whole, the rest through tmp
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc[r][0].store_unaligned(c + r * crs);
      acc[r][1].store_aligned(tmp[r] + W);
    }
    for (int r = 0; r < R; ++r)
      for (int64_t j = W; j < nc; ++j) c[r * crs + j] = tmp[r][j];
    return;
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    acc[r][0].store_aligned(tmp[r]);
    acc[r][1].store_aligned(tmp[r] + W);
  }
  for (int r = 0; r < R; ++r)
    for (int64_t j = 0; j < nc; ++j) c[r * crs + j * ccs] = tmp[r][j];
}

using TileFn = void (*)(const float*, int64_t, int64_t, const float*, const int64_t*, int64_t,
                        int64_t, const float*, const float*, bool, bool, bool, float*, int64_t,
                        int64_t, int64_t);
// Tiles of up to MR + kJoin rows (see run()); kMaxRows bounds every per-tile row buffer.
constexpr int64_t kJoin = W == 16 ? 2 : 0;
constexpr int64_t kMaxRows = MR + 2;
template <bool G>
constexpr TileFn kTiles[kMaxRows + 1] = {nullptr,    tile<1, G>, tile<2, G>, tile<3, G>, tile<4, G>,
                                         tile<5, G>, tile<6, G>, tile<7, G>, tile<8, G>};
// The rows of the tile that starts where `left` rows remain, and how many tiles cover `rows`.
constexpr int64_t tile_rows(int64_t left) { return left <= MR + kJoin ? left : MR; }
constexpr int64_t row_tiles(int64_t rows) {
  return rows <= MR + kJoin ? 1 : 1 + (rows - kJoin - 1) / MR;
}
constexpr bool tiles_agree(int64_t rows) {
  int64_t n = 0;
  for (int64_t m0 = 0; m0 < rows; m0 += tile_rows(rows - m0)) ++n;
  return n == row_tiles(rows);
}
static_assert(tiles_agree(1) && tiles_agree(6) && tiles_agree(7) && tiles_agree(8) &&
              tiles_agree(9) && tiles_agree(14) && tiles_agree(15) && tiles_agree(128));

// panel[p][j] = b[j][p] for j < nc, p < kc, zero for nc <= j < NR: a transpose, done in 8x8
// blocks in registers when b's rows are contiguous (a scalar transpose costs as much as a tenth
// of a small product).
void pack_panel(const float* b, int64_t brs, int64_t bcs, int64_t nc, int64_t kc, float* panel) {
  if (brs == 1) {
    // b^T's rows are contiguous (a convolution's columns): each panel row is a copy
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = b + p * bcs;
      float* dst = panel + p * NR;
      if (nc == NR) {
        V::load_unaligned(src).store_aligned(dst);
        V::load_unaligned(src + W).store_aligned(dst + W);
      } else {
        for (int64_t j = 0; j < NR; ++j) dst[j] = j < nc ? src[j] : 0.0f;
      }
    }
    return;
  }
  int64_t p0 = 0;
#ifdef __AVX2__
  if (bcs == 1) {
    const int64_t full = kc / 8 * 8;
    // rows outer: eight rows stream at a time, which the prefetcher follows
    for (int64_t j0 = 0; j0 + 8 <= nc; j0 += 8)
      for (p0 = 0; p0 < full; p0 += 8)
        transpose8x8(b + j0 * brs + p0, brs, panel + p0 * NR + j0, NR);
    p0 = full;
    // columns past the last full block of 8 rows, for the depths done above
    for (int64_t j = nc / 8 * 8; j < NR; ++j)
      for (int64_t p = 0; p < p0; ++p) panel[p * NR + j] = j < nc ? b[j * brs + p] : 0.0f;
  }
#endif
  for (int64_t j = 0; j < NR; ++j)
    for (int64_t p = p0; p < kc; ++p) panel[p * NR + j] = j < nc ? b[j * brs + p * bcs] : 0.0f;
}

// The cache lines b's next panel is packed from, fetched a few at a time while the tiles of the
// current one run: a set's weights come from L3, and packing otherwise waits on every line
// (15% of an ensemble MLP's time before this). Only for rows of b contiguous in k.
struct PanelPrefetch {
  static constexpr int64_t kLine = 64 / sizeof(float);
  const float* row = nullptr;  // the next line to fetch is row + line * kLine
  int64_t stride = 0, lines_per_row = 0, rows_left = 0, line = 0, per_tile = 0;

  PanelPrefetch(const Product& q, int64_t n0, int64_t k0) {
    int64_t n1 = n0, k1 = k0 + KC;
    if (k1 >= q.k) n1 += NR, k1 = 0;
    const float* b = q.b;
    if (n1 >= q.cols) b = q.next_b, n1 = 0;  // the next product's first panel
    if (q.bcs != 1 || !b) return;
    row = b + n1 * q.brs + k1;
    stride = q.brs;
    lines_per_row = (std::min(KC, q.k - k1) + kLine - 1) / kLine + 1;  // +1: unaligned rows
    rows_left = std::min(NR, q.cols - n1);
    const int64_t tiles = row_tiles(q.rows);
    per_tile = (rows_left * lines_per_row + tiles - 1) / tiles;
  }
  void step() {
    for (int64_t i = 0; i < per_tile && rows_left > 0; ++i) {
      __builtin_prefetch(row + line * kLine);
      if (++line == lines_per_row) line = 0, row += stride, --rows_left;
    }
  }
};

// k > 0 (small_gemm_nt sends k == 0, a product of nothing, to its direct loop).
void run(const Product& q) {
  alignas(64) float panel[KC * NR];
  alignas(64) float col_init[NR];
  alignas(64) float row_init[kMaxRows];
  for (int64_t n0 = 0; n0 < q.cols; n0 += NR) {
    const int64_t nc = std::min(NR, q.cols - n0);
    for (int64_t j = 0; j < NR; ++j)
      col_init[j] = q.col_bias && j < nc ? q.col_bias[(n0 + j) * q.bs] : 0.0f;
    for (int64_t k0 = 0; k0 < q.k; k0 += KC) {
      const int64_t kc = std::min(KC, q.k - k0);
      PanelRows view{panel, nullptr};
      if (q.src)
        view = q.src->pack(n0, nc, k0, kc, panel);
      else
        pack_panel(q.b + n0 * q.brs + k0 * q.bcs, q.brs, q.bcs, nc, kc, panel);
      PanelPrefetch next(q, n0, k0);
      const bool first = k0 == 0, last = k0 + kc >= q.k;
      if (q.next_bias && q.bs == 1 && last && n0 + NR >= q.cols)  // a bias per column or row
        for (int64_t j = 0; j < (q.col_bias ? q.cols : q.rows); j += PanelPrefetch::kLine)
          __builtin_prefetch(q.next_bias + j);
      for (int64_t m0 = 0, rows = 0; m0 < q.rows; m0 += rows) {
        // a remainder of 1-2 rows joins the last full tile where 16 accumulators fit in registers
        // (kJoin, AVX-512's 32): a 2-row tile ran 1.3x slower per row (mlp32's 128 rows: 0.5-0.7%)
        rows = tile_rows(q.rows - m0);
        next.step();
        if (q.row_bias)
          for (int64_t r = 0; r < rows; ++r) row_init[r] = q.row_bias[(m0 + r) * q.bs];
        (view.offs ? kTiles<true> : kTiles<false>)[rows](
            q.a + m0 * q.ars + k0 * q.acs, q.ars, q.acs, view.base, view.offs, view.second, kc,
            q.col_bias ? col_init : nullptr, q.row_bias ? row_init : nullptr, first, q.relu && last,
            q.one_chain, q.c + m0 * q.crs + n0 * q.ccs, q.crs, q.ccs, nc);
      }
    }
  }
}

// Few output columns (small_gemm_nt says how few), kDotCols at a time: each output is the dot
// product of a row of x and a row of w, both contiguous in k. R x J outputs (R * J <= W) are
// summed in vectors along k and reduced together by one parallel horizontal add. Nothing is packed:
// each element of x meets only n weights, so the packed copy of x the transposed product needs cost
// as much as the products (Linear(32, 4) over 64 rows: 1.25x faster this way, Linear(k, 1) 2.3x).
constexpr int64_t kDotCols = 4;

// Lane i holds the sum of acc[i]'s lanes. On AVX-512 a tree of halving shuffles and adds, four
// levels of 3 instructions per pair (xsimd 8.1's AVX-512 haddp puts lanes 2-5 and 10-13 in the
// wrong order).
inline V sum_each(const V* acc) {
#ifdef __AVX512F__
  if constexpr (W == 16) {
    // The tree leaves the sum of its input j in lane f(j), f = kOrder (its own inverse), so it
    // is fed acc[f(j)] as input j.
    constexpr int kOrder[16] = {0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15};
    __m512 t[8], u[4], v[2];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {  // 16 -> 8: 256-bit halves of inputs i and i + 8
      const __m512 a = acc[kOrder[i]], b = acc[kOrder[i + 8]];
      t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)  // 8 -> 4: 128-bit quarters
      u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(t[i], t[i + 4], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(t[i], t[i + 4], _MM_SHUFFLE(3, 1, 3, 1)));
#pragma GCC unroll 2
    for (int i = 0; i < 2; ++i) {  // 4 -> 2: pairs of lanes
      const __m512d a = _mm512_castps_pd(u[i]), b = _mm512_castps_pd(u[i + 2]);
      v[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                           _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    return _mm512_add_ps(_mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(3, 1, 3, 1)));
  } else
#endif
    return xsimd::haddp(acc);
}

template <int R, int J>
void dot_tile(const float* x, int64_t xrs, const float* w, int64_t wrs, int64_t k, const V& bias,
              bool relu, float* y, int64_t yrs) {
  static_assert(R * J <= W);
  V acc[W];
#pragma GCC unroll 16
  for (int i = 0; i < W; ++i) acc[i] = V(0.0f);
  int64_t p = 0;
  for (; p + W <= k; p += W) {
    V wv[J];
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) {
      typename V::register_type t = V::load_unaligned(w + j * wrs + p);
#if defined(__x86_64__) || defined(__i386__)
      asm("" : "+x"(t));  // GCC would fold the loads into every FMA: twice the loads
#endif
      wv[j] = t;
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const V xv = V::load_unaligned(x + r * xrs + p);
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) acc[r * J + j] = fmadd(xv, wv[j], acc[r * J + j]);
    }
  }
  if (p < k) {  // the last k % W columns, zero-padded to a vector
    V xt[R], wt[J];
#ifdef __AVX2__
    if constexpr (W == 8) {
      alignas(32) static constexpr int32_t kLanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                         0,  0,  0,  0,  0,  0,  0,  0};
      const __m256i mask =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLanes + W - (k - p)));
      for (int r = 0; r < R; ++r) xt[r] = _mm256_maskload_ps(x + r * xrs + p, mask);
      for (int j = 0; j < J; ++j) wt[j] = _mm256_maskload_ps(w + j * wrs + p, mask);
    } else
#endif
#ifdef __AVX512F__
        if constexpr (W == 16) {
      const auto mask = static_cast<__mmask16>((1u << (k - p)) - 1);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) xt[r] = _mm512_maskz_loadu_ps(mask, x + r * xrs + p);
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) wt[j] = _mm512_maskz_loadu_ps(mask, w + j * wrs + p);
    } else
#endif
    {
      alignas(64) float buf[W];
      auto load_tail = [&](const float* src) {
        for (int64_t q = 0; q < W; ++q) buf[q] = p + q < k ? src[p + q] : 0.0f;
        return V::load_aligned(buf);
      };
      for (int r = 0; r < R; ++r) xt[r] = load_tail(x + r * xrs);
      for (int j = 0; j < J; ++j) wt[j] = load_tail(w + j * wrs);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) acc[r * J + j] = fmadd(xt[r], wt[j], acc[r * J + j]);
  }
  V sums = sum_each(acc) + bias;
  if (relu) sums = relu_keep_nan(sums);
  alignas(64) float out[W];
  sums.store_aligned(out);
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) y[r * yrs + j] = out[r * J + j];
}

using DotFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, const V&, bool,
                       float*, int64_t);
// kDot[J][R]: the tile of R rows and J columns (R <= W / J)
template <int J, int... Rs>
constexpr std::array<DotFn, W + 1> dot_tiles(std::integer_sequence<int, Rs...>) {
  return {nullptr, dot_tile<Rs + 1, J>...};
}
constexpr std::array<DotFn, W + 1> kDot[kDotCols + 1] = {
    {},
    dot_tiles<1>(std::make_integer_sequence<int, W / 1>()),
    dot_tiles<2>(std::make_integer_sequence<int, W / 2>()),
    dot_tiles<3>(std::make_integer_sequence<int, W / 3>()),
    dot_tiles<4>(std::make_integer_sequence<int, W / 4>())};

// y = x @ w^T (+ bias) for x, w rows contiguous in k (xcs == wcs == 1).
void run_dot(const float* x, int64_t xrs, const float* w, int64_t wrs, const float* bias,
             int64_t bs, float* y, int64_t yrs, int64_t m, int64_t n, int64_t k, bool relu) {
  for (int64_t j0 = 0; j0 < n; j0 += kDotCols) {
    const int64_t cols = std::min(kDotCols, n - j0), rows = W / cols;
    alignas(64) float b[W];  // lane r * cols + j holds column j's bias
    // (not i % cols: a division per lane was a fifth of a vmapped LSTM's time)
    for (int64_t i = 0, j = 0; i < W; ++i, j = j + 1 == cols ? 0 : j + 1)
      b[i] = bias ? bias[(j0 + j) * bs] : 0.0f;
    const V bv = V::load_aligned(b);
    for (int64_t i0 = 0; i0 < m; i0 += rows)
      kDot[cols][std::min(rows, m - i0)](x + i0 * xrs, xrs, w + j0 * wrs, wrs, k, bv, relu,
                                         y + i0 * yrs + j0, yrs);
  }
}

// Whether small_gemm_nt takes dot products (run_dot) for rows of x and w contiguous in k: for
// few columns; with AVX-512's reduction tree, for up to 16 once k spans two vectors
// (Linear(256, 10) over 32 sets of 128 rows: 350 -> 260 us); and for a few rows (an ensemble run
// on one input or a handful), where a packed panel of w^T would serve one or two tiles, so
// packing it costs about what the products do, once k is long enough to pay for the reductions.
bool takes_dots(int64_t m, int64_t n, int64_t k) {
  const bool few_rows = m <= 2 || (m <= 8 && k >= 4 * W);
  return n <= kDotCols || (W == 16 && n <= 16 && k >= 2 * W) || few_rows;
}

}  // namespace

bool small_gemm_pays(int64_t m, int64_t n, int64_t k, bool rows_in_k) {
  // Dot products pack nothing: whatever x's size they pay where x is read once (a group of
  // kDotCols columns) or has a few rows, which each group of w's rows meets from L2 (Linear(16384,
  // 10) on 8 rows at AVX2: OpenBLAS spent two fifths of its time packing)
  if (rows_in_k && takes_dots(m, n, k) && (n <= kDotCols || m <= 8)) return true;
  // Measured against OpenBLAS 0.3.21, one thread: on Zen 3 (AVX2, 512 KiB L2) this kernel lost
  // beyond 256 KiB of x; on Zen 4 (AVX-512, 1 MiB L2) it wins up to 1 MiB (mlp8_large's
  // [256, 512] and [256, 1024] inputs: 1.09-1.10x; 1.02-1.15x over other shapes) and is mixed
  // or slower beyond (0.55-0.88x at 8-16 MiB).
  constexpr int64_t kMaxX = W == 16 ? (1 << 20) : (256 << 10);
  return m * k * static_cast<int64_t>(sizeof(float)) <= kMaxX;
}

void small_gemm_nt(const float* x, int64_t xrs, int64_t xcs, const float* w, int64_t wrs,
                   int64_t wcs, const float* bias, int64_t bs, float* y, int64_t yrs, int64_t m,
                   int64_t n, int64_t k, bool relu, const SmallGemmNext& next) {
  if (m * n * k <= 1024) {
    // a handful of products (Linear(3, 1) on ten rows), or none (k == 0: the bias): packing a
    // panel would cost more
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float acc = bias ? bias[j * bs] : 0.0f;
        for (int64_t p = 0; p < k; ++p) acc += x[i * xrs + p * xcs] * w[j * wrs + p * wcs];
        y[i * yrs + j] = relu ? std::max(acc, 0.0f) : acc;
      }
    return;
  }
  if (takes_dots(m, n, k) && xcs == 1 && wcs == 1) {
    run_dot(x, xrs, w, wrs, bias, bs, y, yrs, m, n, k, relu);
    return;
  }
  // Few output columns would leave most of a panel empty: compute y^T = w @ x^T instead, with
  // the rows of x as the panel's columns.
  if (n <= W && m > n)
    run({w, wrs, wcs, x, xrs, xcs, nullptr, bias, bs, y, 1, yrs, n, m, k, relu, next.x, next.bias});
  else
    run({x, xrs, xcs, w, wrs, wcs, bias, nullptr, bs, y, yrs, 1, m, n, k, relu, next.w, next.bias});
}

namespace {
// k == 0: a product of nothing is the bias
void fill_bias(const float* bias, float* c, int64_t crs, int64_t m, int64_t n) {
  for (int64_t i = 0; i < m; ++i) std::fill(c + i * crs, c + i * crs + n, bias ? bias[i] : 0.0f);
}
}  // namespace

// Both as the product c^T = b^T @ a^T: b^T's columns are b's rows, a's rows the tiles' rows.
void small_gemm_panels(const float* a, int64_t ars, const PanelSource& src, const float* bias,
                       float* c, int64_t crs, int64_t m, int64_t n, int64_t k, bool relu) {
  if (k == 0) {
    fill_bias(bias, c, crs, m, n);
    if (relu)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) c[i * crs + j] = c[i * crs + j] < 0 ? 0.0f : c[i * crs + j];
    return;
  }
  run({a,   ars, 1, nullptr, 0, 0,    nullptr, bias,    1,     c,
       crs, 1,   m, n,       k, relu, nullptr, nullptr, false, &src});
}

void small_gemm_nn(const float* a, int64_t ars, const float* b, int64_t brs, const float* bias,
                   float* c, int64_t crs, int64_t m, int64_t n, int64_t k) {
  if (k == 0) return fill_bias(bias, c, crs, m, n);
  run({a, ars, 1, b, 1, brs, nullptr, bias, 1, c, crs, 1, m, n, k, false, nullptr, nullptr});
}

bool small_gemm_chain_pays(int64_t n, int64_t k) {
  return n * k * static_cast<int64_t>(sizeof(float)) <= (1 << 20);
}

void small_gemm_chain(const float* a, int64_t ars, int64_t acs, const float* b, int64_t brs,
                      int64_t bcs, float* c, int64_t crs, int64_t m, int64_t n, int64_t k) {
  if (k == 0) return fill_bias(nullptr, c, crs, m, n);
  // Blocks of rows of a that stay in L2 while b's panels pass (the blocks do not change the bits).
  const int64_t block =
      std::max<int64_t>(MR, (256 << 10) / (k * static_cast<int64_t>(sizeof(float))));
  for (int64_t i0 = 0; i0 < m; i0 += block) {
    const int64_t rows = std::min(block, m - i0);
    const float* ai = a + i0 * ars;
    float* ci = c + i0 * crs;
    Product q{ai,  ars, acs,  b, bcs, brs,   nullptr, nullptr, 1,   ci,
              crs, 1,   rows, n, k,   false, nullptr, nullptr, true};
    if (n < W && rows > n) {
      // Under a vector of columns would leave most of a panel empty: c^T = b^T @ a^T instead,
      // a's rows as the panel's columns (as small_gemm_nt; its stores are scalar).
      std::swap(q.a, q.b);
      std::swap(q.ars, q.brs);
      std::swap(q.acs, q.bcs);
      std::swap(q.crs, q.ccs);
      std::swap(q.rows, q.cols);
    }
    run(q);
  }
}

}  // namespace td::kernels::TD_ISA
