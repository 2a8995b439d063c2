// The GEMM kernel behind linear (kernels::gemm_nt) against a naive loop over every tile edge,
// shared and per-set operands, bias and ReLU; products cut across threads keep the one-thread
// bits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/engine.h"
#include "engine/kernels/kernels.h"
#include "tests/tensor_values.h"
#include "tests/test_util.h"

using namespace td;
using namespace td::test;

// kernels::gemm_nt over every tile edge of the small-matrix kernel (rows around its 6-row tile,
// remainders of 2 and 3 rows, whose tiles split the depth into even and odd steps, at odd depths,
// or with AVX-512 remainders of 1-2 joined to the last tile as 7 or 8 rows, a per-row bias too
// when the product runs transposed (5-16 columns at a depth under two vectors),
// columns around its two-vector panel and the narrow cases (1-4 columns as dot products, and
// 5-16 too with AVX-512 from a depth of two vectors, with partial last vectors and row
// remainders, or transposed when x's rows are strided), depths
// past its 16 KiB panel, and for any size of x), its direct loop for tiny products, and the
// Eigen path (x over 1 MiB; over 256 KiB without AVX-512), against a double loop: shared and per-set operands, bias none,
// shared or per set, ReLU on and off, transposed storage of either operand.
TEST_CASE("batched gemm_nt: tile edges, sharing, bias and ReLU against the naive loop") {
  struct Case {
    int64_t bt, m, n, k;
  };
  // the first four and the last take the direct loop for tiny products (m * n * k <= 1024); one
  // and two rows take dot products for any n and k, up to eight rows from a depth of 64
  const std::vector<Case> cases = {
      {1, 1, 1, 1},      {2, 5, 3, 7},      {3, 6, 8, 16},    {2, 7, 9, 0},     {3, 6, 8, 32},
      {2, 13, 16, 33},   {1, 12, 17, 9},    {2, 64, 4, 32},   {2, 19, 33, 300}, {1, 5, 70, 600},
      {2, 300, 20, 300}, {2, 14, 20, 37},   {1, 9, 18, 64},   {1, 8, 17, 301},  {2, 70, 1, 19},
      {1, 33, 2, 40},    {2, 29, 3, 41},    {1, 11, 4, 45},   {2, 130, 2, 8},   {2, 37, 10, 256},
      {1, 20, 13, 47},   {2, 260, 70, 400}, {1, 520, 9, 520}, {2, 40, 14, 20},  {1, 30, 7, 9},
      {2, 1, 300, 64},   {1, 2, 70, 601},   {2, 1, 33, 17},   {1, 2, 5, 300},   {2, 7, 45, 130},
      {1, 8, 19, 64},    {1, 7, 9, 0},
      // x over 1 MiB: dot products all the same, for a few columns or a few rows
      {1, 300, 3, 1000}, {1, 8, 10, 40000}};
  int variant = 0;
  for (const Case& c : cases)
    for (bool shared_x : {false, true})
      for (int bias_kind : {0, 1, 2})  // none, shared [1, n], per set [bt, n]
        for (bool relu : {false, true}) {
          ++variant;
          CAPTURE(c.bt);
          CAPTURE(c.m);
          CAPTURE(c.n);
          CAPTURE(c.k);
          CAPTURE(shared_x);
          CAPTURE(bias_kind);
          CAPTURE(relu);
          const int64_t bx = shared_x ? 1 : c.bt;
          // x stored transposed on every third variant (unit row stride, strided columns)
          Tensor x = variant % 3 ? seq({bx, c.m, c.k}, kFloat32, 0.13 + 0.01 * variant)
                                 : seq({bx, c.k, c.m}, kFloat32, 0.13).transpose(1, 2);
          // w stored transposed on odd variants (strided rows, unit column stride otherwise)
          Tensor w = variant % 2 ? seq({c.bt, c.k, c.n}, kFloat32, 0.29).transpose(1, 2)
                                 : seq({c.bt, c.n, c.k}, kFloat32, 0.29);
          Tensor b = bias_kind == 0   ? Tensor()
                     : bias_kind == 1 ? seq({1, c.n}, kFloat32, 1.3)
                                      : seq({c.bt, c.n}, kFloat32, 1.3);
          Tensor y = kernels::gemm_nt(x, w, b, relu);
          REQUIRE(y.shape() == Shape{c.bt, c.m, c.n});
          auto xv = x.contiguous().to_vector<double>(), wv = w.contiguous().to_vector<double>();
          auto bv = b.defined() ? b.to_vector<double>() : std::vector<double>{};
          std::vector<double> ref;
          for (int64_t s = 0; s < c.bt; ++s)
            for (int64_t i = 0; i < c.m; ++i)
              for (int64_t j = 0; j < c.n; ++j) {
                double acc = bias_kind == 0 ? 0.0 : bv[(bias_kind == 2 ? s * c.n : 0) + j];
                for (int64_t p = 0; p < c.k; ++p)
                  acc += xv[((shared_x ? 0 : s) * c.m + i) * c.k + p] *
                         wv[(s * c.n + j) * c.k + p];
                ref.push_back(relu ? std::max(acc, 0.0) : acc);
              }
          std::vector<double> got = y.to_vector<double>();
          REQUIRE(got.size() == ref.size());
          double worst = 0;
          for (size_t i = 0; i < ref.size(); ++i)
            worst = std::max(worst, std::abs(got[i] - ref[i]) / (1.0 + std::abs(ref[i])));
          CHECK(worst < 1e-4);
        }
}

