// matmul and linear against a naive triple loop and hand values: every rank combination,
// broadcast batch dims, non-contiguous operands, dtypes, empty dims, errors, kernel counts.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/kernels/kernels.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {

// Deterministic, non-trivial values (no RNG involved).
Tensor seq(const Shape& shape, DType dtype = kFloat64, double scale = 0.37) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(scale * static_cast<double>(i) + 0.1);
  return tensor<double>(v, shape).to(dtype);
}

// C[M,N] = A[M,K] @ B[K,N] on row-major vectors.
std::vector<double> ref_mm(const std::vector<double>& a, const std::vector<double>& b, int64_t m,
                           int64_t k, int64_t n) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) c[i * n + j] += a[i * k + p] * b[p * n + j];
  return c;
}

void check_close(const Tensor& t, const std::vector<double>& ref, double tol = 1e-5) {
  std::vector<double> got = t.to_vector<double>();
  REQUIRE(got.size() == ref.size());
  for (size_t i = 0; i < ref.size(); ++i) CHECK(got[i] == doctest::Approx(ref[i]).epsilon(tol));
}


}  // namespace

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

TEST_CASE("linear against x @ w^T + b") {
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = seq({2, 3, 4}, dt);
    Tensor w = seq({5, 4}, dt, 0.61);
    Tensor b = seq({5}, dt, 1.7);
    Tensor y = linear(x, w, b);
    CHECK(y.shape() == Shape{2, 3, 5});
    CHECK(y.dtype() == dt);
    auto xv = x.to_vector<double>(), wt = w.t().to_vector<double>(), bv = b.to_vector<double>();
    auto ref = ref_mm(xv, wt, 6, 4, 5);
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t c = 0; c < 5; ++c) ref[r * 5 + c] += bv[c];
    check_close(y, ref, dt == kFloat32 ? 1e-4 : 1e-12);
    // No bias.
    check_close(linear(x, w), ref_mm(xv, wt, 6, 4, 5), dt == kFloat32 ? 1e-4 : 1e-12);
  }
  // Hand values: [1, 2] @ [[1, 0], [1, 1], [2, -1]]^T + [0, 1, 2] = [1, 4, 2].
  Tensor y = linear(tensor({1.f, 2.f}), tensor({1.f, 0.f, 1.f, 1.f, 2.f, -1.f}, {3, 2}),
                    tensor({0.f, 1.f, 2.f}));
  CHECK(y.shape() == Shape{3});
  CHECK(y.to_vector<float>() == std::vector<float>{1.f, 4.f, 2.f});
}

TEST_CASE("linear with non-contiguous weight, input and bias") {
  Tensor wt = seq({4, 5});
  Tensor w = wt.t();                                                   // [5, 4], transposed storage
  Tensor x = seq({6, 8}, kFloat64, 0.3).slice(1, 0, std::nullopt, 2);  // [6, 4], step 2
  Tensor b = seq({10}, kFloat64, 0.5).slice(0, 0, std::nullopt, 2);    // [5], step 2
  Tensor y = linear(x, w, b);
  auto ref = ref_mm(x.to_vector<double>(), wt.to_vector<double>(), 6, 4, 5);
  auto bv = b.to_vector<double>();
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c = 0; c < 5; ++c) ref[r * 5 + c] += bv[c];
  check_close(y, ref, 1e-12);
  // Expanded bias (stride 0) and an expanded input.
  Tensor be = seq({1}).expand({5});
  Tensor xe = seq({1, 4}).expand({3, 4});
  Tensor ye = linear(xe, w, be);
  auto ref2 = ref_mm(xe.to_vector<double>(), wt.to_vector<double>(), 3, 4, 5);
  double b0 = be.to_vector<double>()[0];
  for (auto& v : ref2) v += b0;
  check_close(ye, ref2, 1e-12);
  // Stacked ensemble weights [B*out, in] as one matrix.
  Tensor stacked = seq({3, 2, 4}).reshape({6, 4});
  CHECK(linear(x, stacked).shape() == Shape{6, 6});
}

