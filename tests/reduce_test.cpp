// Reductions and softmax against naive loops and hand values.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "engine/engine.h"
#include "tests/test_util.h"

using namespace td;
using namespace td::test;

namespace {


// x[i][j][k] = (i * 7 + j * 3 + k * 5) % 11 - 4, shape [2, 3, 4]
Tensor cube() {
  std::vector<float> v;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) v.push_back(static_cast<float>((i * 7 + j * 3 + k * 5) % 11 - 4));
  return tensor(v, {2, 3, 4});
}
float cube_at(int i, int j, int k) { return static_cast<float>((i * 7 + j * 3 + k * 5) % 11 - 4); }

}  // namespace

TEST_CASE("sum and mean over dims against a naive loop") {
  Tensor x = cube();
  CHECK(sum(x).dim() == 0);
  float total = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) total += cube_at(i, j, k);
  CHECK(sum(x).item<float>() == doctest::Approx(total));
  CHECK(mean(x).item<float>() == doctest::Approx(total / 24));

  Tensor s1 = sum(x, {1});
  CHECK(s1.shape() == Shape{2, 4});
  auto v1 = s1.to_vector<float>();
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      float r = 0;
      for (int j = 0; j < 3; ++j) r += cube_at(i, j, k);
      CHECK(v1[i * 4 + k] == doctest::Approx(r));
    }
  Tensor s02 = x.sum({0, -1}, true);
  CHECK(s02.shape() == Shape{1, 3, 1});
  auto v02 = s02.to_vector<float>();
  for (int j = 0; j < 3; ++j) {
    float r = 0;
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k) r += cube_at(i, j, k);
    CHECK(v02[j] == doctest::Approx(r));
  }
  auto m2 = mean(x, {2}).to_vector<float>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      float r = 0;
      for (int k = 0; k < 4; ++k) r += cube_at(i, j, k);
      CHECK(m2[i * 3 + j] == doctest::Approx(r / 4));
    }
}

TEST_CASE("reductions of non-contiguous inputs") {
  Tensor x = cube();
  Tensor p = x.permute({2, 0, 1});  // [4, 2, 3]
  auto v = sum(p, {0}).to_vector<float>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      float r = 0;
      for (int k = 0; k < 4; ++k) r += cube_at(i, j, k);
      CHECK(v[i * 3 + j] == doctest::Approx(r));
    }
  Tensor e = tensor({1.f, 2.f}).unsqueeze(1).expand({2, 5});
  CHECK(sum(e, {1}).to_vector<float>() == std::vector<float>{5.f, 10.f});
  Tensor s = arange(0, 10, 1, kFloat32).slice(0, 1, std::nullopt, 3);  // 1 4 7
  CHECK(sum(s).item<float>() == 12.f);
  CHECK(amax(s).item<float>() == 7.f);
}

TEST_CASE("sum dtypes") {
  CHECK(sum(tensor<bool>({true, true, false})).dtype() == kInt64);
  CHECK(sum(tensor<bool>({true, true, false})).item<int64_t>() == 2);
  CHECK(sum(tensor<int64_t>({4, 5})).item<int64_t>() == 9);
  CHECK(sum(tensor<double>({0.5})).dtype() == kFloat64);
  CHECK_THROWS_AS(mean(tensor<int64_t>({1, 2})), TypeError);
  check_throws_naming_op<TypeError>([] { mean(tensor<int64_t>({1, 2})); }, "mean");
  CHECK_THROWS_AS(var(tensor<int64_t>({1, 2})), TypeError);
  CHECK_THROWS_AS(td::std(tensor<bool>({true})), TypeError);
}

TEST_CASE("var and std, biased and unbiased") {
  Tensor x = tensor({1.f, 2.f, 3.f, 4.f});
  // mean 2.5, squared deviations sum 5
  CHECK(var(x).item<float>() == doctest::Approx(5.0 / 3));
  CHECK(var(x, {}, false).item<float>() == doctest::Approx(5.0 / 4));
  CHECK(td::std(x).item<float>() == doctest::Approx(std::sqrt(5.0 / 3)));
  CHECK(td::std(x, {0}, false).item<float>() == doctest::Approx(std::sqrt(5.0 / 4)));
  Tensor m = tensor({1.f, 3.f, 2.f, 6.f}, {2, 2});
  auto v0 = var(m, {0}).to_vector<float>();  // columns [1,2], [3,6]: 0.5, 4.5
  CHECK(v0[0] == doctest::Approx(0.5));
  CHECK(v0[1] == doctest::Approx(4.5));
  CHECK(var(m, {1}, true, true).shape() == Shape{2, 1});
  CHECK(std::isnan(var(tensor({1.f})).item<float>()));  // unbiased with one element
}

