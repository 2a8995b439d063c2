// nn functionals other than convolution and pooling against their textbook formulas written as
// naive loops, and hand values: layer_norm, batch_norm (train/eval, running stats), embedding;
// non-contiguous inputs, float64, empty dims, errors.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "engine/engine.h"
#include "tests/tensor_values.h"
#include "tests/test_util.h"

using namespace td;
using namespace td::test;

TEST_CASE("layer_norm: hand values and the formula") {
  // mean 2.5, biased var 1.25
  Tensor x = tensor({1.f, 2.f, 3.f, 4.f});
  Tensor y = layer_norm(x, {4});
  double inv = 1.0 / std::sqrt(1.25 + 1e-5);
  check_close(y, {-1.5 * inv, -0.5 * inv, 0.5 * inv, 1.5 * inv});
  Tensor yw = layer_norm(x, {4}, tensor({1.f, 2.f, 1.f, 1.f}), tensor({0.f, 0.f, 1.f, 0.f}));
  check_close(yw, {-1.5 * inv, -1.0 * inv, 0.5 * inv + 1, 1.5 * inv});

  for (DType dt : {kFloat32, kFloat64}) {
    Tensor a = seq({4, 2, 3}, dt).transpose(0, 1);  // [2, 4, 3], non-contiguous
    Tensor w = seq({4, 3}, dt, 0.9), b = seq({4, 3}, dt, 1.3);
    double eps = 1e-3;
    Tensor out = layer_norm(a, {4, 3}, w, b, eps);
    CHECK(out.shape() == Shape{2, 4, 3});
    CHECK(out.dtype() == dt);
    auto av = a.to_vector<double>(), wv = w.to_vector<double>(), bv = b.to_vector<double>();
    std::vector<double> ref;
    for (int r = 0; r < 2; ++r) {
      double m = 0, v = 0;
      for (int i = 0; i < 12; ++i) m += av[r * 12 + i] / 12;
      for (int i = 0; i < 12; ++i) v += (av[r * 12 + i] - m) * (av[r * 12 + i] - m) / 12;
      for (int i = 0; i < 12; ++i)
        ref.push_back((av[r * 12 + i] - m) / std::sqrt(v + eps) * wv[i] + bv[i]);
    }
    check_close(out, ref, dt == kFloat32 ? 1e-4 : 1e-12);
  }
  CHECK(layer_norm(ones({0, 4}), {4}).shape() == Shape{0, 4});
}

TEST_CASE("layer_norm errors") {
  check_throws_mentioning<ValueError>([] { layer_norm(ones({2, 3}), {4}); }, "[layer_norm]");
  check_throws_mentioning<ValueError>([] { layer_norm(ones({2, 3}), {4}); }, "[2, 3]");
  CHECK_THROWS_AS(layer_norm(ones({3}), {2, 3}), ValueError);
  CHECK_THROWS_AS(layer_norm(ones({2, 3}), {}), ValueError);
  check_throws_mentioning<ValueError>([] { layer_norm(ones({2, 3}), {3}, ones({2})); }, "weight");
  check_throws_mentioning<ValueError>([] { layer_norm(ones({2, 3}), {3}, {}, ones({4})); }, "bias");
  check_throws_mentioning<TypeError>([] { layer_norm(ones({2, 3}, kInt64), {3}); }, "[layer_norm]");
  CHECK_THROWS_AS(layer_norm(ones({2, 3}), {3}, ones({3}, kFloat64)), TypeError);
}

