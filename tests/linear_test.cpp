// linear against x @ w^T + b and hand values: non-contiguous operands, dtypes, empty dims, one
// GEMM per call, 1-D weights and biases as in torch, under vmap, errors; linear_relu against
// relu(linear), NaN rows included.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/kernels/kernels.h"
#include "tests/tensor_values.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

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
