// Randomness under vmap: Different draws are keyed by the set's global index (chunk-invariant),
// Same draws are shared by every set, Error raises; each nested level has its own mode.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/kernels/kernels.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {

constexpr int64_t kB = 7;

Tensor draw_per_set(Randomness r, std::optional<int64_t> chunk, uint64_t seed = 123) {
  manual_seed(seed);
  auto f = vmap([](Tensor x) { return add(x, rand({5})); }, {.randomness = r, .chunk_size = chunk});
  return f(zeros({kB, 5}));
}


}  // namespace

TEST_CASE("vmap Different: set i's draws are bit-identical across chunk sizes") {
  Tensor ref = draw_per_set(Randomness::Different, std::nullopt);
  REQUIRE(ref.shape() == Shape{kB, 5});
  for (int64_t c : std::initializer_list<int64_t>{1, 2, 3, kB, kB + 5}) {
    INFO("chunk_size ", c);
    CHECK(equal(draw_per_set(Randomness::Different, c), ref));
  }
  // sets differ pairwise
  for (int64_t i = 0; i < kB; ++i)
    for (int64_t j = 0; j < i; ++j) CHECK_FALSE(equal(ref.select(0, i), ref.select(0, j)));
  // the documented key: stream 0 of the seed, set key combine_set_key(0, i)
  for (int64_t i = 0; i < kB; ++i) {
    std::vector<float> want(5);
    kernels::philox_uniform(want.data(), 5, 123, 0, combine_set_key(0, static_cast<uint64_t>(i)), 0);
    auto got = ref.select(0, i).to_vector<float>();
    for (int k = 0; k < 5; ++k) CHECK(got[k] == want[k]);
  }
}

TEST_CASE("vmap Different: the RNG stream advances as for one chunk") {
  manual_seed(5);
  vmap([](Tensor x) { return add(x, randn({2})); },
       {.randomness = Randomness::Different, .chunk_size = 2})(zeros({5, 2}));
  CHECK(rng_state().stream == 1);
  Tensor after = rand({3});
  manual_seed(5);
  rand({2});
  CHECK(equal(after, rand({3})));
}

TEST_CASE("vmap Same: every set gets the same draws, with any chunk size") {
  manual_seed(123);
  Tensor unbatched = rand({5});
  for (std::optional<int64_t> c : {std::optional<int64_t>(), std::optional<int64_t>(1),
                                   std::optional<int64_t>(2), std::optional<int64_t>(3)}) {
    Tensor r = draw_per_set(Randomness::Same, c);
    for (int64_t i = 0; i < kB; ++i) CHECK(equal(r.select(0, i), unbatched));
  }
}

TEST_CASE("vmap Error: a random op raises, dropout in eval mode does not") {
  auto f = vmap([](Tensor x) { return add(x, randn({2})); });
  CHECK_THROWS_AS(f(zeros({3, 2})), RuntimeError);
  std::string msg = message_of([&] { f(zeros({3, 2})); });
  CHECK(msg.find("[randn]") != std::string::npos);
  CHECK(msg.find("randomness='error'") != std::string::npos);
  auto drop_train = vmap([](Tensor x) { return dropout(x, 0.5, true); });
  CHECK_THROWS_AS(drop_train(ones({3, 4})), RuntimeError);
  auto drop_eval = vmap([](Tensor x) { return dropout(x, 0.5, false); });
  Tensor x = rand({3, 4});
  CHECK(equal(drop_eval(x), x));
  // p = 1 draws nothing (x * 0, as torch): no error, and an inf stays NaN
  auto drop_all = vmap([](Tensor x) { return dropout(x, 1.0, true); });
  const auto z = drop_all(full({3, 2}, std::numeric_limits<double>::infinity())).to_vector<float>();
  CHECK(z.size() == 6);
  for (float e : z) CHECK(std::isnan(e));
  CHECK(drop_all(x).to_vector<float>() == std::vector<float>(12, 0.0f));
}

