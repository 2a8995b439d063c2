// matmul against a naive triple loop and hand values: every rank combination, broadcast batch
// dims, non-contiguous and expanded operands, dtypes, empty dims, errors, kernel counts; a
// batched product split across threads; a small product's bits wherever it sits in a batch and
// whatever its operands' layouts.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cmath>
#include <vector>

#include "engine/engine.h"
#include "engine/kernels/kernels.h"
#include "tests/tensor_values.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

TEST_CASE("matmul 2-D: hand values and the naive loop") {
  Tensor a = tensor({1.f, 2.f, 3.f, 4.f}, {2, 2});
  Tensor b = tensor({5.f, 6.f, 7.f, 8.f}, {2, 2});
  Tensor c = matmul(a, b);
  CHECK(c.shape() == Shape{2, 2});
  CHECK(c.dtype() == kFloat32);
  CHECK(c.to_vector<float>() == std::vector<float>{19.f, 22.f, 43.f, 50.f});
  CHECK(a.matmul(b).to_vector<float>() == std::vector<float>{19.f, 22.f, 43.f, 50.f});

  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = seq({7, 5}, dt), y = seq({5, 9}, dt, 0.71);
    Tensor z = matmul(x, y);
    CHECK(z.shape() == Shape{7, 9});
    CHECK(z.dtype() == dt);
    check_close(z, ref_mm(x.to_vector<double>(), y.to_vector<double>(), 7, 5, 9),
                dt == kFloat32 ? 1e-4 : 1e-12);
  }
}

TEST_CASE("matmul with non-contiguous operands") {
  Tensor at = seq({5, 6});  // a = at^T is [6, 5], column-major
  Tensor a = at.t();
  Tensor big = seq({5, 8}, kFloat64, 0.53);
  Tensor b = big.slice(1, 0, std::nullopt, 2);  // [5, 4], column stride 2
  CHECK(!b.is_contiguous());
  auto ref = ref_mm(a.to_vector<double>(), b.to_vector<double>(), 6, 5, 4);
  check_close(matmul(a, b), ref, 1e-12);
  // Both strides non-unit: rows with step 2 of a column-sliced matrix.
  Tensor c = seq({10, 8}).slice(0, 0, std::nullopt, 2).slice(1, 1, std::nullopt, 2);  // [5, 4]
  Tensor d = seq({4, 3}, kFloat64, 0.2);
  check_close(matmul(c, d), ref_mm(c.to_vector<double>(), d.to_vector<double>(), 5, 4, 3), 1e-12);
  // Expanded (stride 0) operand: every row of e is the same.
  Tensor row = seq({1, 4});
  Tensor e = row.expand({3, 4});
  check_close(matmul(e, d), ref_mm(e.to_vector<double>(), d.to_vector<double>(), 3, 4, 3), 1e-12);
  check_close(matmul(d.t(), e.t()),
              ref_mm(d.t().to_vector<double>(), e.t().to_vector<double>(), 3, 4, 3), 1e-12);
}

TEST_CASE("matmul with 1-D operands") {
  Tensor u = tensor({1.f, 2.f, 3.f}), v = tensor({4.f, 5.f, 6.f});
  Tensor dot = matmul(u, v);
  CHECK(dot.dim() == 0);
  CHECK(dot.item<float>() == 32.f);

  Tensor m = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {3, 2});
  Tensor um = matmul(u, m);  // [3] @ [3, 2] -> [2]: (1+6+15, 2+8+18)
  CHECK(um.shape() == Shape{2});
  CHECK(um.to_vector<float>() == std::vector<float>{22.f, 28.f});
  Tensor mu = matmul(m.t(), u);  // [2, 3] @ [3] -> [2]
  CHECK(mu.shape() == Shape{2});
  CHECK(mu.to_vector<float>() == std::vector<float>{22.f, 28.f});

  // 1-D with a batch: [K] @ [B, K, N] -> [B, N]; [B, M, K] @ [K] -> [B, M].
  Tensor bt = seq({2, 3, 4});
  Tensor w = seq({3}, kFloat64, 1.3);
  Tensor r1 = matmul(w, bt);
  CHECK(r1.shape() == Shape{2, 4});
  Tensor r2 = matmul(bt.transpose(1, 2), w);
  CHECK(r2.shape() == Shape{2, 4});
  auto wv = w.to_vector<double>();
  for (int64_t i = 0; i < 2; ++i) {
    auto slab = bt[i].to_vector<double>();
    auto ref = ref_mm(wv, slab, 1, 3, 4);
    check_close(r1[i], ref, 1e-12);
    check_close(r2[i], ref, 1e-12);
  }
}

