// The float batched product behind matmul (kernels::bmm, small_gemm_chain for a small b) against
// a double loop at odd sizes, strided and broadcast operands; an output's bits depend on its row
// of a and column of b alone (a matmul's batch folded into its rows, the layouts, the threads).
// Softmax over rows of mostly -inf against a double loop.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/engine.h"
#include "engine/kernels/kernels.h"
#include "tests/tensor_values.h"
#include "tests/test_util.h"

using namespace td;
using namespace td::test;

namespace {

// the largest |got - want| / (1 + |want|) over c [bt, m, n] = a [ba, m, k] @ b [bb, k, n]
double worst_error(const Tensor& c, const Tensor& a, const Tensor& b) {
  const int64_t bt = c.size(0), m = c.size(1), n = c.size(2), k = a.size(2);
  const auto av = a.contiguous().to_vector<double>(), bv = b.contiguous().to_vector<double>();
  const auto got = c.to_vector<double>();
  double worst = 0;
  for (int64_t s = 0; s < bt; ++s)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t p = 0; p < k; ++p)
          want += av[((a.size(0) == 1 ? 0 : s) * m + i) * k + p] *
                  bv[((b.size(0) == 1 ? 0 : s) * k + p) * n + j];
        worst = std::max(worst, std::abs(got[(s * m + i) * n + j] - want) / (1.0 + std::abs(want)));
      }
  return worst;
}

}  // namespace

// Sizes around the 6-row tiles (1-3 rows: the tiles that otherwise split the depth), the panel
// of two vectors (and under one vector: the transposed product), depths past a 128-deep panel
// and 0; a stored row-major, column-major or with a step; b the same; either broadcast.
TEST_CASE("bmm float: odd sizes and layouts against the double loop") {
  const int64_t sizes[] = {1, 3, 17, 33};
  int variant = 0;
  for (int64_t m : sizes)
    for (int64_t n : {1, 3, 16, 17, 33, 70})
      for (int64_t k : {0, 1, 3, 17, 33, 300}) {
        ++variant;
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        CAPTURE(variant);
        const int64_t bt = 3, ba = variant % 5 == 0 ? 1 : bt,
                      bb = variant % 7 == 0 && ba > 1 ? 1 : bt;
        Tensor a = variant % 3 == 0   ? seq({ba, k, m}, kFloat32, 0.13).transpose(1, 2)
                   : variant % 3 == 1 ? seq({ba, m, 2 * k}, kFloat32, 0.41).slice(2, 0, 2 * k, 2)
                                      : seq({ba, m, k}, kFloat32, 0.17);
        Tensor b = variant % 2 ? seq({bb, n, k}, kFloat32, 0.29).transpose(1, 2)
                               : seq({bb, k, n}, kFloat32, 0.23);
        Tensor c = kernels::bmm(a, b);
        REQUIRE(c.shape() == Shape{bt, m, n});
        CHECK(worst_error(c, a, b) < 1e-4);  // float sums of up to 300 terms
      }
}

TEST_CASE("bmm float: an output's bits do not depend on the batch, the layouts or the threads") {
  for (auto [m, n, k] : {std::array<int64_t, 3>{32, 32, 16},
                         {32, 16, 32},
                         {2, 5, 7},
                         {3, 40, 9},
                         {17, 3, 33},
                         {1, 70, 300},
                         {13, 8, 129},
                         {64, 64, 300},
                         {128, 256, 300}}) {
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    const int64_t bt = 4;
    Tensor a = seq({bt, m, k}, kFloat32, 0.31), b = seq({bt, k, n}, kFloat32, 0.47);
    Tensor whole = kernels::bmm(a, b);
    // rows of a shared b folded into one product (matmul against a shared matrix under vmap)
    Tensor folded = matmul(a, b.select(0, 1));
    Tensor a_t = a.transpose(1, 2).contiguous().transpose(1, 2);
    Tensor b_t = b.transpose(1, 2).contiguous().transpose(1, 2);
    Tensor relaid = kernels::bmm(a_t, b_t);
    set_num_threads(2);
    Tensor two = kernels::bmm(a, b), lone = kernels::bmm(a.slice(0, 1, 2), b.slice(0, 1, 2));
    set_num_threads(1);
    CHECK(equal(relaid, whole));
    CHECK(equal(two, whole));
    CHECK(equal(lone.select(0, 0), whole.select(0, 1)));
    for (int64_t s = 0; s < bt; ++s) {
      CAPTURE(s);
      CHECK(equal(kernels::bmm(a.slice(0, s, s + 1), b.slice(0, s, s + 1)).select(0, 0),
                  whole.select(0, s)));
      CHECK(equal(matmul(a.select(0, s), b.select(0, 1)), folded.select(0, s)));
      // one row alone
      CHECK(equal(matmul(a.select(0, s).slice(0, m - 1, m), b.select(0, s)),
                  whole.select(0, s).slice(0, m - 1, m)));
    }
    CHECK(worst_error(whole, a, b) < 1e-5);
  }
}

