// In-place semantics under vmap: writes into batched and unbatched tensors, and batch_norm's
// running statistics updated per set.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/engine.h"
#include "tests/tensor_values.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

TEST_CASE("vmap: in-place semantics") {
  Tensor x = arange(6).view({2, 3}).to(kFloat32);
  // batched into batched writes each set's slice (through a layout with the batch dim last)
  Tensor buf = zeros({3, 2});
  vmap(
      [](Tensor b, Tensor t) {
        add_(b, t);
        return b;
      },
      {.in_dims = {1, 0}})(buf, x);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) CHECK(at(buf, {j, i}) == i * 3 + j);
  // an unbatched value into a batched tensor broadcasts over the sets
  Tensor buf2 = zeros({2, 3});
  vmap(
      [](Tensor b, Tensor t) {
        copy_(b, t);
        return b;
      },
      {.in_dims = {0, std::nullopt}})(buf2, tensor({1.f, 2.f, 3.f}));
  CHECK(at(buf2, {1, 2}) == 3.0);
  // a batched value into an unbatched tensor
  Tensor dst = zeros({3});
  auto bad = vmap([&](Tensor t) {
    copy_(dst, t);
    return t;
  });
  CHECK_THROWS_AS(bad(x), RuntimeError);
  std::string m = message_of([&] { bad(x); });
  CHECK(has(m, "[copy_]"));
  CHECK(has(m, "per-set shape [3]"));
  CHECK(has(m, "unbatched"));
  CHECK(at(dst, {0}) == 0.0);
  // an operand with more dims than self is refused as in a call per set (copy_ of a [1, 3] into
  // a [3] raises); against the physical [2, 3] it broadcast over the sets and was taken
  CHECK_THROWS_AS(copy_(zeros({3}), ones({1, 3})), ValueError);
  Tensor buf3 = zeros({2, 3});
  auto wide = [](Tensor b, Tensor t) {
    add_(b, t);
    return b;
  };
  for (const Tensor& o : {ones({1, 3}), ones({1, 1, 3})}) {
    check_throws_mentioning<ValueError>(
        [&] {
          vmap(wide, {.in_dims = {0, std::nullopt}})(buf3, o);
        },
        "[add_] operand of per-set shape " + shape_str(o.shape()));
    CHECK_THROWS_AS(vmap(wide)(buf3, ones({2, 1, 3})), ValueError);
  }
  CHECK(buf3.to_vector<float>() == std::vector<float>(6, 0.f));  // nothing written
  vmap(wide, {.in_dims = {0, std::nullopt}})(buf3, ones({1}));   // a smaller one still broadcasts
  CHECK(buf3.to_vector<float>() == std::vector<float>(6, 1.f));
}