TEST_CASE("matmul batched with broadcast batch dims") {
  Tensor a = seq({2, 1, 3, 4});
  Tensor b = seq({5, 4, 2}, kFloat64, 0.9);
  Tensor c = matmul(a, b);
  CHECK(c.shape() == Shape{2, 5, 3, 2});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 5; ++j)
      check_close(c[i][j], ref_mm(a[i][0].to_vector<double>(), b[j].to_vector<double>(), 3, 4, 2),
                  1e-12);
  // N-D @ 2-D (the batch folds into rows) and 2-D @ N-D (shared left operand).
  Tensor m = seq({4, 6}, kFloat64, 0.4);
  Tensor d = matmul(a, m);
  CHECK(d.shape() == Shape{2, 1, 3, 6});
  Tensor e = matmul(m.t(), b.transpose(1, 2).transpose(1, 2));
  CHECK(e.shape() == Shape{5, 6, 2});
  for (int64_t i = 0; i < 2; ++i)
    check_close(d[i][0], ref_mm(a[i][0].to_vector<double>(), m.to_vector<double>(), 3, 4, 6),
                1e-12);
  for (int64_t j = 0; j < 5; ++j)
    check_close(e[j], ref_mm(m.t().to_vector<double>(), b[j].to_vector<double>(), 6, 4, 2), 1e-12);
  // Batch-transposed operand (non-contiguous batch).
  Tensor p = seq({3, 2, 4}).transpose(0, 1);  // [2, 3, 4]
  Tensor q = seq({2, 4, 5}, kFloat64, 0.8);
  Tensor pq = matmul(p, q);
  for (int64_t i = 0; i < 2; ++i)
    check_close(pq[i], ref_mm(p[i].to_vector<double>(), q[i].to_vector<double>(), 3, 4, 5), 1e-12);
  // One batched matmul is one GEMM kernel.
  reset_kernel_counts();
  matmul(a, b);
  CHECK(kernel_count(KernelKind::Gemm) == 1);
}