// A causal mask leaves rows of mostly -inf, whose exps are exactly 0.
TEST_CASE("softmax over rows of mostly -inf against the double loop") {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dt : {kFloat32, kFloat64})
    for (int64_t n : {1, 3, 17, 33, 64}) {
      CAPTURE(n);
      const int64_t rows = 2 * n;
      std::vector<double> x(static_cast<size_t>(rows * n));
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < n; ++j)
          x[i * n + j] = j <= i % n ? 3.0 * std::sin(0.7 * static_cast<double>(i * n + j))
                         : i >= n   ? -200.0 - j  // finite, exp of it underflows to 0
                                    : -inf;
      Tensor got = softmax(tensor<double>(x, {rows, n}).to(dt), -1).to(kFloat64);
      const auto gv = got.to_vector<double>();
      for (int64_t i = 0; i < rows; ++i) {
        double mx = -inf, sum = 0;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[i * n + j]);
        for (int64_t j = 0; j < n; ++j) sum += std::exp(x[i * n + j] - mx);
        for (int64_t j = 0; j < n; ++j) {
          const double want = std::exp(x[i * n + j] - mx) / sum;
          if (want == 0.0 || (dt == kFloat32 && want < 1e-38)) {
            CHECK(gv[i * n + j] == 0.0);
          } else {
            CHECK(std::abs(gv[i * n + j] - want) <= 1e-6 * want);
          }
        }
      }
    }
}

// Heads viewed in a fused projection's output ([N, L, 3, H, D] permuted to [N, H, L, D]): batch
// dims that do not merge without a copy go to bmm as two, against contiguous copies (the same
// bits), the double loop, and shared or differently split operands.
TEST_CASE("matmul over two batch dims that do not merge: strided heads") {
  for (DType dt : {kFloat32, kFloat64})
    for (auto [n, l, h, d] : {std::array<int64_t, 4>{3, 17, 4, 5}, {2, 32, 4, 16}, {1, 3, 2, 1}}) {
      CAPTURE(n);
      CAPTURE(l);
      CAPTURE(h);
      CAPTURE(d);
      const Tensor qkv =
          seq({n, l, 3, h, d}, dt, 0.37).permute({0, 3, 2, 1, 4});  // [N, H, 3, L, D]
      const Tensor q = qkv.select(2, 0), k = qkv.select(2, 1), v = qkv.select(2, 2);
      const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
      const Tensor scores = matmul(q, k.transpose(-2, -1));
      REQUIRE(scores.shape() == Shape{n, h, l, l});
      CHECK(equal(scores, matmul(qc, kc.transpose(-2, -1))));
      const Tensor out = matmul(scores, v);
      CHECK(equal(out, matmul(scores, vc)));
      // a contiguous operand is split as the strided one; a shared one broadcasts
      CHECK(equal(matmul(qc, k.transpose(-2, -1)), scores));
      const Tensor shared = seq({d, 7}, dt, 0.53);
      CHECK(equal(matmul(q, shared), matmul(qc, shared)));
      const Tensor per_head = seq({h, d, 7}, dt, 0.19);  // broadcast over N
      CHECK(equal(matmul(q, per_head), matmul(qc, per_head)));
      // differently split operands (heads [N, H] against [H, N] transposed back) are copied
      const Tensor k_hn = seq({l, 3, h, n, d}, dt, 0.29).permute({3, 2, 1, 0, 4}).select(2, 1);
      CHECK(equal(matmul(q, k_hn.transpose(-2, -1)),
                  matmul(qc, k_hn.contiguous().transpose(-2, -1))));
      const Tensor s3 = scores.reshape({n * h, l, l}), q3 = qc.reshape({n * h, l, d}),
                   k3 = kc.reshape({n * h, l, d}).transpose(1, 2);
      CHECK(worst_error(s3, q3, k3) < 1e-5);
    }
  // bmm takes 4-D operands for matmul's float products only
  CHECK_THROWS_AS(
      kernels::bmm(zeros({2, 2, 3, 3}, DType::Int64), zeros({2, 2, 3, 3}, DType::Int64)),
      ValueError);
  CHECK_THROWS_AS(kernels::bmm(zeros({2, 2, 3, 3}), zeros({2, 3, 3})), ValueError);
  CHECK_THROWS_AS(kernels::bmm(zeros({2, 2, 3, 4}), zeros({2, 3, 4, 3})), ValueError);
}