TEST_CASE("linear dtypes, empty dims and one GEMM per call") {
  Tensor xi = tensor<int64_t>({1, 2}, {1, 2});
  Tensor wi = tensor<int64_t>({3, 4, 5, 6}, {2, 2});
  Tensor yi = linear(xi, wi, tensor<int64_t>({1, 1}));
  CHECK(yi.dtype() == kInt64);
  CHECK(yi.to_vector<int64_t>() == std::vector<int64_t>{12, 18});
  CHECK(linear(ones({2, 3}), ones({4, 3}, kFloat64)).dtype() == kFloat64);

  CHECK(linear(ones({0, 3}), ones({4, 3})).shape() == Shape{0, 4});
  CHECK(linear(ones({2, 0, 3}), ones({4, 3})).shape() == Shape{2, 0, 4});
  Tensor e = linear(ones({2, 0}), ones({3, 0}), tensor({1.f, 2.f, 3.f}));
  CHECK(e.shape() == Shape{2, 3});
  CHECK(e.to_vector<float>() == std::vector<float>{1.f, 2.f, 3.f, 1.f, 2.f, 3.f});

  Tensor x = seq({4, 3, 8}, kFloat32), w = seq({16, 8}, kFloat32), b = seq({16}, kFloat32);
  reset_kernel_counts();
  Tensor y = linear(x, w, b);
  CHECK(kernel_count(KernelKind::Gemm) == 1);
  CHECK(y.shape() == Shape{4, 3, 16});
}

TEST_CASE("linear with a 1-D weight is x @ weight, as in torch") {
  // [[1, 2, 3], [4, 5, 6]] @ [1, 0, -1] = [-2, -2]; a row [1, 2, 3] gives a 0-d -2
  Tensor x = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  Tensor w = tensor({1.f, 0.f, -1.f});
  Tensor y = linear(x, w);
  CHECK(y.shape() == Shape{2});
  CHECK(y.to_vector<float>() == std::vector<float>{-2.f, -2.f});
  CHECK(linear(x[0], w).shape() == Shape{});
  CHECK(linear(x[0], w).item<float>() == -2.f);
  CHECK(linear_relu(x, w).to_vector<float>() == std::vector<float>{0.f, 0.f});
  CHECK(linear(x.view({1, 2, 3}), w).shape() == Shape{1, 2});
}