TEST_CASE("matmul dtypes and empty dims") {
  Tensor i = tensor<int64_t>({1, 2, 3, 4}, {2, 2});
  Tensor ii = matmul(i, i);
  CHECK(ii.dtype() == kInt64);
  CHECK(ii.to_vector<int64_t>() == std::vector<int64_t>{7, 10, 15, 22});
  // int64 products and sums wrap, as torch's: 2^62 * 2 + 2^62 * 1 = 3 * 2^62 - 2^64 = -2^62
  // (signed overflow before: undefined behaviour, reported by the sanitizer build)
  const int64_t q = int64_t{1} << 62;
  CHECK(matmul(tensor<int64_t>({q, q}, {1, 2}), tensor<int64_t>({2, 1}, {2, 1})).item<int64_t>() ==
        -q);
  CHECK(
      linear(tensor<int64_t>({q, q}, {1, 2}), tensor<int64_t>({2, 1}, {1, 2}), tensor<int64_t>({q}))
          .item<int64_t>() == 0);  // -2^62 + 2^62
  CHECK(linear(tensor<int64_t>({q}, {1, 1}), tensor<int64_t>({2}, {1, 1}), tensor<int64_t>({q}))
            .item<int64_t>() == -q);  // 2^63 wraps to -2^63, + 2^62
  Tensor f = tensor({1.f, 0.f, 0.f, 1.f}, {2, 2});
  Tensor d = tensor<double>({1, 2, 3, 4}, {2, 2});
  CHECK(matmul(f, d).dtype() == kFloat64);
  // an integral or bool operand does not mix with a floating one, nor bool with int64, as in
  // torch ("expected scalar type Long but found Float"); it was promoted to float32
  Tensor b = tensor<bool>({true, false, false, true}, {2, 2});
  for (const auto& [x, y] : {std::pair{i, f}, std::pair{f, i}, std::pair{d, b}, std::pair{b, i},
                             std::pair{i.select(0, 0), d}}) {
    check_throws_naming_op<TypeError>([&] { matmul(x, y); }, "matmul");
    check_throws_mentioning<TypeError>([&] { matmul(x, y); }, shape_str(x.shape()));
  }
  check_throws_mentioning<TypeError>([&] { matmul(i, f); }, "int64 and float32");
  check_throws_naming_op<TypeError>([&] { linear(i, f); }, "linear");
  check_throws_naming_op<TypeError>([&] { linear(f, f, tensor<int64_t>({1, 2})); }, "linear");
  check_throws_naming_op<TypeError>([&] { linear(i, tensor({1.f, 2.f})); }, "linear");
  CHECK(linear(f, d, tensor({1.f, 2.f})).dtype() == kFloat64);  // floats still promote
  // under vmap the error names the per-set shapes (the stacked call would name [3, 2, 2])
  auto mm = [](Tensor x, Tensor y) { return matmul(x, y); };
  check_throws_mentioning<TypeError>(
      [&] {
        vmap(mm, {.in_dims = {0, std::nullopt}})(ones({3, 2, 2}, kInt64), f);
      },
      "per-set shapes [2, 2] and [2, 2]");
  CHECK_THROWS_AS(vmap([&](Tensor x) { return linear(x, f); })(ones({3, 2, 2}, kInt64)), TypeError);

  Tensor z = matmul(zeros({0, 3}), ones({3, 4}));
  CHECK(z.shape() == Shape{0, 4});
  Tensor k0 = matmul(ones({2, 0}), ones({0, 3}));  // empty inner dim: zeros
  CHECK(k0.shape() == Shape{2, 3});
  CHECK(k0.to_vector<float>() == std::vector<float>(6, 0.f));
  CHECK(matmul(ones({0, 2, 3}), ones({3, 4})).shape() == Shape{0, 2, 4});
  CHECK(matmul(ones({3, 0, 2, 3}), ones({1, 3, 4})).shape() == Shape{3, 0, 2, 4});
}

TEST_CASE("matmul and linear with expanded (stride 0) one-row and one-column operands") {
  // BLAS's gemv refuses a vector with increment 0: such operands are packed first
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor row = seq({1, 1}, dt, 0.5).expand({1, 4});  // [1, 4], stride 0 along the row
    Tensor col = seq({1, 1}, dt, 0.9).expand({4, 1});  // [4, 1], stride 0 down the column
    Tensor b = seq({4, 3}, dt);
    Tensor a = seq({3, 4}, dt, 0.2);
    auto dense = [](const Tensor& t) { return t.contiguous().to_vector<double>(); };
    const double tol = dt == kFloat32 ? 1e-5 : 1e-12;
    check_close(matmul(row, b), ref_mm(dense(row), dense(b), 1, 4, 3), tol);
    check_close(matmul(a, col), ref_mm(dense(a), dense(col), 3, 4, 1), tol);
    check_close(matmul(row, col), ref_mm(dense(row), dense(col), 1, 4, 1), tol);
    Tensor batched = seq({2, 1, 1}, dt).expand({2, 1, 4});
    check_close(matmul(batched, b).select(0, 1),
                ref_mm(dense(batched.select(0, 1)), dense(b), 1, 4, 3), tol);
    // linear's x @ w^T with an expanded row of x and an expanded weight
    check_close(linear(row, a), ref_mm(dense(row), dense(a.t()), 1, 4, 3), tol);
    Tensor wexp = seq({1, 4}, dt).expand({3, 4});
    check_close(linear(a, wexp), ref_mm(dense(a), dense(wexp.t()), 3, 4, 3), tol);
  }
}