TEST_CASE("batch_norm training: batch stats and running stats updated in place") {
  for (DType dt : {kFloat32, kFloat64}) {
    const int64_t n = 4, c = 3, h = 2, w = 2;
    Tensor x = seq({n, c, h, w}, dt, 0.77);
    Tensor rm = tensor<double>({0.5, -1.0, 2.0}).to(dt);
    Tensor rv = tensor<double>({1.0, 2.0, 0.5}).to(dt);
    Tensor wt = tensor<double>({1.0, 0.5, -2.0}).to(dt);
    Tensor bs = tensor<double>({0.0, 1.0, 0.25}).to(dt);
    const double mom = 0.2, eps = 1e-4;
    Tensor y = batch_norm(x, rm, rv, wt, bs, true, mom, eps);
    CHECK(y.shape() == x.shape());
    CHECK(y.dtype() == dt);
    auto xv = x.to_vector<double>();
    std::vector<double> mean(c, 0), var(c, 0), ref(xv.size());
    const double cnt = n * h * w;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t s = 0; s < h * w; ++s) mean[ch] += xv[(i * c + ch) * h * w + s] / cnt;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t s = 0; s < h * w; ++s) {
          double d = xv[(i * c + ch) * h * w + s] - mean[ch];
          var[ch] += d * d / cnt;
        }
    std::vector<double> wv{1.0, 0.5, -2.0}, bv{0.0, 1.0, 0.25};
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t s = 0; s < h * w; ++s) {
          int64_t k = (i * c + ch) * h * w + s;
          ref[k] = (xv[k] - mean[ch]) / std::sqrt(var[ch] + eps) * wv[ch] + bv[ch];
        }
    double tol = dt == kFloat32 ? 1e-4 : 1e-12;
    check_close(y, ref, tol);
    std::vector<double> rm0{0.5, -1.0, 2.0}, rv0{1.0, 2.0, 0.5}, rm_ref(c), rv_ref(c);
    for (int64_t ch = 0; ch < c; ++ch) {
      rm_ref[ch] = (1 - mom) * rm0[ch] + mom * mean[ch];
      rv_ref[ch] = (1 - mom) * rv0[ch] + mom * var[ch] * cnt / (cnt - 1);  // unbiased
    }
    check_close(rm, rm_ref, tol);
    check_close(rv, rv_ref, tol);
  }
}

TEST_CASE("layer_norm and batch_norm on rows longer than the kernels' vector lanes") {
  // The rows' sums run 32 lanes at a time with AVX-512 (four vectors of doubles), then a tail:
  // rows of 37 reach both; [5, 19] takes batch_norm's row-of-channels path. Checked against plain
  // loops in double. Offsets make the mean large against the spread, as real activations often
  // are.
  for (DType dt : {kFloat32, kFloat64}) {
    const double tol = dt == kFloat32 ? 2e-4 : 1e-10;
    const int64_t rows = 3, d = 37;
    Tensor x = add(seq({rows, d}, dt, 0.61), full({rows, d}, 40.0, dt));
    auto xv = x.to_vector<double>();
    std::vector<double> ref;
    for (int64_t r = 0; r < rows; ++r) {
      double m = 0, v = 0;
      for (int64_t i = 0; i < d; ++i) m += xv[r * d + i] / d;
      for (int64_t i = 0; i < d; ++i) v += (xv[r * d + i] - m) * (xv[r * d + i] - m) / d;
      for (int64_t i = 0; i < d; ++i) ref.push_back((xv[r * d + i] - m) / std::sqrt(v + 1e-5));
    }
    check_close(layer_norm(x, {d}), ref, tol);

    // batch_norm in training, [n, c] (one value per row and channel) and [n, c, s]
    struct Case {
      int64_t n, c, s;
    };
    for (Case k : {Case{5, 19, 1}, Case{3, 4, 37}}) {
      CAPTURE(k.c);
      Shape shape = k.s == 1 ? Shape{k.n, k.c} : Shape{k.n, k.c, k.s};
      Tensor bx = add(seq(shape, dt, 0.53), full(shape, -25.0, dt));
      Tensor rm = zeros({k.c}, dt), rv = ones({k.c}, dt);
      Tensor y = batch_norm(bx, rm, rv, {}, {}, true, 0.5, 1e-5);
      auto bv = bx.to_vector<double>();
      const double cnt = static_cast<double>(k.n * k.s);
      std::vector<double> mean(k.c, 0), var(k.c, 0), yref(bv.size());
      auto at = [&](int64_t i, int64_t ch, int64_t j) { return (i * k.c + ch) * k.s + j; };
      for (int64_t i = 0; i < k.n; ++i)
        for (int64_t ch = 0; ch < k.c; ++ch)
          for (int64_t j = 0; j < k.s; ++j) mean[ch] += bv[at(i, ch, j)] / cnt;
      for (int64_t i = 0; i < k.n; ++i)
        for (int64_t ch = 0; ch < k.c; ++ch)
          for (int64_t j = 0; j < k.s; ++j)
            var[ch] += (bv[at(i, ch, j)] - mean[ch]) * (bv[at(i, ch, j)] - mean[ch]) / cnt;
      std::vector<double> rm_ref(k.c);
      for (int64_t i = 0; i < k.n; ++i)
        for (int64_t ch = 0; ch < k.c; ++ch) {
          rm_ref[ch] = 0.5 * mean[ch];
          for (int64_t j = 0; j < k.s; ++j)
            yref[at(i, ch, j)] = (bv[at(i, ch, j)] - mean[ch]) / std::sqrt(var[ch] + 1e-5);
        }
      check_close(y, yref, tol);
      check_close(rm, rm_ref, tol);
    }
  }
}

