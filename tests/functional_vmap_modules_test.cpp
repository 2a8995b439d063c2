// functional_vmap over every module kind, and convolution ensembles.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/functional_vmap_helpers.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;
using nn::functional_vmap;

namespace {

// One module of each kind with the inputs its forward takes (per set, unbatched).
struct ModuleCase {
  const char* name;
  std::function<std::shared_ptr<nn::Module>()> make;
  std::function<ValueDict()> inputs;  // fresh per-set inputs
  bool train = false;
};

std::vector<ModuleCase> module_cases() {
  auto seq = [](std::vector<std::shared_ptr<nn::Module>> m) {
    return std::shared_ptr<nn::Module>(std::make_shared<nn::Sequential>(m));
  };
  auto x = [](Shape s) { return [s] { return ValueDict{{"input", randn(s)}}; }; };
  return {
      {"MLP", [] { return mlp(4, 8, 3); }, x({5, 4})},
      {"LayerNorm MLP",
       [=] {
         return seq({std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::LayerNorm>(8),
                     std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(8, 2)});
       },
       x({5, 4})},
      {"BatchNorm eval",
       [=] {
         auto m = seq({std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::BatchNorm1d>(6)});
         return m;
       },
       x({7, 4})},
      {"BatchNorm train",
       [=] {
         return seq({std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::BatchNorm1d>(6)});
       },
       x({7, 4}), true},
      {"CNN",
       [=] {
         return seq({std::make_shared<nn::Conv2d>(2, 3, 3, 1, 1), std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(),
                     std::make_shared<nn::Linear>(12, 2)});
       },
       x({2, 2, 4, 4})},
      {"CNN with AvgPool2d",
       [=] {
         return seq({std::make_shared<nn::Conv2d>(2, 3, 3, 1, 1),
                     std::make_shared<nn::AvgPool2d>(3, 2, 1, true, false),
                     std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(27, 2)});
       },
       x({2, 2, 4, 4})},
      {"Conv2d reflect, same",
       [=] {
         return seq(
             {std::make_shared<nn::Conv2d>(2, 3, nn::Size2{2, 3}, 1, "same", 1, 1, true, "reflect"),
              std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(48, 2)});
       },
       x({2, 2, 4, 4})},
      {"Embedding",
       [] { return std::shared_ptr<nn::Module>(std::make_shared<nn::Embedding>(9, 3)); },
       [] {
         return ValueDict{{"input", tensor<int64_t>({1, 8, 0, 3, 3, 5}, {2, 3})}};
       }},
      {"MultiheadAttention",
       [] {
         return std::shared_ptr<nn::Module>(
             std::make_shared<nn::MultiheadAttention>(8, 2, 0.0, true, true));
       },
       [] {
         return ValueDict{
             {"query", randn({2, 4, 8})}, {"key", randn({2, 5, 8})}, {"value", randn({2, 5, 8})}};
       }},
      {"MultiheadAttention kdim, vdim, bias_kv, zero_attn",
       [] {
         return std::shared_ptr<nn::Module>(
             std::make_shared<nn::MultiheadAttention>(8, 2, 0.0, true, true, true, true, 5, 3));
       },
       [] {
         return ValueDict{
             {"query", randn({2, 4, 8})}, {"key", randn({2, 5, 5})}, {"value", randn({2, 5, 3})}};
       }},
  };
}

// The Tensor leaves of a module output, in order (a tensor, or MHA's (output, weights)).
std::vector<Tensor> leaves_of(const Value& v) {
  std::vector<Tensor> out;
  for_each_tensor(v, [&](const Tensor& t) { out.push_back(t); });
  return out;
}

}  // namespace

TEST_CASE("every module kind: functional_vmap equals the modules called one by one") {
  const int64_t B = 4;
  for (const auto& c : module_cases()) {
    CAPTURE(c.name);
    manual_seed(21);
    std::vector<std::shared_ptr<nn::Module>> mods;
    for (int64_t i = 0; i < B; ++i) mods.push_back(c.make());
    for (auto& m : mods) m->train(c.train);
    nn::Module& m = *mods[0];
    const TensorDict params = TensorDict::from_modules(mods);
    std::vector<ValueDict> per_set;
    for (int64_t i = 0; i < B; ++i) per_set.push_back(c.inputs());
    const ValueDict shared = c.inputs();

    // the reference: module i alone (to_module), on its own copy of the parameters
    auto reference = [&](const std::function<ValueDict(int64_t)>& kwargs_of) {
      TensorDict ref_params = params.clone();
      std::vector<std::vector<Tensor>> outs;
      for (int64_t i = 0; i < B; ++i) {
        auto guard = ref_params[i].to_module(m);
        outs.push_back(leaves_of(m({}, kwargs_of(i))));
      }
      std::vector<Tensor> stacked;
      for (size_t k = 0; k < outs[0].size(); ++k) {
        std::vector<Tensor> parts;
        for (auto& o : outs) parts.push_back(o[k]);
        stacked.push_back(stack(parts, 0));
      }
      return std::make_pair(stacked, ref_params);
    };
    auto check = [&](const nn::FunctionalVmapOptions& o,
                     const std::pair<std::vector<Tensor>, TensorDict>& ref) {
      nn::FunctionalVmapOptions opts = o;
      opts.params = o.params.clone();  // BatchNorm in training updates it
      auto got = leaves_of(functional_vmap(m, opts));
      REQUIRE(got.size() == ref.first.size());
      for (size_t k = 0; k < got.size(); ++k) CHECK(close(got[k], ref.first[k], 1e-5));
      for (const auto& [key, t] : ref.second.leaves())
        CHECK(allclose(opts.params.get(key).to(kFloat64), t.to(kFloat64), 1e-5, 1e-6));
    };

    // shared inputs, chunk sizes 1, 3, B and none, and loop
    auto ref_shared = reference([&](int64_t) { return shared; });
    for (std::optional<int64_t> chunk : {std::optional<int64_t>{}, std::optional<int64_t>{1},
                                         std::optional<int64_t>{3}, std::optional<int64_t>{B}})
      check({.params = params, .kwargs = shared, .chunk_size = chunk}, ref_shared);
    check({.params = params, .kwargs = shared, .loop = true}, ref_shared);

    // per-set inputs stacked at dim 0, 1 and -1
    auto ref_per_set = reference([&](int64_t i) { return per_set[i]; });
    for (int64_t d : {0, 1, -1}) {
      CAPTURE(d);
      ValueDict kwargs;
      std::map<std::string, int64_t> in_dims;
      for (const auto& [key, v] : per_set[0].items()) {
        std::vector<Tensor> parts;
        for (int64_t i = 0; i < B; ++i) parts.push_back(per_set[i].at(key).tensor());
        kwargs.set(key, stack(parts, d < 0 ? parts[0].dim() + 1 + d : d));
        in_dims[key] = d;
      }
      for (std::optional<int64_t> chunk : {std::optional<int64_t>{}, std::optional<int64_t>{3}})
        check({.params = params, .kwargs = kwargs, .in_dims = in_dims, .chunk_size = chunk},
              ref_per_set);
      check({.params = params, .kwargs = kwargs, .in_dims = in_dims, .loop = true}, ref_per_set);
    }
  }
}