TEST_CASE("matmul errors") {
  check_throws_mentioning<ValueError>([] { matmul(ones({2, 3}), ones({4, 5})); }, "[matmul]");
  check_throws_mentioning<ValueError>([] { matmul(ones({2, 3}), ones({4, 5})); }, "[2, 3]");
  check_throws_mentioning<ValueError>([] { matmul(ones({2, 3}), ones({4, 5})); }, "[4, 5]");
  CHECK_THROWS_AS(matmul(ones({3}), ones({4})), ValueError);
  CHECK_THROWS_AS(matmul(scalar_tensor(1.0), ones({4})), ValueError);
  CHECK_THROWS_AS(matmul(ones({3}), ones({2, 3})), ValueError);
  check_throws_mentioning<ValueError>(
      [] {
        matmul(ones({2, 3, 4}), ones({3, 4, 5}));
      },
      "[2, 3, 4]");
  Tensor bl = tensor<bool>({true, false, true, true}, {2, 2});
  check_throws_mentioning<TypeError>([&] { matmul(bl, bl); }, "[matmul]");
}

TEST_CASE("threads: a batched matmul split across threads equals the one-thread result") {
  manual_seed(11);
  Tensor a = randn({6, 128, 96});  // 12 MFLOP: above the threshold for splitting the batch
  Tensor b = randn({6, 96, 80});
  Tensor one = matmul(a, b);
  set_num_threads(2);
  Tensor two = matmul(a, b);
  Tensor strided = matmul(a.transpose(1, 2).contiguous().transpose(1, 2), b);
  set_num_threads(1);
  // another split of the work may round differently (sums of 96 products: atol 1e-4)
  CHECK(allclose(one, two, 1e-5, 1e-4));
  CHECK(allclose(one, strided, 1e-5, 1e-4));
  // 37 matrices: the threads claim them two at a time, the last one alone; each exactly once
  Tensor many_a = randn({37, 64, 64}), many_b = randn({37, 64, 64});
  set_num_threads(1);
  Tensor many_one = matmul(many_a, many_b);
  set_num_threads(2);
  Tensor many_two = matmul(many_a, many_b);
  set_num_threads(1);
  CHECK(allclose(many_one, many_two, 1e-5, 1e-4));
  for (int64_t i : {0, 35, 36})
    CHECK(allclose(many_two[i], matmul(many_a[i], many_b[i]), 1e-5, 1e-4));
  CHECK_THROWS_AS(set_num_threads(0), ValueError);
  // parallel_for covers the range exactly once and rethrows a worker's exception
  set_num_threads(3);
  std::vector<int> hits(10, 0);
  parallel_for(10, [&](int64_t b0, int64_t e0) {
    for (int64_t i = b0; i < e0; ++i) ++hits[i];
  });
  CHECK(hits == std::vector<int>(10, 1));
  CHECK_THROWS_AS(parallel_for(10,
                               [](int64_t b0, int64_t) {
                                 if (b0 > 0) throw_error<RuntimeError>("[test] worker failed");
                               }),
                  RuntimeError);
  // parallel_claim: ranges of 3 claimed in turn cover the range exactly once; the exception
  // rethrown is the first failing range's, as in a loop in order
  std::vector<int> claimed(10, 0);
  std::atomic<int> odd_ranges{0};
  parallel_claim(10, 3, [&](int64_t b0, int64_t e0) {
    if (b0 % 3 != 0 || e0 != std::min<int64_t>(b0 + 3, 10)) ++odd_ranges;
    for (int64_t i = b0; i < e0; ++i) ++claimed[i];
  });
  CHECK(claimed == std::vector<int>(10, 1));
  CHECK(odd_ranges.load() == 0);
  CHECK(has(message_of([] {
              parallel_claim(10, 1, [](int64_t b0, int64_t) {
                if (b0 >= 4) throw_error<RuntimeError>("[test] range ", b0, " failed");
              });
            }),
            "range 4 failed"));
  set_num_threads(1);
}

