// How ops run under vmap: an op without a rule runs per set through the fallback; ensemble
// linear is as many GEMMs as one linear, conv2d over stacked weights one convolution; views stay
// views; linear_relu, reductions along a dim and max_pool2d against the per-set calls.
#include <doctest/doctest.h>

#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "tests/tensor_values.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {
std::vector<Tensor> my_double_impl(std::span<const Tensor> in, const OpAttrs&) {
  return {mul(in[0], 2.0)};
}
}  // namespace

TEST_CASE("vmap: max_pool2d passes ceil_mode through") {
  // 3 sets of [2, 5, 5]: 2x2 windows, stride 2, ceil_mode: 3x3 per set, each equal to its own
  // call; set i's channel c is arange(25) + 25 (2i + c), so the maxima are hand values
  Tensor x = arange(150).to(kFloat32).reshape({3, 2, 5, 5});
  Tensor y = vmap([](Tensor t) { return max_pool2d(t, 2, 2, 0, 1, true); })(x);
  REQUIRE(y.shape() == Shape{3, 2, 3, 3});
  const std::vector<float> base{6, 8, 9, 16, 18, 19, 21, 23, 24};
  for (int64_t i = 0; i < 3; ++i) {
    CHECK(allclose(y[i], max_pool2d(x[i], 2, 2, 0, 1, true)));
    for (int64_t c = 0; c < 2; ++c) {
      std::vector<float> want = base;
      for (float& v : want) v += static_cast<float>(25 * (2 * i + c));
      CHECK(y[i][c].to_vector<float>() == want);
    }
  }
  // a batched 4-D input (sets folded into N), with the out -= 1 rule along H
  Tensor x4 = arange(60).to(kFloat32).reshape({2, 1, 1, 5, 6});
  Tensor y4 = vmap([](Tensor t) { return max_pool2d(t, {2, 3}, 2, {1, 0}, 1, true); })(x4);
  REQUIRE(y4.shape() == Shape{2, 1, 1, 3, 3});
  CHECK(y4[1].to_vector<float>() == std::vector<float>{32, 34, 35, 44, 46, 47, 56, 58, 59});
}

TEST_CASE("vmap: an op without a rule runs per set with a warning, or raises when disabled") {
  OpId op = register_op("vmap_test_double", &my_double_impl);
  bool no_rule = batch_rule(op) == nullptr;
  CHECK(no_rule);
  Tensor x = arange(6).view({3, 2}).to(kFloat32);
  std::ostringstream captured;
  auto* old = std::cerr.rdbuf(captured.rdbuf());
  Tensor y;
  try {
    y = vmap([&](Tensor t) { return call_op1(op, {t}); })(x);
  } catch (...) {
    std::cerr.rdbuf(old);
    throw;
  }
  std::cerr.rdbuf(old);
  CHECK(has(captured.str(), "vmap_test_double"));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) CHECK(at(y, {i, j}) == 2.0 * (i * 2 + j));
  CHECK(fallback_count(op) >= 1);
  set_vmap_fallback_enabled(false);
  std::string m = message_of([&] { vmap([&](Tensor t) { return call_op1(op, {t}); })(x); });
  set_vmap_fallback_enabled(true);
  CHECK(has(m, "vmap_test_double"));
  set_vmap_fallback_enabled(false);
  CHECK_THROWS_AS(vmap([&](Tensor t) { return call_op1(op, {t}); })(x), RuntimeError);
  set_vmap_fallback_enabled(true);
}