TEST_CASE("vmap dropout and bernoulli: Same shares the mask, Different does not") {
  Tensor x = ones({4, 50});
  for (std::optional<int64_t> c : {std::optional<int64_t>(), std::optional<int64_t>(3)}) {
    manual_seed(9);
    Tensor same = vmap([](Tensor t) { return dropout(t, 0.5, true); },
                       {.randomness = Randomness::Same, .chunk_size = c})(x);
    for (int64_t i = 1; i < 4; ++i) CHECK(equal(same.select(0, i), same.select(0, 0)));
    // kept values are scaled by 1 / (1 - p)
    for (double v : same.to_vector<double>()) CHECK((v == 0.0 || v == 2.0));
  }
  manual_seed(9);
  Tensor d1 = vmap([](Tensor t) { return dropout(t, 0.5, true); },
                   {.randomness = Randomness::Different})(x);
  manual_seed(9);
  Tensor d2 = vmap([](Tensor t) { return dropout(t, 0.5, true); },
                   {.randomness = Randomness::Different, .chunk_size = 1})(x);
  CHECK(equal(d1, d2));
  for (int64_t i = 1; i < 4; ++i) CHECK_FALSE(equal(d1.select(0, i), d1.select(0, 0)));
  manual_seed(9);
  Tensor b = vmap([](Tensor p) { return bernoulli(p); },
                  {.randomness = Randomness::Different})(full({4, 50}, 0.5));
  for (double v : b.to_vector<double>()) CHECK((v == 0.0 || v == 1.0));
  CHECK_FALSE(equal(b.select(0, 1), b.select(0, 0)));
}

TEST_CASE("vmap nested randomness: each level applies its own mode") {
  constexpr int64_t b1 = 3, b2 = 4;
  auto nested = [](Randomness outer, Randomness inner, std::optional<int64_t> chunk = {}) {
    manual_seed(77);
    auto in = vmap([](Tensor x) { return add(x, rand({6})); }, {.randomness = inner});
    return vmap(in, {.randomness = outer, .chunk_size = chunk})(zeros({b1, b2, 6}));
  };
  SUBCASE("outer Same, inner Different: varies along the inner dim only") {
    Tensor r = nested(Randomness::Same, Randomness::Different);
    REQUIRE(r.shape() == Shape{b1, b2, 6});
    for (int64_t i = 0; i < b1; ++i)
      for (int64_t j = 0; j < b2; ++j)
        CHECK(equal(r.select(0, i).select(0, j), r.select(0, 0).select(0, j)));
    CHECK_FALSE(equal(r.select(0, 0).select(0, 1), r.select(0, 0).select(0, 0)));
  }
  SUBCASE("outer Different, inner Same: varies along the outer dim only") {
    Tensor r = nested(Randomness::Different, Randomness::Same);
    for (int64_t i = 0; i < b1; ++i)
      for (int64_t j = 0; j < b2; ++j)
        CHECK(equal(r.select(0, i).select(0, j), r.select(0, i).select(0, 0)));
    CHECK_FALSE(equal(r.select(0, 1).select(0, 0), r.select(0, 0).select(0, 0)));
  }
  SUBCASE("both Different: all distinct, chunk-invariant, keyed by both indices") {
    Tensor r = nested(Randomness::Different, Randomness::Different);
    for (int64_t a = 0; a < b1 * b2; ++a)
      for (int64_t c = 0; c < a; ++c)
        CHECK_FALSE(
            equal(r.select(0, a / b2).select(0, a % b2), r.select(0, c / b2).select(0, c % b2)));
    CHECK(equal(nested(Randomness::Different, Randomness::Different, 1), r));
    CHECK(equal(nested(Randomness::Different, Randomness::Different, 2), r));
    for (int64_t i = 0; i < b1; ++i)
      for (int64_t j = 0; j < b2; ++j) {
        std::vector<float> want(6);
        uint64_t key = combine_set_key(combine_set_key(0, i), j);
        kernels::philox_uniform(want.data(), 6, 77, 0, key, 0);
        auto got = r.select(0, i).select(0, j).to_vector<float>();
        for (int k = 0; k < 6; ++k) CHECK(got[k] == want[k]);
      }
  }
  SUBCASE("outer Error raises even when the inner level allows randomness") {
    CHECK_THROWS_AS(nested(Randomness::Error, Randomness::Different), RuntimeError);
  }
  SUBCASE("a random op whose input is batched only at the outer level still varies inner") {
    manual_seed(3);
    auto in = vmap([](Tensor p, Tensor x) { return add(bernoulli(p), mul(x, 0.0)); },
                   {.in_dims = {std::nullopt, 0}, .randomness = Randomness::Different});
    auto out = vmap(in, {.in_dims = {0, std::nullopt}, .randomness = Randomness::Different});
    Tensor r = out(full({b1, 40}, 0.5), zeros({b2}));
    REQUIRE(r.shape() == Shape{b1, b2, 40});
    CHECK_FALSE(equal(r.select(0, 0).select(0, 1), r.select(0, 0).select(0, 0)));
    CHECK_FALSE(equal(r.select(0, 1).select(0, 0), r.select(0, 0).select(0, 0)));
  }
}