// Eigen computes small products (rows + cols + depth < 20) coefficient by coefficient, and on
// AVX-512 which coefficients took a scalar dot product depended on the output's alignment: a
// set's product had other bits at another place in the batch (a chunk of MultiheadAttention).
TEST_CASE("a small product has the same bits at any place in the batch") {
  for (DType dt : {kFloat32, kFloat64}) {
    for (auto [m, k, n] : {std::array<int64_t, 3>{5, 4, 6}, {7, 5, 7}, {3, 8, 5}, {9, 1, 9}}) {
      CAPTURE(dt == kFloat64);
      CAPTURE(m);
      CAPTURE(k);
      CAPTURE(n);
      const int64_t bt = 8;
      Tensor a = seq({bt, m, k}, dt), b = seq({bt, k, n}, dt, 0.23), bias = seq({bt, n}, dt, 0.71);
      Tensor whole = matmul(a, b).to(kFloat64);
      Tensor nt = kernels::gemm_nt(a, b.transpose(1, 2), bias, false).to(kFloat64);
      std::vector<double> av = a.to(kFloat64).to_vector<double>(),
                          bv = b.to(kFloat64).to_vector<double>();
      for (int64_t s = 0; s < bt; ++s) {
        CAPTURE(s);
        Tensor one = matmul(a.select(0, s), b.select(0, s)).to(kFloat64);
        CHECK(equal(one, whole.select(0, s)));
        Tensor one_nt = kernels::gemm_nt(a.slice(0, s, s + 1), b.slice(0, s, s + 1).transpose(1, 2),
                                         bias.slice(0, s, s + 1), false)
                            .to(kFloat64);
        CHECK(equal(one_nt, nt.slice(0, s, s + 1)));
        // and the values: a loop in double
        std::vector<double> want = ref_mm(
            std::vector<double>(av.begin() + s * m * k, av.begin() + (s + 1) * m * k),
            std::vector<double>(bv.begin() + s * k * n, bv.begin() + (s + 1) * k * n), m, k, n);
        std::vector<double> got = one.to_vector<double>();
        for (size_t i = 0; i < want.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 1e-5);
      }
    }
  }
}

// A small product's path in Eigen depends on its operands' layouts: a set alone keeps a
// transposed view where the batch's reshape copies it, so a set's bits changed with chunk_size
// (MultiheadAttention's scores with one query).
TEST_CASE("a small product has the same bits whatever its operands' layouts") {
  int differing = 0;
  for (DType dt : {kFloat32, kFloat64})
    for (int64_t m = 1; m <= 9; ++m)
      for (int64_t k = 1; k <= 9; ++k)
        for (int64_t n = 1; n <= 9; ++n) {
          const Tensor a = seq({2, m, k}, dt, 0.37), bt = seq({2, n, k}, dt, 0.61);
          const Tensor b = bt.transpose(1, 2);  // each set's [k, n] is column-major
          const Tensor batch = matmul(a, b);
          for (int64_t i = 0; i < 2; ++i) {
            const Tensor alone = matmul(a[i], b[i]), copied = matmul(a[i], b[i].contiguous());
            const Tensor a_t = matmul(a[i].t().contiguous().t(), b[i]);  // a column-major too
            differing += !equal(batch[i], alone) + !equal(alone, copied) + !equal(alone, a_t);
          }
        }
  CHECK(differing == 0);
}

