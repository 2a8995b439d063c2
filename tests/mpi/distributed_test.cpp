// dist::functional_vmap on real ranks: each rank computes its shard of the sets; the gathered
// outputs and buffers are those of one process, bit for bit, for any number of ranks, chunk_size
// and threads per rank. Every rank computes the one-process result itself to compare against.
// Only CHECKs: a rank that left a case early would leave the others waiting in a collective.
#include "vmap/distributed.h"

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/functional_vmap_helpers.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;
using dist::Gather;

namespace {

const dist::Communicator& world() {
  static const dist::Communicator c;
  return c;
}

// The three ways of returning the outputs checked against the one-process result.
void check_gathers(const nn::Module& m, const nn::FunctionalVmapOptions& o, const Tensor& whole,
                   const dist::ShardOptions& base = {}) {
  const auto& c = world();
  const SetRange mine = c.shard(shape_numel(o.params.batch_size()));
  const Tensor flat = whole.flatten(0, std::max<int64_t>(o.params.batch_dims(), 1) - 1);
  auto s = base;
  for (const Gather g : {Gather::None, Gather::Root, Gather::All}) {
    CAPTURE(static_cast<int>(g));
    s.gather = g;
    s.root = c.size() - 1;
    manual_seed(21);
    const Value out = dist::functional_vmap(c, m, o, s);
    if (g == Gather::None) {
      CHECK(equal(out.tensor(), flat.narrow(0, mine.begin, mine.size())));
    } else if (g == Gather::All || c.rank() == s.root) {
      CHECK(equal(out.tensor(), whole));
    } else {
      CHECK(out.is_none());
    }
  }
}

// forward(input): input * w, but a set whose w is 42 raises (a user module that fails for one set)
struct Picky : nn::Module {
  nn::Param w;
  Picky() {
    w = register_parameter("w", ones({1}));
    register_method("forward", &Picky::forward, {"input"});
  }
  std::string type_name() const override { return "Picky"; }
  Tensor forward(const Tensor& input) {
    if (w.get().item<float>() == 42.0f)
      throw_error<ValueError>("[Picky] a set with w == 42 refuses to run");
    return input * w.get();
  }
};

}  // namespace

TEST_CASE("an MLP ensemble with dropout: any chunk_size, threads, randomness and gather") {
  const auto& c = world();
  manual_seed(7);
  auto nets = ensemble(7, [] { return mlp(5, 16, 3, 0.3); });
  for (auto& n : nets) n->train();
  const TensorDict params = TensorDict::from_modules(nets);
  const Tensor x = randn({4, 5});
  const Tensor xs = randn({7, 4, 5});
  for (const Randomness r : {Randomness::Different, Randomness::Same})
    for (const bool per_set : {false, true}) {
      CAPTURE(c.rank());
      CAPTURE(per_set);
      const nn::FunctionalVmapOptions o = shared_or_per_set(params, r, per_set, x, xs);
      manual_seed(21);
      const Tensor whole = nn::functional_vmap(*nets[0], o).tensor();
      for (const std::optional<int64_t> chunk : {std::optional<int64_t>{}, {1}, {3}}) {
        auto oc = o;
        oc.chunk_size = chunk;
        check_gathers(*nets[0], oc, whole);
      }
      if (r == Randomness::Different) {
        auto looped = o;
        looped.loop = true;
        check_gathers(*nets[0], looped, whole);
      }
      set_num_threads(2);
      check_gathers(*nets[0], o, whole);
      set_num_threads(1);
    }
}

TEST_CASE("two batch dims and per-set inputs at dim 1: outputs gathered with both dims") {
  const auto& c = world();
  manual_seed(8);
  auto nets = ensemble(6, [] { return mlp(5, 16, 3); });
  const TensorDict params = TensorDict::from_modules(nets).reshape({2, 3});
  const Tensor xs = randn({4, 2, 3, 5});
  const nn::FunctionalVmapOptions o{
      .params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 1}}};
  const Tensor whole = nn::functional_vmap(*nets[0], o).tensor();
  CHECK(whole.shape() == Shape{2, 3, 4, 3});
  check_gathers(*nets[0], o, whole);
  CAPTURE(c.rank());
}

TEST_CASE("fewer sets than ranks: the ranks without a set still take part") {
  manual_seed(9);
  auto nets = ensemble(2, [] { return mlp(5, 16, 3); });
  const TensorDict params = TensorDict::from_modules(nets);
  const nn::FunctionalVmapOptions o{.params = params, .args = {randn({3, 5})}};
  check_gathers(*nets[0], o, nn::functional_vmap(*nets[0], o).tensor());
}

