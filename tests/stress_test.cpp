// Many threads calling functional_vmap at once: 8 threads x 500 calls mixing models, chunk
// sizes, loop mode, failing calls and sampling give what the same calls give one after another,
// and unseeded samples never repeat across threads. Tiny models, so it stays fast under TSan.
#include <doctest/doctest.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "vmap/vmap.h"

using namespace td;

namespace {

struct Models {
  std::shared_ptr<nn::Module> lin, mlp, drop;
  TensorDict lin_p, mlp_p, drop_p;
  Tensor x, x_per_set, x_bad;
};

Models make_models() {
  manual_seed(11);
  Models m;
  std::vector<std::shared_ptr<nn::Module>> lins, mlps, drops;
  for (int i = 0; i < 4; ++i) {
    lins.push_back(std::make_shared<nn::Linear>(3, 2));
    mlps.push_back(std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(4, 2)}));
    drops.push_back(std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(3, 8), std::make_shared<nn::Dropout>(0.5)}));
  }
  m.lin = lins[0];
  m.mlp = mlps[0];
  m.drop = drops[0];
  m.drop->train(true);
  m.lin_p = TensorDict::from_modules(lins);
  m.mlp_p = TensorDict::from_modules(mlps);
  m.drop_p = TensorDict::from_modules(drops);
  m.x = randn({2, 3});
  m.x_per_set = randn({4, 2, 3});
  m.x_bad = randn({2, 5});  // does not fit Linear(3, .)
  return m;
}

// Call `kind` of the mix; `id` is unique per call (the seed of seeded sampling). Returns the
// output's values, or {} for a call that must fail (checked to fail with a ValueError).
std::vector<float> call(const Models& m, int kind, int id) {
  using nn::functional_vmap;
  switch (kind) {
    case 0:
      return functional_vmap(*m.lin, {.params = m.lin_p, .args = {m.x}})
          .tensor()
          .to_vector<float>();
    case 1:
      return functional_vmap(*m.mlp, {.params = m.mlp_p, .args = {m.x}, .chunk_size = 1 + id % 3})
          .tensor()
          .to_vector<float>();
    case 2:
      return functional_vmap(*m.mlp, {.params = m.mlp_p,
                                      .kwargs = {{"input", m.x_per_set}},
                                      .in_dims = {{"input", 0}},
                                      .loop = true})
          .tensor()
          .to_vector<float>();
    case 3: {  // a failing call: the wrong input width, or a chunk size of 0
      bool threw = false;
      try {
        if (id % 2)
          functional_vmap(*m.lin, {.params = m.lin_p, .args = {m.x_bad}});
        else
          functional_vmap(*m.mlp, {.params = m.mlp_p, .args = {m.x}, .chunk_size = 0});
      } catch (const ValueError&) {
        threw = true;
      }
      if (!threw) throw std::logic_error("the failing call did not fail");
      return {};
    }
    case 4: {  // seeded sampling: reproducible in any thread
      manual_seed(1000 + id);
      nn::FunctionalVmapOptions o{.params = m.drop_p, .args = {m.x}};
      o.randomness = Randomness::Different;
      o.chunk_size = id % 2 ? std::optional<int64_t>(2) : std::nullopt;
      o.loop = id % 4 == 3;
      return functional_vmap(*m.drop, o).tensor().to_vector<float>();
    }
    default:  // unseeded sampling (kind 5): its draws must not repeat anyone's
      return functional_vmap(
                 *m.drop, {.params = m.drop_p, .args = {m.x}, .randomness = Randomness::Different})
          .tensor()
          .to_vector<float>();
  }
}

}  // namespace

TEST_CASE("stress: 8 threads x 500 mixed calls match sequential results; samples do not repeat") {
  const Models m = make_models();
  const int threads = 8, calls = 500, kinds = 6;
  auto kind_of = [&](int t, int i) { return (i + t) % kinds; };
  auto id_of = [&](int t, int i) { return t * calls + i; };
  // sequential results of every deterministic call (kind 4 depends on its id)
  std::map<int, std::vector<float>> expected_kind;
  for (int kind : {0, 2}) expected_kind[kind] = call(m, kind, 0);
  // kind 1's chunk sizes give the unchunked call's bits
  expected_kind[1] =
      nn::functional_vmap(*m.mlp, {.params = m.mlp_p, .args = {m.x}}).tensor().to_vector<float>();
  std::vector<std::vector<float>> expected(threads * calls);
  for (int t = 0; t < threads; ++t)
    for (int i = 0; i < calls; ++i)
      if (kind_of(t, i) == 4) expected[id_of(t, i)] = call(m, 4, id_of(t, i));

  std::vector<std::vector<float>> got(threads * calls);
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < calls; ++i) {
        try {
          got[id_of(t, i)] = call(m, kind_of(t, i), id_of(t, i));
        } catch (...) {
          failures.fetch_add(1);
        }
      }
    });
  for (auto& th : pool) th.join();
  REQUIRE(failures.load() == 0);

  std::set<std::vector<float>> unseeded;
  int n_unseeded = 0, mismatches = 0;
  for (int t = 0; t < threads; ++t)
    for (int i = 0; i < calls; ++i) {
      const int kind = kind_of(t, i), id = id_of(t, i);
      if (kind == 3) continue;
      if (kind == 5) {
        unseeded.insert(got[id]);
        ++n_unseeded;
        continue;
      }
      const auto& want = kind == 4 ? expected[id] : expected_kind[kind];
      if (got[id] != want) ++mismatches;
    }
  CHECK(mismatches == 0);
  CHECK(n_unseeded > 600);
  CHECK(unseeded.size() == static_cast<size_t>(n_unseeded));
  // the seeded samples differ from one another too (distinct seeds)
  std::set<std::vector<float>> seeded;
  for (const auto& e : expected)
    if (!e.empty()) seeded.insert(e);
  CHECK(seeded.size() > 600);
}