TEST_CASE("batch_norm: hand values, eval mode, 2-D input, strided running stats") {
  // Channel 0 holds {1, 3}: mean 2, biased var 1, unbiased var 2.
  Tensor x = tensor({1.f, 10.f, 3.f, 20.f}, {2, 2});
  Tensor rm = zeros({2}), rv = ones({2});
  Tensor y = batch_norm(x, rm, rv, {}, {}, true, 0.1, 0.0);
  check_close(y, {-1.0, -1.0, 1.0, 1.0});
  check_close(rm, {0.2, 1.5});
  check_close(rv, {0.9 + 0.1 * 2.0, 0.9 + 0.1 * 50.0});

  // Eval: (x - rm) / sqrt(rv + eps) * w + b, running stats untouched.
  Tensor rme = tensor({1.f, -1.f}), rve = tensor({4.f, 0.25f});
  Tensor ye = batch_norm(x, rme, rve, tensor({2.f, 1.f}), tensor({0.f, 1.f}), false, 0.1, 0.0);
  check_close(ye, {0.0, 11.0 / 0.5 + 1, 2.0, 21.0 / 0.5 + 1});
  CHECK(rme.to_vector<float>() == std::vector<float>{1.f, -1.f});

  // Training without running stats is allowed.
  check_close(batch_norm(x, {}, {}, {}, {}, true, 0.1, 0.0), {-1.0, -1.0, 1.0, 1.0});

  // Running stats that are strided views: written through in place.
  Tensor buf = zeros({2, 2});
  Tensor rm_view = buf.select(1, 0);  // stride 2
  Tensor rv_buf = ones({4});
  Tensor rv_view = rv_buf.slice(0, 1, std::nullopt, 2);
  batch_norm(x, rm_view, rv_view, {}, {}, true, 0.1, 0.0);
  check_close(buf, {0.2, 0.0, 1.5, 0.0});
  check_close(rv_buf, {1.0, 1.1, 1.0, 5.9});

  // Non-contiguous input: channels-last storage.
  Tensor xc = seq({2, 3, 3, 2}).permute({0, 3, 1, 2});  // [2, 2, 3, 3]
  Tensor r1 = batch_norm(xc, {}, {}, {}, {}, true, 0.1, 1e-5);
  Tensor r2 = batch_norm(xc.contiguous(), {}, {}, {}, {}, true, 0.1, 1e-5);
  check_close(r1, r2.to_vector<double>(), 1e-12);
  CHECK(batch_norm(ones({0, 3}), ones({3}), ones({3})).shape() == Shape{0, 3});
}