TEST_CASE("conv + BatchNorm in training: outputs and each set's buffers, whole or sharded params") {
  const auto& c = world();
  manual_seed(10);
  auto make = [] {
    auto seq = std::make_shared<nn::Sequential>();
    seq->push_back(std::make_shared<nn::Conv2d>(2, 4, 3));
    seq->push_back(std::make_shared<nn::BatchNorm2d>(4));
    seq->push_back(std::make_shared<nn::ReLU>());
    seq->push_back(std::make_shared<nn::Flatten>());
    seq->push_back(std::make_shared<nn::Linear>(4 * 4 * 4, 3));
    return std::shared_ptr<nn::Module>(seq);
  };
  std::vector<std::shared_ptr<nn::Module>> nets;
  for (int i = 0; i < 5; ++i) nets.push_back(make());
  for (auto& n : nets) n->train();
  const TensorDict start = TensorDict::from_modules(nets);
  const Tensor xs = randn({5, 3, 2, 6, 6});
  TensorDict one = start.clone();  // the one-process call
  const Tensor whole =
      nn::functional_vmap(*nets[0],
                          {.params = one, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}})
          .tensor();
  const SetRange mine = c.shard(5);

  // every rank holds every set and computes its own
  TensorDict params = start.clone();
  const Value out = dist::functional_vmap(
      c, *nets[0], {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}},
      {.gather = Gather::All});
  CHECK(equal(out.tensor(), whole));
  const TensorDict buffers =
      dist::gather_sets(c, params.slice(mine.begin, mine.end), {5}, Gather::All);
  for (const auto& [key, t] : one.leaves()) {
    CAPTURE(key);
    CHECK(equal(buffers.get(key), t));
  }

  // every rank holds only its sets, of params and of the input
  TensorDict shard = start.slice(mine.begin, mine.end).clone();
  const Value part =
      dist::functional_vmap(c, *nets[0],
                            {.params = shard,
                             .kwargs = {{"input", xs.narrow(0, mine.begin, mine.size())}},
                             .in_dims = {{"input", 0}}},
                            {.gather = Gather::Root, .batch_size = Shape{5}});
  const TensorDict gathered = dist::gather_sets(c, shard, {5}, Gather::Root);
  if (c.rank() == 0) {
    CHECK(equal(part.tensor(), whole));
    for (const auto& [key, t] : one.leaves()) {
      CAPTURE(key);
      CHECK(equal(gathered.get(key), t));
    }
  } else {
    CHECK(part.is_none());
    CHECK(gathered.empty());
  }
}

TEST_CASE("an exception on one rank is raised on every rank, its type and message") {
  const auto& c = world();
  std::vector<std::shared_ptr<nn::Module>> mods;
  for (int i = 0; i < 4; ++i) mods.push_back(std::make_shared<Picky>());
  TensorDict params = TensorDict::from_modules(mods);
  params.get("w").select(0, 3).fill_(42.0);  // set 3: the last set's owner fails
  int owner = 0;
  for (int r = 0; r < c.size(); ++r)
    if (nn::shard_sets(4, r, c.size()).end == 4 && nn::shard_sets(4, r, c.size()).size() > 0)
      owner = r;
  const std::string where =
      " (on rank " + std::to_string(owner) + " of " + std::to_string(c.size()) + ")";
  CHECK_THROWS_WITH_AS(
      dist::functional_vmap(c, *mods[0], {.params = params, .args = {ones({2})}, .loop = true}),
      ("[Picky] a set with w == 42 refuses to run" + where).c_str(), ValueError);
  // every rank fails: the lowest rank's error is raised
  CHECK_THROWS_WITH_AS(
      dist::functional_vmap(c, *mods[0], {.params = params, .in_dims = {{"x", 0}}}),
      doctest::Contains("in_dims names 'x', which is not a key of kwargs (on rank 0 of"), KeyError);
  // collectively keeps the kind of a failure on one rank only
  CHECK_THROWS_WITH_AS(dist::collectively(c,
                                          [&] {
                                            if (c.rank() == c.size() - 1)
                                              throw_error<TypeError>("[test] last rank");
                                          }),
                       doctest::Contains("[test] last rank (on rank"), TypeError);
  // and the ranks go on working together afterwards
  dist::collectively(c, [] {});
  CHECK(true);
}

TEST_CASE("ranks given different modules or options get a ValueError, not a hang") {
  const auto& c = world();
  if (c.size() < 2) return;
  manual_seed(12);
  const int64_t hidden = c.rank() == 1 ? 9 : 16;
  auto make = [&] {
    auto seq = std::make_shared<nn::Sequential>();
    seq->push_back(std::make_shared<nn::Linear>(5, hidden));
    return std::shared_ptr<nn::Module>(seq);
  };
  std::vector<std::shared_ptr<nn::Module>> nets{make(), make(), make()};
  const TensorDict params = TensorDict::from_modules(nets);
  std::string message;
  try {
    dist::functional_vmap(c, *nets[0], {.params = params, .args = {randn({2, 5})}});
  } catch (const ValueError& e) {
    message = e.what();
  }
  CHECK(message.find("[dist::functional_vmap] the ranks were given different modules, "
                     "parameters or options: rank 0 has '") == 0);
  // the first line that differs: the module's repr
  CHECK(message.find("out_features=16") != std::string::npos);
  CHECK(message.find("where rank 1 has '") != std::string::npos);
  CHECK(message.find("out_features=9") != std::string::npos);
  // the same modules with different gather targets
  auto same = ensemble(3, [] { return mlp(5, 16, 3); });
  const TensorDict p2 = TensorDict::from_modules(same);
  CHECK_THROWS_WITH_AS(dist::functional_vmap(c, *same[0], {.params = p2, .args = {randn({2, 5})}},
                                             {.root = c.rank() == 1 ? 1 : 0}),
                       doctest::Contains("rank 0 has 'gather 1 root 0' where rank 1 has 'gather "
                                         "1 root 1'"),
                       ValueError);
}