TEST_CASE("linear with a 1-D weight and a bias: inputs of 1 or at least 4 dims, as in torch") {
  // torch 1.13 adds the bias in place to x @ weight, except on its addmm path (2-D and 3-D
  // inputs), which refuses a 1-D weight:
  //   F.linear(torch.tensor([1., 2, 3]), torch.tensor([4., 5, 6]), torch.tensor(0.5)) -> 32.5
  Tensor w = tensor({4.f, 5.f, 6.f});
  Tensor y1 = linear(tensor({1.f, 2.f, 3.f}), w, scalar_tensor(0.5f));
  CHECK(y1.shape() == Shape{});
  CHECK(y1.item<float>() == 32.5f);
  //   F.linear(torch.arange(24.).view(2, 1, 4, 3), torch.tensor([1., -1, 2]),
  //            torch.tensor([10., 20, 30, 40])) -> [[[13, 29, 45, 61]], [[37, 53, 69, 85]]]
  Tensor x4 = arange(24).to(kFloat32).view({2, 1, 4, 3});
  Tensor w4 = tensor({1.f, -1.f, 2.f});
  Tensor y4 = linear(x4, w4, tensor({10.f, 20.f, 30.f, 40.f}));
  CHECK(y4.shape() == Shape{2, 1, 4});
  CHECK(y4.to_vector<float>() == std::vector<float>{13, 29, 45, 61, 37, 53, 69, 85});
  CHECK(linear_relu(x4, w4, scalar_tensor(-20.f)).to_vector<float>() ==
        std::vector<float>{0, 0, 0, 1, 7, 13, 19, 25});
  // 5-D, bias [1] and [2, 1] (torch: shapes [2, 1, 2, 2]), against the loop
  Tensor x5 = seq({2, 1, 2, 2, 3}, kFloat64);
  Tensor w5 = seq({3}, kFloat64, 1.3);
  Tensor b5 = tensor<double>({0.25, -1.5}, {2, 1});
  Tensor y5 = linear(x5, w5, b5);
  REQUIRE(y5.shape() == Shape{2, 1, 2, 2});
  std::vector<double> xv = x5.to_vector<double>(), wv = w5.to_vector<double>(), ref(8, 0.0);
  for (size_t r = 0; r < 8; ++r) {
    for (size_t k = 0; k < 3; ++k) ref[r] += xv[r * 3 + k] * wv[k];
    ref[r] += (r / 2) % 2 == 0 ? 0.25 : -1.5;  // b5 broadcasts along the output's dim 2
  }
  check_close(y5, ref, 1e-12);
  CHECK(linear(x5, w5, ones({1}, kFloat64)).shape() == Shape{2, 1, 2, 2});
  // the output keeps x @ weight's dtype, as torch's in-place add (float64 bias, int64 bias)
  CHECK(linear(x4, w4, scalar_tensor(1.0, kFloat64)).dtype() == kFloat32);
  Tensor xi = arange(24).view({2, 1, 4, 3}), wi = tensor<int64_t>({1, -1, 2});
  Tensor yi = linear(xi, wi, tensor<int64_t>({10, 20, 30, 40}));
  CHECK(yi.dtype() == kInt64);
  CHECK(yi.to_vector<int64_t>() == std::vector<int64_t>{13, 29, 45, 61, 37, 53, 69, 85});
  // torch: "result type Float can't be cast to the desired output type Long"
  check_throws_mentioning<TypeError>([&] { linear(xi, wi, scalar_tensor(1.5f)); }, "[linear]");
  CHECK(linear(zeros({0, 4, 5, 3}), w, scalar_tensor(1.f)).shape() == Shape{0, 4, 5});
  // 2-D and 3-D inputs: torch's "mat2 must be a matrix, got 1-D tensor"
  check_throws_mentioning<ValueError>(
      [&] {
        linear(ones({2, 3}), w, ones({1}));
      },
      "[linear] a 1-D weight takes a bias only with an input of 1 "
      "or at least 4 dims (as in torch), got input of shape [2, 3]");
  CHECK_THROWS_AS(linear(ones({2, 4, 3}), w, scalar_tensor(1.f)), ValueError);
  CHECK_THROWS_AS(linear_relu(ones({2, 4, 3}), w, scalar_tensor(1.f)), ValueError);
  // a bias that does not broadcast to the output, or would grow it (torch: "output with shape
  // [] doesn't match the broadcast shape [1]", "... [2, 1, 4] ... [1, 2, 1, 4]")
  check_throws_mentioning<ValueError>([&] { linear(ones({3}), w, ones({1})); },
                                      "[linear] bias of shape [1] does not broadcast to the output "
                                      "of shape []");
  CHECK_THROWS_AS(linear(x4, w4, ones({1, 2, 1, 4})), ValueError);
  CHECK_THROWS_AS(linear(x4, w4, ones({3})), ValueError);
  CHECK_THROWS_AS(linear(x4, ones({4}), scalar_tensor(1.f)), ValueError);
}

TEST_CASE("vmap: linear with a 1-D weight and a bias is the stacked per-set calls") {
  // per-set 4-D inputs; per-set weights and biases; a shared x with per-set biases
  Tensor x = seq({3, 2, 1, 2, 3}, kFloat32), w = seq({3, 3}, kFloat32, 0.9);
  Tensor b = seq({3, 2}, kFloat32, 0.4);
  auto f = [](Tensor xs, Tensor ws, Tensor bs) { return linear(xs, ws, bs); };
  for (auto in_dims : {std::vector<std::optional<int64_t>>{0, 0, 0},
                       std::vector<std::optional<int64_t>>{0, std::nullopt, std::nullopt},
                       std::vector<std::optional<int64_t>>{std::nullopt, std::nullopt, 0}}) {
    auto arg = [&](const Tensor& t, size_t k) { return in_dims[k] ? t : t[1]; };
    Tensor y = vmap(f, {.in_dims = in_dims})(arg(x, 0), arg(w, 1), arg(b, 2));
    REQUIRE(y.shape() == Shape{3, 2, 1, 2});
    for (int64_t i = 0; i < 3; ++i) {
      auto set = [&](const Tensor& t, size_t k) { return in_dims[k] ? t[i] : t[1]; };
      CHECK(allclose(y[i], linear(set(x, 0), set(w, 1), set(b, 2))));
    }
  }
  // what a call per set refuses: a per-set 2-D input, a per-set bias [1] on a 0-d output
  // (functorch's vmap returns [B, 1] for the latter, unlike its call per set)
  CHECK_THROWS_AS(vmap(f)(ones({3, 2, 3}), ones({3, 3}), ones({3, 1})), ValueError);
  CHECK_THROWS_AS(vmap(f)(ones({3, 3}), ones({3, 3}), ones({3, 1})), ValueError);
  CHECK(vmap(f)(ones({3, 3}), ones({3, 3}), ones({3})).shape() == Shape{3});
}

