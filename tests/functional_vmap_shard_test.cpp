// A shard of an ensemble computed alone (FunctionalVmapOptions::sets and first_set, what each MPI
// rank does): the shard's outputs, random draws and buffer updates are those sets' part of the
// whole call, bit for bit. shard_sets shares the sets out.
#include <doctest/doctest.h>

#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/functional_vmap_helpers.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;
using nn::functional_vmap;

TEST_CASE("shard_sets: contiguous ranges in rank order covering the sets, sizes within one") {
  for (int64_t sets = 0; sets <= 20; ++sets)
    for (int64_t ranks = 1; ranks <= 7; ++ranks) {
      CAPTURE(sets);
      CAPTURE(ranks);
      int64_t next = 0, smallest = sets, largest = 0;
      for (int64_t r = 0; r < ranks; ++r) {
        const SetRange s = nn::shard_sets(sets, r, ranks);
        CHECK(s.begin == next);
        CHECK(s.size() >= 0);
        // the larger shards come first
        CHECK(s.size() == sets / ranks + (r < sets % ranks ? 1 : 0));
        smallest = std::min(smallest, s.size());
        largest = std::max(largest, s.size());
        next = s.end;
      }
      CHECK(next == sets);
      CHECK(largest - smallest <= 1);
    }
  CHECK_THROWS_AS(nn::shard_sets(4, 2, 2), ValueError);
  CHECK_THROWS_AS(nn::shard_sets(4, -1, 2), ValueError);
  CHECK_THROWS_AS(nn::shard_sets(4, 0, 0), ValueError);
  CHECK_THROWS_AS(nn::shard_sets(-1, 0, 2), ValueError);
}

TEST_CASE("sets [b, e): the whole call's outputs and dropout draws of those sets, bit for bit") {
  manual_seed(11);
  auto nets = ensemble(6, [] { return mlp(5, 16, 3, 0.5); });
  for (auto& n : nets) n->train();
  const TensorDict params = TensorDict::from_modules(nets);
  const Tensor x = randn({4, 5});
  const Tensor xs = randn({6, 4, 5});
  for (const Randomness r : {Randomness::Different, Randomness::Same}) {
    for (const bool per_set : {false, true}) {
      CAPTURE(per_set);
      const nn::FunctionalVmapOptions o = shared_or_per_set(params, r, per_set, x, xs);
      manual_seed(3);
      const Tensor whole = functional_vmap(*nets[0], o).tensor();
      for (const SetRange s : {SetRange{0, 0}, SetRange{1, 4}, SetRange{0, 6}, SetRange{5, 6}}) {
        CAPTURE(s.begin);
        CAPTURE(s.end);
        for (const std::optional<int64_t> chunk : {std::optional<int64_t>{}, {2}}) {
          auto shard = o;
          shard.sets = s;
          shard.chunk_size = chunk;
          manual_seed(3);
          CHECK(
              equal(functional_vmap(*nets[0], shard).tensor(), whole.narrow(0, s.begin, s.size())));
          // params holding only those sets, told where they start
          auto alone = o;
          alone.params = params.slice(s.begin, s.end);
          alone.first_set = s.begin;
          alone.chunk_size = chunk;
          if (per_set) alone.kwargs.set("input", xs.narrow(0, s.begin, s.size()));
          manual_seed(3);
          CHECK(
              equal(functional_vmap(*nets[0], alone).tensor(), whole.narrow(0, s.begin, s.size())));
        }
        if (r == Randomness::Different && s.size() > 0) {
          auto looped = o;
          looped.sets = s;
          looped.loop = true;
          manual_seed(3);
          CHECK(equal(functional_vmap(*nets[0], looped).tensor(),
                      whole.narrow(0, s.begin, s.size())));
        }
      }
    }
  }
  // the draws really depend on the set: another first_set gives other values
  auto moved = nn::FunctionalVmapOptions{
      .params = params.slice(0, 2), .args = {x}, .randomness = Randomness::Different};
  manual_seed(3);
  const Tensor at0 = functional_vmap(*nets[0], moved).tensor();
  moved.first_set = 2;
  manual_seed(3);
  CHECK_FALSE(equal(functional_vmap(*nets[0], moved).tensor(), at0));
}

