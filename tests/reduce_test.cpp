// Reductions against naive loops and hand values: sum, mean, var, std, amax/amin/argmax/argmin,
// all/any/max/min as torch's; dtypes, non-contiguous inputs, empty reductions, dim errors,
// integer dims, int64 wrap-around, kernel counts.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "engine/engine.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

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

TEST_CASE("argmax and argmin refuse bool tensors, max and min with a dim take them, as torch") {
  // torch: '"argmax_cpu" not implemented for 'Bool''; td gave indices
  Tensor b = tensor<bool>({false, true, true, false, false, true}, {2, 3});
  check_throws_naming_op<TypeError>([&] { argmax(b); }, "argmax");
  check_throws_mentioning<TypeError>([&] { argmin(b, 1); },
                                     "[argmin] is not implemented for bool tensors (shape [2, 3])");
  CHECK_THROWS_AS(b.argmax(0, true), TypeError);
  CHECK_THROWS_AS(vmap([](Tensor t) { return argmax(t); })(b), TypeError);
  // torch.max(b, 1) = ([true, true], [1, 2]); torch.min(b, 0) = ([false, false, true], [0, 1, 0])
  // (the first extreme of each column)
  auto [mv, mi] = max(b, 1);
  CHECK(mv.dtype() == kBool);
  CHECK(mv.to_vector<bool>() == std::vector<bool>{true, true});
  CHECK(mi.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  auto [nv, ni] = min(b, 0, true);
  CHECK(nv.shape() == Shape{1, 3});
  CHECK(nv.to_vector<bool>() == std::vector<bool>{false, false, true});
  CHECK(ni.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0});
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

TEST_CASE("reductions are counted") {
  Tensor x = ones({3, 4});
  reset_kernel_counts();
  sum(x, {1});
  CHECK(kernel_count(KernelKind::Reduce) == 1);
}

TEST_CASE("one dim as an integer, as in PyTorch; braces still list dims") {
  Tensor x = arange(24).view({2, 3, 4}).to(kFloat32);
  // by hand: sums over dim 2 of rows 0..3, 4..7, ... are 6, 22, 38, ...
  std::vector<float> want;
  for (int r = 0; r < 6; ++r) want.push_back(static_cast<float>(16 * r + 6));
  CHECK(equal(sum(x, -1), tensor(want).view({2, 3})));
  CHECK(equal(x.sum(2), sum(x, {2})));
  CHECK(equal(sum(x, 1, true), sum(x, {1}, true)));
  CHECK(sum(x, 1, true).shape() == Shape{2, 1, 4});
  CHECK(equal(x.mean(0), mean(x, {0})));
  CHECK(equal(mean(x, 0), mean(x, {0})));
  CHECK(equal(var(x, 1), var(x, {1})));
  CHECK(equal(td::std(x, 1, false), td::std(x, {1}, false)));
  CHECK(equal(amax(x, 2), amax(x, {2})));
  CHECK(equal(amin(x, -2), amin(x, {1})));
  CHECK(sum(x, {}).dim() == 0);  // {} is every dim, not dim 0
  CHECK(x.sum().item<float>() == 276.0f);
  CHECK_THROWS_AS(sum(x, 3), IndexError);
}

TEST_CASE("all, any, max and min as torch's, and the reductions as methods") {
  using B = std::vector<bool>;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = tensor({0.f, 2.f, 3.f, 4.f}, {2, 2});
  CHECK(all(x).dtype() == kBool);
  CHECK_FALSE(all(x).item<bool>());
  CHECK(any(x).item<bool>());
  CHECK(all(x, 1).to_vector<bool>() == B{false, true});
  CHECK(any(x, 0, true).shape() == Shape{1, 2});
  CHECK(x.all(0).to_vector<bool>() == B{false, true});
  CHECK(tensor({nan, 1.f}).all().item<bool>());  // NaN is nonzero
  CHECK(zeros({0}).all().item<bool>());          // of nothing: true, as torch
  CHECK_FALSE(zeros({0}).any().item<bool>());
  CHECK(all(arange(3) + 1).item<bool>());
  // a bad dim is reported as all's, any's, max's or min's own (they are built on sum and amax)
  check_throws_mentioning<IndexError>([&] { all(x, IntList{3}); }, "[all] dim 3 out of range");
  check_throws_mentioning<IndexError>([&] { any(x, IntList{-5}); }, "[any]");
  check_throws_mentioning<ValueError>([&] { all(x, IntList{0, -2}); }, "[all] dim appears");
  check_throws_mentioning<IndexError>([&] { max(x, 3); }, "[max] dim 3 out of range");
  check_throws_mentioning<IndexError>([&] { min(x, -3); }, "[min]");
  check_throws_mentioning<ValueError>(
      [] {
        max(zeros({2, 0}), 1);
      },
      "[max] cannot reduce over dim 1 of size 0");
  auto [sv, si] = max(scalar_tensor(4.0), 0);  // a 0-d input takes dim 0, as torch
  CHECK(sv.item<float>() == 4.f);
  CHECK(si.item<int64_t>() == 0);

  // [[1, 5], [7, 2]]: max over dim 0 is values [7, 5] at [1, 0]; min over dim 1 [1, 2] at [0, 1]
  Tensor m = tensor(std::vector<int64_t>{1, 5, 7, 2}, {2, 2});
  CHECK(max(m).item<int64_t>() == 7);
  CHECK(m.min().item<int64_t>() == 1);
  auto [v, i] = max(m, 0, true);
  CHECK(v.shape() == Shape{1, 2});
  CHECK(v.to_vector<int64_t>() == std::vector<int64_t>{7, 5});
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  auto [mv, mi] = m.min(1);
  CHECK(mv.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  CHECK(mi.to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  CHECK(max(tensor({1.f, 4.f}), tensor({3.f, 2.f})).to_vector<float>() ==
        std::vector<float>{3.f, 4.f});
  CHECK(min(tensor({1.f, 4.f}), tensor({3.f, 2.f})).to_vector<float>() ==
        std::vector<float>{1.f, 2.f});
  check_throws_naming_op<ValueError>([] { max(zeros({0, 2})); }, "max");
  check_throws_naming_op<ValueError>([] { zeros({0}).min(); }, "min");

  // methods are the free functions
  Tensor c = cube();
  CHECK(allclose(c.var(1), var(c, {1})));
  CHECK(allclose(c.std(-1, false, true), td::std(c, {-1}, false, true)));
  CHECK(allclose(c.amax(2), amax(c, {2})));
  CHECK(allclose(c.amin({0, 2}), amin(c, {0, 2})));
  CHECK(c.argmax(1).to_vector<int64_t>() == argmax(c, 1).to_vector<int64_t>());
  CHECK(c.argmin().item<int64_t>() == argmin(c).item<int64_t>());
  CHECK(allclose(c.softmax(-1), softmax(c, -1)));
  CHECK(allclose(c.log_softmax(0), log_softmax(c, 0)));
  CHECK(c.pow(2).to_vector<float>()[1] == cube_at(0, 0, 1) * cube_at(0, 0, 1));
  CHECK(allclose(c.pow(c.abs()), pow(c, abs(c))));
  CHECK(allclose(c.clamp(-1.0, 1.0), clamp(c, -1.0, 1.0)));
  CHECK(allclose(c.tanh(), tanh(c)));
  CHECK(allclose(c.sigmoid(), sigmoid(c)));
  // arithmetic methods, checked by hand: [1, 2] op [4, 8] and op 2
  Tensor p = tensor({1.f, 2.f}), q = tensor({4.f, 8.f});
  CHECK(p.add(q).to_vector<float>() == std::vector<float>{5.f, 10.f});
  CHECK(p.sub(q).to_vector<float>() == std::vector<float>{-3.f, -6.f});
  CHECK(p.mul(q).to_vector<float>() == std::vector<float>{4.f, 16.f});
  CHECK(p.div(q).to_vector<float>() == std::vector<float>{0.25f, 0.25f});
  CHECK(p.add(2).to_vector<float>() == std::vector<float>{3.f, 4.f});
  CHECK(p.sub(2).to_vector<float>() == std::vector<float>{-1.f, 0.f});
  CHECK(p.mul(2.5).to_vector<float>() == std::vector<float>{2.5f, 5.f});
  CHECK(tensor<int64_t>({1, 3}).div(2).to_vector<float>() == std::vector<float>{0.5f, 1.5f});
}

TEST_CASE("int64 sums wrap as PyTorch's; a huge expanded reduction is a RuntimeError") {
  const int64_t max = INT64_MAX, min = INT64_MIN;
  CHECK(tensor(std::vector<int64_t>{max, 1}).sum().item<int64_t>() == min);
  CHECK(tensor(std::vector<int64_t>{min, -1, 5}).sum().item<int64_t>() == min + 4);
  // over columns: [max, 1] + [1, max]
  CHECK(tensor(std::vector<int64_t>{max, 1, 1, max}, {2, 2}).sum(0).to_vector<int64_t>() ==
        std::vector<int64_t>{min, min});
  check_throws_naming_op<RuntimeError>([] { ones({1}).expand({int64_t{1} << 62}).sum(); }, "sum");
}