TEST_CASE("vmap: batch_norm running statistics") {
  manual_seed(2);
  constexpr int64_t b = 3;
  Tensor x = randn({b, 8, 4});
  SUBCASE("unbatched running stats with a batched input in training raise") {
    Tensor rm = zeros({4}), rv = ones({4});
    auto f = vmap([&](Tensor t) { return batch_norm(t, rm, rv, {}, {}, true); });
    CHECK_THROWS_AS(f(x), RuntimeError);
    std::string m = message_of([&] { f(x); });
    CHECK(has(m, "batch_norm"));
    CHECK(has(m, "running_mean"));
    CHECK(has(m, "track_running_stats"));
    // eval mode works with any combination
    Tensor y = vmap([&](Tensor t) { return batch_norm(t, rm, rv, {}, {}, false); })(x);
    CHECK(y.shape() == Shape{b, 8, 4});
  }
  SUBCASE("stacked running stats are updated per set, as each set alone would") {
    Tensor rm = zeros({b, 4}), rv = ones({b, 4});
    Tensor y = vmap([](Tensor t, Tensor m, Tensor v) {
      return batch_norm(t, m, v, {}, {}, true, 0.1);
    })(x, rm, rv);
    for (int64_t i = 0; i < b; ++i) {
      Tensor m1 = zeros({4}), v1 = ones({4});
      Tensor yi = batch_norm(x.select(0, i), m1, v1, {}, {}, true, 0.1);
      CHECK(allclose(y.select(0, i), yi, 1e-5, 1e-6));
      CHECK(allclose(rm.select(0, i), m1, 1e-6, 1e-7));
      CHECK(allclose(rv.select(0, i), v1, 1e-6, 1e-7));
      // independent check of the mean update: 0.9 * 0 + 0.1 * mean over N
      auto xv = x.select(0, i).contiguous().to_vector<float>();
      double s = 0;
      for (int n = 0; n < 8; ++n) s += xv[n * 4 + 2];
      CHECK(at(rm, {i, 2}) == doctest::Approx(0.1 * s / 8).epsilon(1e-5));
    }
  }
  SUBCASE("stacked running stats with the batch dim last are written back") {
    Tensor rm = zeros({4, b}), rv = ones({4, b});
    vmap([](Tensor t, Tensor m, Tensor v) { return batch_norm(t, m, v, {}, {}, true, 0.1); },
         {.in_dims = {0, 1, 1}})(x, rm, rv);
    for (int64_t i = 0; i < b; ++i) {
      Tensor m1 = zeros({4}), v1 = ones({4});
      batch_norm(x.select(0, i), m1, v1, {}, {}, true, 0.1);
      CHECK(allclose(rm.select(1, i), m1, 1e-6, 1e-7));
      CHECK(allclose(rv.select(1, i), v1, 1e-6, 1e-7));
    }
  }
  SUBCASE("a shared running stat beside a stacked one, with a shared input, is updated once") {
    // every set computes the same update of the shared running_mean (the input is shared): it
    // was computed into a temporary and dropped, leaving running_mean as it was
    Tensor x0 = x.select(0, 0).clone();  // [8, 4], shared
    Tensor rm = full({4}, 0.5), rv = ones({b, 4});
    Tensor y = vmap([&](Tensor v) { return batch_norm(x0, rm, v, {}, {}, true, 0.1); })(rv);
    CHECK(y.shape() == Shape{b, 8, 4});
    auto xv = x0.to_vector<float>();
    for (int64_t ch = 0; ch < 4; ++ch) {
      double s = 0;
      for (int n = 0; n < 8; ++n) s += xv[n * 4 + ch];
      CHECK(at(rm, {ch}) == doctest::Approx(0.9 * 0.5 + 0.1 * s / 8).epsilon(1e-5));
    }
    Tensor m1 = full({4}, 0.5), v1 = ones({4});
    batch_norm(x0, m1, v1, {}, {}, true, 0.1);
    CHECK(allclose(rm, m1, 1e-6, 1e-7));
    for (int64_t i = 0; i < b; ++i) CHECK(allclose(rv.select(0, i), v1, 1e-6, 1e-7));
    // and the other way round: shared running_var, stacked running_mean
    Tensor rm2 = zeros({b, 4}), rv2 = ones({4});
    vmap([&](Tensor m) { return batch_norm(x0, m, rv2, {}, {}, true, 0.1); })(rm2);
    CHECK(allclose(rv2, v1, 1e-6, 1e-7));
    // nested, with one channel: the shared stat's temporary must be writable at the outer level
    Tensor x1 = x0.narrow(1, 0, 1).clone();  // [8, 1]
    Tensor rm3 = full({1}, 0.5), rv3 = ones({2, b, 1});
    vmap(vmap([&](Tensor v) { return batch_norm(x1, rm3, v, {}, {}, true, 0.1); }))(rv3);
    Tensor m3 = full({1}, 0.5), v3 = ones({1});
    batch_norm(x1, m3, v3, {}, {}, true, 0.1);
    CHECK(allclose(rm3, m3, 1e-6, 1e-7));
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < b; ++j)
        CHECK(allclose(rv3.select(0, i).select(0, j), v3, 1e-6, 1e-7));
  }
}