TEST_CASE("linear takes a bias of shape [out] only, as the README says") {
  // a one-element bias ([] or [1]) was broadcast to every output, as torch does
  Tensor x = seq({3, 4}, kFloat32), w = seq({5, 4}, kFloat32, 0.7);
  for (const Tensor& b : {scalar_tensor(2.5), tensor<float>({2.5f}), ones({2}), ones({3, 5})}) {
    CAPTURE(b.shape());
    const std::string shapes = "bias of shape " + shape_str(b.shape()) +
                               " does not match weight of shape [5, 4] (expected [5])";
    check_throws_mentioning<ValueError>([&] { linear(x, w, b); }, "[linear] " + shapes);
    check_throws_mentioning<ValueError>([&] { linear_relu(x, w, b); }, "[linear] " + shapes);
  }
  // under vmap: a per-set scalar bias is refused as the set's own call would be
  Tensor ws = seq({2, 5, 4}, kFloat32, 0.3), bs = tensor<float>({1.0f, -4.0f});
  auto per_set = [](Tensor w1, Tensor b1) { return linear(ones({3, 4}), w1, b1); };
  check_throws_mentioning<ValueError>([&] { vmap(per_set)(ws, bs); }, "[linear] bias");
  // one output: [1] is [out]
  const Tensor w1 = seq({1, 4}, kFloat32, 0.7);
  const Tensor y = linear(x, w1, tensor<float>({2.5f}));
  CHECK(allclose(y, add(linear(x, w1), 2.5)));
}

TEST_CASE("linear errors") {
  check_throws_mentioning<ValueError>([] { linear(ones({2, 3}), ones({4, 5})); }, "[linear]");
  check_throws_mentioning<ValueError>([] { linear(ones({2, 3}), ones({4, 5})); }, "[4, 5]");
  check_throws_mentioning<ValueError>(
      [] {
        linear(ones({2, 3}), ones({4}));
      },
      "[linear] input of shape [2, 3] does not match weight of "
      "shape [4]");
  check_throws_mentioning<ValueError>(
      [] {
        linear(ones({2, 3}), ones({2, 4, 3}));
      },
      "[linear] weight must be");
  check_throws_mentioning<ValueError>(
      [] {
        linear(ones({2, 3}), ones({4, 3}), ones({5}));
      },
      "bias");
  CHECK_THROWS_AS(linear(scalar_tensor(1.0), ones({1, 1})), ValueError);
  Tensor bl = tensor<bool>({true, false}, {1, 2});
  // one message for every op without a bool kernel (torch: "addmm_impl_cpu_" not implemented
  // for 'Bool')
  check_throws_mentioning<TypeError>(
      [&] { linear(bl, bl); },
      "[linear] is not implemented for bool tensors (shapes [1, 2] and [1, 2])");
  check_throws_mentioning<TypeError>(
      [&] { matmul(bl, bl.t()); },
      "[matmul] is not implemented for bool tensors (shapes [1, 2] and [2, 1])");
  check_throws_mentioning<TypeError>(
      [&] { kernels::bmm(bl.unsqueeze(0), bl.t().unsqueeze(0)); },
      "[bmm] is not implemented for bool tensors (shapes [1, 1, 2] and [1, 2, 1])");
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

// kernels::gemm_nt over every tile edge of the small-matrix kernel (rows around its 6-row tile,
// remainders of 2 and 3 rows, whose tiles split the depth into even and odd steps, at odd depths,
// or with AVX-512 remainders of 1-2 joined to the last tile as 7 or 8 rows, a per-row bias too
// when the product runs transposed (5-16 columns at a depth under two vectors),
// columns around its two-vector panel and the narrow cases (1-4 columns as dot products, and
// 5-16 too with AVX-512 from a depth of two vectors, with partial last vectors and row
// remainders, or transposed when x's rows are strided), depths
// past its 16 KiB panel), its direct loop for tiny products, and the Eigen path (x over 1 MiB;
// over 256 KiB without AVX-512), against a double loop: shared and per-set operands, bias none,
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
      {1, 8, 19, 64},    {1, 7, 9, 0}};
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