TEST_CASE("vmap: ensemble linear over 64 stacked weights is as many GEMMs as one linear") {
  manual_seed(11);
  constexpr int64_t b = 64, n = 10, in = 3, out = 4;
  Tensor x = randn({n, in}), w = randn({b, out, in}), bias = randn({b, out});
  reset_kernel_counts();
  Tensor single = linear(x, w.select(0, 0), bias.select(0, 0));
  int64_t gemm_one = kernel_count(KernelKind::Gemm);
  int64_t copy_one = kernel_count(KernelKind::Copy);
  reset_kernel_counts();
  auto ens = vmap([](Tensor xx, Tensor ww, Tensor bb) { return linear(xx, ww, bb); },
                  {.in_dims = {std::nullopt, 0, 0}});
  Tensor y = ens(x, w, bias);
  CHECK(gemm_one >= 1);
  CHECK(kernel_count(KernelKind::Gemm) == gemm_one);
  CHECK(kernel_count(KernelKind::Copy) == copy_one);  // no copy of the stacked weights
  REQUIRE(y.shape() == Shape{b, n, out});
  CHECK(allclose(y.select(0, 0), single, 1e-5, 1e-6));
  // naive check of one set
  auto xv = x.to_vector<float>(), wv = w.to_vector<float>(), bv = bias.to_vector<float>();
  for (int64_t s : {int64_t{5}, int64_t{63}})
    for (int64_t i = 0; i < n; ++i)
      for (int64_t o = 0; o < out; ++o) {
        double acc = bv[s * out + o];
        for (int64_t k = 0; k < in; ++k) acc += double(xv[i * in + k]) * wv[(s * out + o) * in + k];
        CHECK(at(y, {s, i, o}) == doctest::Approx(acc).epsilon(1e-5));
      }
  // per-set inputs and stacked weights: a batched GEMM (one launch)
  reset_kernel_counts();
  Tensor xs = randn({b, n, in});
  Tensor y2 = vmap([](Tensor xx, Tensor ww, Tensor bb) { return linear(xx, ww, bb); })(xs, w, bias);
  CHECK(kernel_count(KernelKind::Gemm) == 1);
  for (int64_t s : {int64_t{0}, int64_t{33}})
    CHECK(allclose(y2.select(0, s), linear(xs.select(0, s), w.select(0, s), bias.select(0, s)),
                   1e-5, 1e-6));
}

TEST_CASE("vmap: view ops stay views of the input") {
  Tensor x = arange(24).view({4, 2, 3}).to(kFloat32);
  // per set s (mapped over the last dim): t = x[:, :, s] of shape [4, 2]
  Tensor y = vmap(
      [](Tensor t) {
        return t.transpose(0, 1).unsqueeze(0).expand({3, 2, 4}).select(0, 1).slice(1, 1, 3);
      },
      {.in_dims = {-1}})(x);
  CHECK(y.shares_storage(x));
  REQUIRE(y.shape() == Shape{3, 2, 2});
  // y[s][i][j] = t[j + 1][i] = x[j + 1][i][s] = (j + 1) * 6 + i * 3 + s
  for (int s = 0; s < 3; ++s)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) CHECK(at(y, {s, i, j}) == (j + 1) * 6 + i * 3 + s);
}

TEST_CASE("vmap: conv2d over stacked weights is one convolution") {
  manual_seed(8);
  constexpr int64_t b = 4;
  Tensor x = randn({2, 3, 6, 6}), w = randn({b, 5, 3, 3, 3}), bias = randn({b, 5});
  reset_kernel_counts();
  conv2d(x, w.select(0, 0), bias.select(0, 0));
  int64_t conv_one = kernel_count(KernelKind::Conv);
  reset_kernel_counts();
  Tensor y = vmap(
      [](Tensor xx, Tensor ww, Tensor bb) {
        return conv2d(xx, ww, bb, {1, 1}, {1, 1});
      },
      {.in_dims = {std::nullopt, 0, 0}})(x, w, bias);
  CHECK(kernel_count(KernelKind::Conv) == conv_one);
  REQUIRE(y.shape() == Shape{b, 2, 5, 6, 6});
  for (int64_t s = 0; s < b; ++s)
    CHECK(allclose(y.select(0, s), conv2d(x, w.select(0, s), bias.select(0, s), {1, 1}, {1, 1}),
                   1e-5, 1e-5));
  // per-set inputs too: the groups trick, still one convolution
  Tensor xs = randn({b, 2, 3, 6, 6});
  reset_kernel_counts();
  Tensor y2 = vmap([](Tensor xx, Tensor ww) { return conv2d(xx, ww); })(xs, w);
  CHECK(kernel_count(KernelKind::Conv) == conv_one);
  for (int64_t s = 0; s < b; ++s)
    CHECK(allclose(y2.select(0, s), conv2d(xs.select(0, s), w.select(0, s)), 1e-5, 1e-5));
}