TEST_CASE("sets over two batch dims count the flattened sets; per-set inputs at another dim") {
  manual_seed(12);
  auto nets = ensemble(6, [] { return mlp(3, 8, 2); });
  const TensorDict params = TensorDict::from_modules(nets).reshape({2, 3});
  const Tensor xs = randn({4, 2, 3, 3});  // the sets at dims 1, 2
  nn::FunctionalVmapOptions o{
      .params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 1}}};
  const Tensor whole = functional_vmap(*nets[0], o).tensor();
  REQUIRE(whole.shape() == Shape{2, 3, 4, 2});
  o.sets = SetRange{2, 5};
  const Tensor part = functional_vmap(*nets[0], o).tensor();
  REQUIRE(part.shape() == Shape{3, 4, 2});
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t set = 2 + i;
    CHECK(equal(part.select(0, i), whole.select(0, set / 3).select(0, set % 3)));
  }
}

TEST_CASE("sets [b, e) in training update only those sets' buffers, as the whole call does") {
  manual_seed(13);
  auto make = [] {
    auto seq = std::make_shared<nn::Sequential>();
    seq->push_back(std::make_shared<nn::Linear>(4, 6));
    seq->push_back(std::make_shared<nn::BatchNorm1d>(6));
    return std::shared_ptr<nn::Module>(seq);
  };
  auto nets = ensemble(5, make);
  for (auto& n : nets) n->train();
  const TensorDict start = TensorDict::from_modules(nets);
  const Tensor x = randn({5, 8, 4});
  TensorDict whole = start.clone();
  functional_vmap(*nets[0], {.params = whole, .kwargs = {{"input", x}}, .in_dims = {{"input", 0}}});
  TensorDict part = start.clone();
  functional_vmap(*nets[0], {.params = part,
                             .kwargs = {{"input", x}},
                             .in_dims = {{"input", 0}},
                             .sets = SetRange{1, 3}});
  for (const char* key : {"1.running_mean", "1.running_var", "1.num_batches_tracked"}) {
    CAPTURE(key);
    for (int64_t i = 0; i < 5; ++i) {
      CAPTURE(i);
      const bool mine = i >= 1 && i < 3;
      CHECK(equal(part.get(key).select(0, i), (mine ? whole : start).get(key).select(0, i)));
    }
    // the whole call changed every set's buffer
    CHECK_FALSE(equal(whole.get(key).select(0, 0), start.get(key).select(0, 0)));
  }
}

TEST_CASE("sets and first_set: out of range, reversed or without batch dims is a ValueError") {
  auto net = mlp(3, 4, 2);
  const TensorDict params = TensorDict::from_modules(ensemble(4, [] { return mlp(3, 4, 2); }));
  const Tensor x = randn({2, 3});
  auto bad = [&](nn::FunctionalVmapOptions o, const char* text) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(functional_vmap(*net, o), doctest::Contains(text), ValueError);
  };
  bad({.params = params, .args = {x}, .sets = SetRange{3, 5}},
      "[functional_vmap] sets [3, 5) is not a range of the 4 sets of params.batch_size [4]");
  bad({.params = params, .args = {x}, .sets = SetRange{2, 1}}, "sets [2, 1)");
  bad({.params = params, .args = {x}, .sets = SetRange{-1, 1}}, "sets [-1, 1)");
  bad({.params = TensorDict::from_module(*net), .args = {x}, .sets = SetRange{0, 0}},
      "of the 1 sets of params.batch_size []");
  bad({.params = params, .args = {x}, .first_set = -2}, "first_set must be >= 0, got -2");
}