TEST_CASE("batch_norm training on an empty batch: empty output, running stats unchanged") {
  // as torch 1.13: F.batch_norm(x[0, 2, *], rm, rv, training=True) is empty and leaves rm, rv
  for (Shape s : {Shape{0, 2}, Shape{0, 2, 3}, Shape{4, 2, 0}}) {
    Tensor rm = tensor({0.5f, -1.f}), rv = tensor({2.f, 3.f});
    Tensor y = batch_norm(zeros(s), rm, rv, {}, {}, true, 0.1, 1e-5);
    CHECK(y.shape() == s);
    CHECK(rm.to_vector<float>() == std::vector<float>{0.5f, -1.f});
    CHECK(rv.to_vector<float>() == std::vector<float>{2.f, 3.f});
  }
}

TEST_CASE("batch_norm errors") {
  check_throws_mentioning<ValueError>([] { batch_norm(ones({3}), ones({3}), ones({3})); },
                                      "[batch_norm]");
  check_throws_mentioning<ValueError>(
      [] {
        batch_norm(ones({2, 3}), ones({4}), ones({3}));
      },
      "running_mean");
  CHECK_THROWS_AS(batch_norm(ones({2, 3}), ones({3}), ones({3}), ones({2})), ValueError);
  CHECK_THROWS_AS(batch_norm(ones({2, 3}), {}, {}, {}, {}, false), ValueError);
  CHECK_THROWS_AS(batch_norm(ones({1, 3}), {}, {}, {}, {}, true), ValueError);
  CHECK_THROWS_AS(batch_norm(ones({1, 3, 1}), {}, {}, {}, {}, true), ValueError);
  CHECK_THROWS_AS(batch_norm(ones({2, 3}), ones({3}), {}, {}, {}, true), ValueError);
  check_throws_mentioning<TypeError>(
      [] {
        batch_norm(ones({2, 3}, kInt64), ones({3}), ones({3}));
      },
      "[batch_norm]");
}

TEST_CASE("embedding") {
  Tensor w = tensor({0.f, 1.f, 10.f, 11.f, 20.f, 21.f}, {3, 2});
  Tensor idx = tensor<int64_t>({2, 0, 1, 2}, {2, 2});
  Tensor e = embedding(idx, w);
  CHECK(e.shape() == Shape{2, 2, 2});
  CHECK(e.to_vector<float>() == std::vector<float>{20.f, 21.f, 0.f, 1.f, 10.f, 11.f, 20.f, 21.f});
  // Transposed weight and a strided index; 0-d index; empty index; float64 weight.
  Tensor wt = tensor<double>({0, 10, 20, 1, 11, 21}, {2, 3}).t();
  Tensor si = tensor<int64_t>({1, 9, 0, 9}).slice(0, 0, std::nullopt, 2);
  Tensor es = embedding(si, wt);
  CHECK(es.dtype() == kFloat64);
  CHECK(es.to_vector<double>() == std::vector<double>{10, 11, 0, 1});
  Tensor e0 = embedding(tensor<int64_t>({1}, {}), w);
  CHECK(e0.shape() == Shape{2});
  CHECK(e0.to_vector<float>() == std::vector<float>{10.f, 11.f});
  CHECK(embedding(tensor<int64_t>({}, {0}), w).shape() == Shape{0, 2});
}

TEST_CASE("embedding errors") {
  Tensor w = ones({3, 2});
  check_throws_mentioning<IndexError>([&] { embedding(tensor<int64_t>({0, 3}), w); }, "3");
  check_throws_mentioning<IndexError>(
      [&] {
        embedding(tensor<int64_t>({0, 5}), w);
      },
      "[embedding] index 5");
  CHECK_THROWS_AS(embedding(tensor<int64_t>({-1}), w), IndexError);
  check_throws_mentioning<TypeError>([&] { embedding(tensor({0.f}), w); }, "[embedding]");
  CHECK_THROWS_AS(embedding(tensor<int64_t>({0}), ones({3})), ValueError);
}