namespace {
// c = a @ b for one [m, k] by [k, n] float pair as td's small products compute it: each output
// one multiply-add chain over k in order from +0, fused where the kernel level has FMA (the
// x86-64 baseline rounds each product and each sum)
std::vector<float> chain_mm(const Tensor& a, const Tensor& b) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const std::vector<float> av = a.contiguous().to_vector<float>(),
                           bv = b.contiguous().to_vector<float>();
#if defined(__x86_64__)
  const bool fused = kernel_isa() != "baseline";
#else
  const bool fused = true;
#endif
  std::vector<float> c(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) {
        const float x = av[i * k + p], y = bv[p * n + j];
        if (fused) {
          acc = std::fma(x, y, acc);
        } else {
          volatile float prod = x * y;  // rounded before the sum
          acc = prod + acc;
        }
      }
      c[i * n + j] = acc;
    }
  return c;
}
}  // namespace

// Products with few columns (attention's per head) take a kernel of their own; each output must
// still be the one chain, whatever b's layout (rows contiguous, columns contiguous, neither),
// the row count, the place in the batch and the thread count.
TEST_CASE("narrow float products: one multiply-add chain per output, batched or alone") {
  manual_seed(5);
  int mismatched = 0, checked = 0;
  for (int64_t m : {1, 7, 9, 32, 37})
    for (int64_t k : {1, 3, 16, 33})
      for (int64_t n : {1, 5, 16, 17, 32, 40, 64, 65}) {
        CAPTURE(m);
        CAPTURE(k);
        CAPTURE(n);
        const int64_t bt = 3;
        const Tensor a = randn({bt, m, k});
        const Tensor bs[] = {randn({bt, k, n}), randn({bt, n, k}).transpose(1, 2),
                             randn({bt, k, 2 * n}).slice(2, 0, 2 * n, 2),
                             randn({bt, n, 2 * k}).transpose(1, 2).slice(1, 0, 2 * k, 2)};
        for (const Tensor& b : bs) {
          const Tensor a_t = a.transpose(1, 2).contiguous().transpose(1, 2);
          const Tensor batch = matmul(a, b), batch_at = matmul(a_t, b);
          set_num_threads(2);
          const Tensor two = matmul(a, b);
          set_num_threads(1);
          for (int64_t i = 0; i < bt; ++i) {
            const std::vector<float> want = chain_mm(a[i], b[i]);
            for (const Tensor& got : {batch[i], batch_at[i], two[i], matmul(a[i], b[i])}) {
              mismatched += got.contiguous().to_vector<float>() != want;
              ++checked;
            }
          }
        }
      }
  CHECK(checked == 5 * 4 * 8 * 4 * 3 * 4);
  CHECK(mismatched == 0);
}

// MultiheadAttention's per-head products on views of a fused q/k/v projection [N, L, 3, H, D]
// (two batch dims, rows 3E apart), as an ensemble's vmap folds its sets into N
TEST_CASE("attention's per-head products on a fused projection: the chain per head") {
  manual_seed(6);
  const int64_t N = 5, L = 9, H = 4, D = 16;
  const Tensor qkv = randn({N, L, 3, H, D}).permute({0, 3, 2, 1, 4});  // [N, H, 3, L, D]
  const Tensor q = qkv.select(2, 0), k = qkv.select(2, 1), v = qkv.select(2, 2);
  const Tensor scores = matmul(q, k.transpose(-2, -1));  // [N, H, L, L]
  const Tensor w = softmax(scores, -1);
  const Tensor out = matmul(w, v);  // [N, H, L, D]
  int mismatched = 0;
  for (int64_t i = 0; i < N; ++i)
    for (int64_t h = 0; h < H; ++h) {
      mismatched += scores[i][h].contiguous().to_vector<float>() !=
                    chain_mm(q[i][h], k[i][h].transpose(0, 1));
      mismatched += out[i][h].contiguous().to_vector<float>() != chain_mm(w[i][h], v[i][h]);
      // a set alone: its own [H, L, D] views
      mismatched += !equal(matmul(q[i], k[i].transpose(-2, -1)), scores[i]);
      mismatched += !equal(matmul(w[i], v[i]), out[i]);
    }
  CHECK(mismatched == 0);
}