// A product of our kernel cut across threads into column blocks whose last block is narrow
// (130 = 128 + 2 columns, 129, 200): a block of a few columns must not take another path of the
// kernel (dot products, the scalar loop) than the whole product's tiles.
TEST_CASE("gemm_nt: our kernel's column blocks keep the whole product's path and bits") {
  for (int64_t n : {129, 130, 200}) {
    CAPTURE(n);
    Tensor x = seq({1, 64, 512}, kFloat32, 0.29), w = seq({1, n, 512}, kFloat32, 0.13);
    Tensor b = seq({1, n}, kFloat32, 0.5);
    Tensor one = kernels::gemm_nt(x, w, b, false);
    set_num_threads(2);
    Tensor two = kernels::gemm_nt(x, w, b, false);
    set_num_threads(1);
    CHECK(equal(two, one));
  }
}

// With more threads than products, one of our kernel's products is cut into column blocks, one
// per thread: every output is computed as in the whole product, so the bits are the one-thread
// bits (a cut of an OpenBLAS product may round differently; this one must not).
TEST_CASE("gemm_nt: a lone product cut across threads has the one-thread bits") {
  Tensor x = seq({1, 256, 512}, kFloat32, 0.37), w = seq({1, 1000, 512}, kFloat32, 0.11);
  Tensor b = seq({1, 1000}, kFloat32, 0.7);
  for (bool relu : {false, true}) {
    CAPTURE(relu);
    Tensor one = kernels::gemm_nt(x, w, b, relu);
    set_num_threads(2);
    Tensor two = kernels::gemm_nt(x, w, b, relu);
    Tensor two_shared = kernels::gemm_nt(x, w.expand({3, 1000, 512}), b, relu);
    set_num_threads(1);
    CHECK(equal(two, one));
    for (int64_t s = 0; s < 3; ++s) CHECK(equal(two_shared.select(0, s), one.select(0, 0)));
    // and against the double loop at a few places, the last column block's edges included
    auto xv = x.to_vector<double>(), wv = w.to_vector<double>(), bv = b.to_vector<double>();
    for (int64_t i : {0, 101, 255})
      for (int64_t j : {0, 511, 512, 999}) {
        double acc = bv[static_cast<size_t>(j)];
        for (int64_t p = 0; p < 512; ++p)
          acc += xv[static_cast<size_t>(i * 512 + p)] * wv[static_cast<size_t>(j * 512 + p)];
        if (relu) acc = std::max(acc, 0.0);
        const double got = one[0][i][j].item<double>();
        CHECK(std::abs(got - acc) <= 1e-4 * (1.0 + std::abs(acc)));
      }
  }
}