TEST_CASE("amax amin argmax argmin") {
  Tensor x = cube();
  auto mx = amax(x, {1}).to_vector<float>();
  auto mn = amin(x, {1}).to_vector<float>();
  auto am = argmax(x, 1).to_vector<int64_t>();
  auto an = argmin(x, 1).to_vector<int64_t>();
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      float best = cube_at(i, 0, k), worst = best;
      int64_t bi = 0, wi = 0;
      for (int j = 1; j < 3; ++j) {
        float v = cube_at(i, j, k);
        if (v > best) best = v, bi = j;
        if (v < worst) worst = v, wi = j;
      }
      CHECK(mx[i * 4 + k] == best);
      CHECK(mn[i * 4 + k] == worst);
      CHECK(am[i * 4 + k] == bi);
      CHECK(an[i * 4 + k] == wi);
    }
  Tensor t = tensor({3.f, 9.f, 9.f, -1.f, -1.f}, {5});
  CHECK(argmax(t).item<int64_t>() == 1);  // first occurrence
  CHECK(argmin(t).item<int64_t>() == 3);
  CHECK(argmax(t).dtype() == kInt64);
  Tensor m = tensor({1.f, 8.f, 3.f, 9.f, 0.f, 2.f}, {2, 3});
  CHECK(argmax(m).item<int64_t>() == 3);  // flattened
  CHECK(argmax(m, std::nullopt, true).shape() == Shape{1, 1});
  CHECK(argmax(m, -1, true).shape() == Shape{2, 1});
  CHECK(argmax(m, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0});
  CHECK(amax(m, {0, 1}).item<float>() == 9.f);
  CHECK(amax(tensor<int64_t>({3, -7})).item<int64_t>() == 3);
  CHECK(amin(tensor<int64_t>({3, -7})).dtype() == kInt64);
}

TEST_CASE("empty reductions and dim errors") {
  Tensor e = zeros({0, 3});
  CHECK(sum(e).item<float>() == 0.f);
  CHECK(sum(e, {0}).to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(sum(e, {1}).shape() == Shape{0});
  CHECK(amax(e, {1}).shape() == Shape{0});
  CHECK_THROWS_AS(amax(e, {0}), ValueError);
  check_throws_naming_op<ValueError>([&] { amax(e); }, "amax");
  CHECK_THROWS_AS(argmax(e), ValueError);
  CHECK_THROWS_AS(amin(zeros({0})), ValueError);
  Tensor x = zeros({2, 3});
  CHECK_THROWS_AS(sum(x, {2}), IndexError);
  check_throws_naming_op<IndexError>([&] { sum(x, {-3}); }, "sum");
  CHECK_THROWS_AS(sum(x, {1, -1}), ValueError);
  check_throws_naming_op<ValueError>([&] { mean(x, {0, 0}); }, "mean");
  CHECK_THROWS_AS(argmax(x, 5), IndexError);
  // 0-d input
  Tensor s = scalar_tensor(2.5);
  CHECK(sum(s).item<float>() == 2.5f);
  CHECK(sum(s, {0}).item<float>() == 2.5f);
  CHECK(argmax(s).item<int64_t>() == 0);
}

TEST_CASE("softmax and log_softmax") {
  Tensor x = tensor({1.f, 2.f, 3.f, 0.f, 0.f, 0.f}, {2, 3});
  auto s = softmax(x, 1).to_vector<float>();
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  CHECK(s[0] == doctest::Approx(std::exp(1.0) / z));
  CHECK(s[2] == doctest::Approx(std::exp(3.0) / z));
  CHECK(s[4] == doctest::Approx(1.0 / 3));
  auto ls = log_softmax(x, -1).to_vector<float>();
  CHECK(ls[1] == doctest::Approx(2.0 - std::log(z)));
  auto s0 = softmax(x, 0).to_vector<float>();
  CHECK(s0[0] == doctest::Approx(std::exp(1.0) / (std::exp(1.0) + 1)));
  CHECK(s0[3] == doctest::Approx(1 / (std::exp(1.0) + 1)));
  // stable for huge inputs
  auto big = softmax(tensor({1000.f, 1000.f}), 0).to_vector<float>();
  CHECK(big[0] == doctest::Approx(0.5));
  auto lbig = log_softmax(tensor({1000.f, 0.f}), 0).to_vector<float>();
  CHECK(lbig[0] == doctest::Approx(0.0));
  CHECK(lbig[1] == doctest::Approx(-1000.0));
  // transposed input
  auto st = softmax(x.t(), 0).to_vector<float>();  // [3, 2], columns are x's rows
  CHECK(st[0] == doctest::Approx(std::exp(1.0) / z));
  CHECK(st[1] == doctest::Approx(1.0 / 3));
  CHECK(softmax(tensor<double>({0.0, 0.0}), 0).dtype() == kFloat64);
  CHECK(softmax(scalar_tensor(3.0), 0).item<float>() == 1.f);
  CHECK_THROWS_AS(softmax(tensor<int64_t>({1, 2}), 0), TypeError);
  check_throws_naming_op<TypeError>([] { log_softmax(tensor<int64_t>({1}), 0); }, "log_softmax");
  CHECK_THROWS_AS(softmax(x, 2), IndexError);
}

TEST_CASE("reductions are counted") {
  Tensor x = ones({3, 4});
  reset_kernel_counts();
  sum(x, {1});
  CHECK(kernel_count(KernelKind::Reduce) == 1);
}