TEST_CASE("a conv ensemble on a shared input: the same bits for any chunk_size or a loop") {
  // one GEMM of B*O rows rounds differently from one of O rows, so the sets' values depended on
  // how many were computed at once
  manual_seed(31);
  auto nets = ensemble(5, [] { return std::make_shared<nn::Conv2d>(2, 4, 3); });
  TensorDict params = TensorDict::from_modules(nets);
  nn::Module& m = *nets[0];
  Tensor x = randn({3, 2, 8, 8});
  Tensor base = functional_vmap(m, {.params = params, .args = {x}}).tensor();
  REQUIRE(base.shape() == Shape{5, 3, 4, 6, 6});
  for (int i = 0; i < 5; ++i) CHECK(close(base[i], (*nets[i])({x}).tensor(), 1e-5));
  for (int64_t c : {1, 2, 3, 4, 5, 9})
    CHECK(
        equal(functional_vmap(m, {.params = params, .args = {x}, .chunk_size = c}).tensor(), base));
  CHECK(equal(functional_vmap(m, {.params = params, .args = {x}, .loop = true}).tensor(), base));
}

TEST_CASE("a conv ensemble on per-set inputs: the same bits for any chunk_size or a loop") {
  // vmap folds the sets into groups; the kernel makes their columns a block of groups at a
  // time (each set's are 36 x 2048 floats, 288 KB: blocks of 3), which must not change a bit
  manual_seed(33);
  auto nets = ensemble(7, [] { return std::make_shared<nn::Conv2d>(4, 5, 3, 1, 1); });
  TensorDict params = TensorDict::from_modules(nets);
  nn::Module& m = *nets[0];
  Tensor xs = randn({7, 2, 4, 32, 32});
  auto run = [&](std::optional<int64_t> c, bool loop) {
    return functional_vmap(m, {.params = params,
                               .kwargs = {{"input", xs}},
                               .in_dims = {{"input", 0}},
                               .chunk_size = c,
                               .loop = loop})
        .tensor();
  };
  Tensor base = run(std::nullopt, false);
  REQUIRE(base.shape() == Shape{7, 2, 5, 32, 32});
  for (int i : {0, 6}) CHECK(close(base[i], (*nets[i])({xs[i]}).tensor(), 1e-5));
  for (int64_t c : {1, 2, 7}) CHECK(equal(run(c, false), base));
  CHECK(equal(run(std::nullopt, true), base));
}

TEST_CASE("a grouped conv ensemble on a shared input, and batched again by an outer vmap") {
  manual_seed(32);
  auto nets = ensemble(4, [] { return std::make_shared<nn::Conv2d>(4, 6, 3, 1, 1, 1, 2); });
  TensorDict params = TensorDict::from_modules(nets);
  nn::Module& m = *nets[0];
  Tensor x = randn({2, 4, 5, 5});
  Tensor base = functional_vmap(m, {.params = params, .args = {x}}).tensor();
  REQUIRE(base.shape() == Shape{4, 2, 6, 5, 5});
  for (int i = 0; i < 4; ++i) CHECK(equal(base[i], (*nets[i])({x}).tensor()));
  for (int64_t c : {1, 3})
    CHECK(
        equal(functional_vmap(m, {.params = params, .args = {x}, .chunk_size = c}).tensor(), base));
  // the inner call's filter banks meet an input batched at the outer level
  Tensor xs = randn({3, 2, 4, 5, 5});
  auto outer = vmap(
      [&](Tensor xa) { return functional_vmap(m, {.params = params, .args = {xa}}).tensor(); });
  Tensor ys = outer(xs);
  REQUIRE(ys.shape() == Shape{3, 4, 2, 6, 5, 5});
  for (int a = 0; a < 3; ++a)
    for (int i = 0; i < 4; ++i) CHECK(close(ys[a][i], (*nets[i])({xs[a]}).tensor(), 1e-5));
  ConvAttrs bad;
  bad.sets = 4;
  CHECK_THROWS_WITH_AS(call_op1(OpId::conv2d, {x, ones({6, 2, 3, 3})}, bad),
                       doctest::Contains("do not split into 4 sets"), ValueError);
}