// Every batching of (x, w, b) for linear_relu, and a nested level, against relu(linear) per set.
TEST_CASE("vmap: linear_relu over every stacking of input, weight and bias") {
  manual_seed(5);
  constexpr int64_t b = 3, n = 7, in = 5, out = 9;
  using OptDim = std::optional<int64_t>;
  for (OptDim xd : {OptDim{}, OptDim{0}, OptDim{1}})
    for (OptDim wd : {OptDim{}, OptDim{0}})
      for (int bias_kind : {0, 1, 2}) {  // none, shared, stacked
        if (!xd && !wd && bias_kind != 2) continue;  // nothing batched
        CAPTURE(xd.has_value());
        CAPTURE(wd.has_value());
        CAPTURE(bias_kind);
        Tensor x = !xd ? randn({n, in}) : *xd == 0 ? randn({b, n, in}) : randn({n, b, in});
        Tensor w = wd ? randn({b, out, in}) : randn({out, in});
        Tensor bias = bias_kind == 2 ? randn({b, out}) : randn({out});
        OptDim bd = bias_kind == 2 ? OptDim{0} : OptDim{};
        auto per_set = [&](int64_t s) {
          Tensor xs = xd ? x.select(*xd, s) : x;
          Tensor ws = wd ? w.select(0, s) : w;
          Tensor bs = bias_kind == 0 ? Tensor() : bd ? bias.select(0, s) : bias;
          return relu(linear(xs, ws, bs));
        };
        Tensor y = vmap([&](Tensor xx, Tensor ww, Tensor bb) {
          return linear_relu(xx, ww, bias_kind == 0 ? Tensor() : bb);
        }, {.in_dims = {xd, wd, bd}})(x, w, bias);
        REQUIRE(y.shape() == Shape{b, n, out});
        for (int64_t s = 0; s < b; ++s) CHECK(allclose(y.select(0, s), per_set(s), 1e-5, 1e-5));
        CHECK(amin(y).item<float>() >= 0.0f);
      }
  // an outer level over x around an inner level over the weights: the inner rule sees x still
  // batched at the outer level and must leave it to that level's rules
  Tensor x2 = randn({2, n, in}), w2 = randn({b, out, in}), b2 = randn({b, out});
  Tensor nested = vmap([&](Tensor xx) {
    return vmap([&](Tensor ww, Tensor bb) { return linear_relu(xx, ww, bb); })(w2, b2);
  })(x2);
  // stacked weights: the rule checks per-set shapes and dtypes as linear does
  auto stacked = vmap([](Tensor xx, Tensor ww) { return linear_relu(xx, ww); });
  std::string msg = message_of([&] { stacked(randn({b, n, in}), randn({b, out, in + 1})); });
  CHECK(has(msg, "[linear]"));
  CHECK(has(msg, "per-set shape [7, 5]"));
  CHECK(has(msg, "per-set shape [9, 6]"));
  CHECK_THROWS_AS(stacked(randn({b, n, in}), randn({b, out, in + 1})), ValueError);
  CHECK_THROWS_AS(stacked(ones({b, n, in}, kBool), ones({b, out, in}, kBool)), TypeError);
  REQUIRE(nested.shape() == Shape{2, b, n, out});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t s = 0; s < b; ++s)
      CHECK(allclose(nested.select(0, i).select(0, s),
                     relu(linear(x2.select(0, i), w2.select(0, s), b2.select(0, s))), 1e-5, 1e-5));
}

TEST_CASE("vmap: all, any and max along a dim are per set, as a loop over the sets") {
  Tensor x = tensor({0.f, 2.f, 3.f, 4.f, 0.f, 0.f, 5.f, 1.f}, {2, 2, 2});
  Tensor a = vmap([](Tensor t) { return t.all(); })(x);
  Tensor n = vmap([](Tensor t) { return any(t, 1); })(x);
  auto mx = vmap([](Tensor t) { return max(t, 0); })(x);
  for (int64_t s = 0; s < 2; ++s) {
    CHECK(a[s].item<bool>() == x[s].all().item<bool>());
    CHECK(n[s].to_vector<bool>() == any(x[s], 1).to_vector<bool>());
    auto [v, i] = max(x[s], 0);
    CHECK(std::get<0>(mx)[s].to_vector<float>() == v.to_vector<float>());
    CHECK(std::get<1>(mx)[s].to_vector<int64_t>() == i.to_vector<int64_t>());
  }
  // by hand: set 0 [[0, 2], [3, 4]] has a zero; set 1 [[0, 0], [5, 1]] has a zero row
  CHECK(a.to_vector<bool>() == std::vector<bool>{false, false});
  CHECK(n.to_vector<bool>() == std::vector<bool>{true, true, false, true});
}