// vmap's one-pass dropout rule against the composite it replaces (x * dropout_mask for float32,
// x * (rand >= p) for float64), run under the same vmap (whose rand and dropout_mask rules key
// each set), for batched and shared inputs, Same and Different, float and double.
TEST_CASE("vmap dropout equals its composite formula bit for bit") {
  auto composite = [](Tensor t) {
    Tensor keep = t.dtype() == kFloat32 ? dropout_mask(t.shape(), 0.3)
                                        : ge(rand(t.shape(), t.dtype()), 0.3).to(t.dtype());
    return mul(mul(t, keep), 1.0 / 0.7);
  };
  for (DType dt : {kFloat32, kFloat64})
    for (Randomness r : {Randomness::Different, Randomness::Same})
      for (bool shared : {false, true}) {
        if (shared && r == Randomness::Same) continue;  // unbatched in, unbatched out
        CAPTURE(static_cast<int>(r));
        CAPTURE(shared);
        Tensor x = shared ? randn({5, 6}, dt) : randn({4, 5, 6}, dt);
        VmapOptions o{.in_dims = {shared ? std::nullopt : std::optional<int64_t>(0)},
                      .randomness = r};
        auto run = [&](auto fn, std::optional<int64_t> chunk) {
          VmapOptions oc = o;
          oc.chunk_size = chunk;
          manual_seed(21);
          // the batch size comes from a second, batched argument when x is shared
          oc.in_dims.push_back(0);
          return vmap([&](Tensor t, Tensor) { return fn(t); }, oc)(x, zeros({4}));
        };
        Tensor fused = run([](Tensor t) { return dropout(t, 0.3, true); }, std::nullopt);
        Tensor want = run(composite, std::nullopt);
        CHECK(fused.to_vector<double>() == want.to_vector<double>());
        Tensor chunked = run([](Tensor t) { return dropout(t, 0.3, true); }, 3);
        CHECK(chunked.to_vector<double>() == want.to_vector<double>());
      }
}

TEST_CASE("vmap bernoulli: Same with a batched p raises, as in PyTorch") {
  auto same = vmap([](Tensor p) { return bernoulli(p); }, {.randomness = Randomness::Same});
  CHECK_THROWS_AS(same(full({4, 5}, 0.5)), RuntimeError);
  std::string m = message_of([&] { same(full({4, 5}, 0.5)); });
  CHECK(has(m, "[bernoulli]"));
  CHECK(has(m, "same"));
  CHECK(has(m, "per-set shape [5]"));
  // 'error' names the randomness mode first
  auto err = vmap([](Tensor p) { return bernoulli(p); });
  CHECK(has(message_of([&] { err(full({4, 5}, 0.5)); }), "randomness='error'"));
  // an unbatched p under Same: one draw shared by every set
  manual_seed(5);
  Tensor b = vmap([](Tensor x) { return add(x, bernoulli(full({40}, 0.5))); },
                  {.randomness = Randomness::Same})(zeros({4, 40}));
  for (int64_t i = 1; i < 4; ++i) CHECK(equal(b.select(0, i), b.select(0, 0)));
  for (double v : b.to_vector<double>()) CHECK((v == 0.0 || v == 1.0));
}