// relu(NaN) is NaN; a max(v, 0) with the wrong operand order gives 0. Every path of the fused
// kernel: scalar (tiny), register tiles, dot products (1-4 output columns, 12 with AVX-512),
// BLAS (large x), float64, and batched under vmap.
TEST_CASE("linear_relu keeps a NaN in its input's row, as relu does") {
  const double nan = std::nan("");
  struct Case {
    int64_t rows, in, out;
    DType dt;
  };
  for (const Case& c :
       {Case{2, 3, 2, kFloat32}, Case{40, 8, 20, kFloat32}, Case{40, 8, 3, kFloat32},
        Case{40, 64, 12, kFloat32}, Case{300, 256, 20, kFloat32}, Case{40, 8, 20, kFloat64}}) {
    CAPTURE(c.rows);
    CAPTURE(c.out);
    Tensor x = ones({c.rows, c.in}, c.dt);
    x[1].fill_(nan);
    // bias -in - 1: every finite output is -1, so a ReLU that worked gives 0 there
    Tensor w = ones({c.out, c.in}, c.dt), b = full({c.out}, -double(c.in) - 1.0, c.dt);
    auto check = [&](const Tensor& y) {
      const auto v = y.to_vector<double>();
      for (int64_t i = 0; i < c.rows; ++i)
        for (int64_t j = 0; j < c.out; ++j) {
          const double e = v[static_cast<size_t>(i * c.out + j)];
          if (i == 1)
            CHECK(std::isnan(e));
          else
            CHECK(e == 0.0);
        }
    };
    check(linear_relu(x, w, b));
    Tensor ys = vmap([&](Tensor ws) { return linear_relu(x, ws, b); })(stack({w, w}));
    check(ys[0]);
    check(ys[1]);
  }
}

TEST_CASE("linear_relu is relu(linear) for every dtype and rank") {
  for (DType dt : {kFloat32, kFloat64, kInt64}) {
    Tensor x = (seq({2, 3, 4}, kFloat64) * 4.0).to(dt);
    Tensor w = (seq({5, 4}, kFloat64, 0.61) * 4.0).to(dt);
    Tensor b = (seq({5}, kFloat64, 1.7) * 4.0).to(dt);
    Tensor fused = linear_relu(x, w, b);
    Tensor plain = relu(linear(x, w, b));
    CHECK(fused.shape() == plain.shape());
    CHECK(fused.dtype() == dt);
    CHECK(fused.to_vector<double>() == plain.to_vector<double>());
    CHECK(linear_relu(x, w).to_vector<double>() == relu(linear(x, w)).to_vector<double>());
    // some outputs are negative before the ReLU, so it did something
    CHECK(amin(linear(x, w, b)).item<double>() < 0);
  }
  reset_kernel_counts();
  linear_relu(seq({8, 4}, kFloat32), seq({5, 4}, kFloat32));
  CHECK(kernel_count(KernelKind::Gemm) == 1);
  CHECK(kernel_count(KernelKind::Elementwise) == 0);
  check_throws_mentioning<ValueError>([] { linear_relu(ones({2, 3}), ones({4, 5})); },
                                      "[linear]");
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
