// functional_vmap and state: buffers updated per set, tied and shared entries, and everything put
// back when a call fails.
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

TEST_CASE("BatchNorm in training updates each set's slice of the stacked buffers") {
  manual_seed(5);
  auto make = [] {
    auto seq = std::make_shared<nn::Sequential>();
    seq->push_back(std::make_shared<nn::Linear>(4, 6));
    seq->push_back(std::make_shared<nn::BatchNorm1d>(6));
    return std::shared_ptr<nn::Module>(seq);
  };
  auto nets = ensemble(3, make);
  for (auto& n : nets) n->train();
  TensorDict params = TensorDict::from_modules(nets);
  TensorDict ref_params = params.clone();
  Tensor x = randn({3, 8, 4});
  for (std::optional<int64_t> c : {std::optional<int64_t>{}, std::optional<int64_t>{2}}) {
    Value out = functional_vmap(
        *nets[0],
        {.params = params, .kwargs = {{"input", x}}, .in_dims = {{"input", 0}}, .chunk_size = c});
    Tensor ref = loop_reference(*nets[0], ref_params, {}, {{"input", x}}, {{"input", 0}});
    CHECK(close(out.tensor(), ref, 1e-5));
    for (const char* key : {"1.running_mean", "1.running_var"})
      CHECK(close(params.get(key), ref_params.get(key), 1e-5));
    CHECK(equal(params.get("1.num_batches_tracked"), ref_params.get("1.num_batches_tracked")));
  }
  // the module's own buffers are untouched
  CHECK(equal(nets[0]->named_buffers()[0].second, zeros({6})));
}

TEST_CASE("the module is never mutated; an exception leaves module and params as they were") {
  manual_seed(6);
  auto nets = ensemble(3, [] { return mlp(3, 4, 2); });
  TensorDict params = TensorDict::from_modules(nets);
  auto before = nets[0]->named_parameters();
  TensorDict snapshot = params.clone();
  // a wrong input shape makes the module throw part way
  CHECK_THROWS(functional_vmap(*nets[0], {.params = params, .args = {randn({5, 7})}}));
  CHECK_THROWS(
      functional_vmap(*nets[0], {.params = params, .args = {randn({5, 7})}, .loop = true}));
  auto after = nets[0]->named_parameters();
  for (size_t i = 0; i < before.size(); ++i) CHECK(after[i].second.is_same(before[i].second));
  for (const auto& [k, t] : params.leaves()) CHECK(equal(t, snapshot.get(k)));
  Tensor x = randn({5, 3});
  CHECK(close(functional_vmap(*nets[0], {.params = params, .args = {x}}).tensor(),
              loop_reference(*nets[0], params, {x}, {}, {})));
}

TEST_CASE("a submodule used twice takes one tensor per set; tied entries that differ are refused") {
  manual_seed(9);
  auto nets = ensemble(3, [] {
    auto lin = std::make_shared<nn::Linear>(3, 3);
    return std::make_shared<nn::Sequential>(
        std::initializer_list<std::shared_ptr<nn::Module>>{lin, std::make_shared<nn::ReLU>(), lin});
  });
  TensorDict params = TensorDict::from_modules(nets);
  Tensor x = randn({5, 3});
  std::vector<Tensor> want;
  for (int64_t i = 0; i < 3; ++i) {
    const Tensor w = params.get("0.weight").select(0, i), b = params.get("0.bias").select(0, i);
    want.push_back(linear(relu(linear(x, w, b)), w, b));
  }
  const nn::FunctionalVmapOptions o{.params = params, .args = {x}};
  const Tensor whole = functional_vmap(*nets[0], o).tensor();
  CHECK(close(whole, stack(want, 0)));
  check_same_bits_chunked_and_looped(*nets[0], o, whole, {1, 2});

  // a value given for one use only would be dropped: refused, batched, chunked, looped, unbatched
  TensorDict edited = params.clone();
  edited.set("2.weight", params.get("2.weight") + 1.0);
  for (int mode = 0; mode < 3; ++mode) {
    CAPTURE(mode);
    nn::FunctionalVmapOptions e{.params = edited, .args = {x}};
    if (mode == 1) e.chunk_size = 2;
    if (mode == 2) e.loop = true;
    td::test::check_throws_mentioning<ValueError>(
        [&] { functional_vmap(*nets[0], e); },
        "[functional_vmap] params gives '0.weight' and '2.weight' different tensors");
  }
  td::test::check_throws_mentioning<ValueError>(
      [&] { functional_vmap(*nets[0], {.params = edited[1], .args = {x}}); },
      "'0.weight' and '2.weight'");
  // the same tensor under both names
  edited.set("2.weight", edited.get("0.weight"));
  CHECK(functional_vmap(*nets[0], {.params = edited, .args = {x}}).tensor().shape() ==
        Shape{3, 5, 3});
}

TEST_CASE("BatchNorm in training on an empty batch: empty output, stats kept, counter counts") {
  // as torch 1.13's BatchNorm1d(2).train()(zeros(0, 2)) per set
  std::vector<std::shared_ptr<nn::Module>> nets;
  for (int i = 0; i < 3; ++i) nets.push_back(std::make_shared<nn::BatchNorm1d>(2));
  TensorDict params = TensorDict::from_modules(nets);
  nets[0]->train();
  Value y = nn::functional_vmap(*nets[0], {.params = params, .args = {zeros({0, 2})}});
  CHECK(y.tensor().shape() == Shape{3, 0, 2});
  CHECK(params.get("running_mean").to_vector<float>() == std::vector<float>(6, 0.f));
  CHECK(params.get("running_var").to_vector<float>() == std::vector<float>(6, 1.f));
  CHECK(params.get("num_batches_tracked").to_vector<int64_t>() == std::vector<int64_t>(3, 1));
  // one value per channel is an error naming the per-set shape, not the channel-folded one
  for (bool loop : {false, true}) {
    std::string m = message_of([&] {
      nn::functional_vmap(*nets[0], {.params = params, .args = {zeros({1, 2, 1})}, .loop = loop});
    });
    CHECK(test::has(m, "more than 1 value per channel"));
    CHECK(test::has(m, "[1, 2, 1]"));
  }
}

// as torch ("mixed dtype"): a float64 input with float32 weights (no running stats) or float32
// running stats (no affine) raises, batched as in a loop, and leaves the stats as they were
TEST_CASE("BatchNorm: a weight or running stats of another dtype than the input are a TypeError") {
  struct Case {
    bool affine, track;
  };
  Tensor x = randn({4, 2}).to(kFloat64);
  for (Case c : {Case{true, false}, Case{false, true}}) {
    CAPTURE(c.affine);
    std::vector<std::shared_ptr<nn::Module>> nets;
    for (int i = 0; i < 3; ++i)
      nets.push_back(std::make_shared<nn::BatchNorm1d>(2, 1e-5, 0.1, c.affine, c.track));
    TensorDict params = TensorDict::from_modules(nets);
    for (bool training : {false, true})
      for (bool loop : {false, true}) {
        nets[0]->train(training);
        CAPTURE(training);
        CAPTURE(loop);
        CHECK_THROWS_AS(
            nn::functional_vmap(*nets[0], {.params = params, .args = {x}, .loop = loop}),
            TypeError);
        if (c.track)
          CHECK(params.get("running_mean").to_vector<float>() == std::vector<float>(6, 0.f));
      }
  }
  CHECK_THROWS_AS(batch_norm(x, zeros({2}), ones({2})), TypeError);
}

// Also with the root in eval and only the BatchNorm in training (the snapshot looked at the root).
TEST_CASE("an exception after BatchNorm updated its stats puts the stacked buffers back") {
  manual_seed(9);
  for (bool root_training : {true, false}) {
    auto make = [&] {
      // the last Linear expects 7 features but gets 6: it throws after BatchNorm ran
      auto seq =
          std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
              std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::BatchNorm1d>(6),
              std::make_shared<nn::Linear>(7, 2)});
      seq->train(root_training);
      (*seq)[1]->train();
      return std::shared_ptr<nn::Module>(seq);
    };
    auto nets = ensemble(3, make);
    TensorDict params = TensorDict::from_modules(nets);
    TensorDict before = params.clone();
    Tensor x = randn({5, 4});
    for (bool loop : {false, true}) {
      CHECK_THROWS_AS(functional_vmap(*nets[0], {.params = params, .args = {x}, .loop = loop}),
                      ValueError);
      for (const auto& [key, t] : params.leaves()) CHECK(equal(t, before.get(key)));
    }
    // params without batch dims: one plain call, same promise
    TensorDict one = TensorDict::from_module(*nets[0]).clone();
    TensorDict one_before = one.clone();
    CHECK_THROWS_AS(functional_vmap(*nets[0], {.params = one, .args = {x}}), ValueError);
    for (const auto& [key, t] : one.leaves()) CHECK(equal(t, one_before.get(key)));
  }
}

namespace {
// forward(input): adds one to its buffer `count`, then fails (a user's module in eval mode)
struct CountsThenThrows : nn::Module {
  Tensor count;
  CountsThenThrows() {
    count = register_buffer("count", zeros({2}));
    register_method("forward", &CountsThenThrows::forward, {"input"});
  }
  Tensor forward(const Tensor& input) {
    add_(count, 1.0);
    throw_error<RuntimeError>("[CountsThenThrows] fails after writing its buffer");
    return input;
  }
};
}  // namespace

TEST_CASE("a failed call puts back a buffer a module in eval wrote") {
  Tensor x = randn({5, 4});
  std::vector<std::shared_ptr<nn::Module>> counters{std::make_shared<CountsThenThrows>(),
                                                    std::make_shared<CountsThenThrows>()};
  for (auto& c : counters) c->eval();
  TensorDict cp = TensorDict::from_modules(counters);
  CHECK_THROWS_AS(functional_vmap(*counters[0], {.params = cp, .args = {x}}), RuntimeError);
  CHECK(cp.get("count").to_vector<float>() == std::vector<float>(4, 0.0f));
}

TEST_CASE("buffers updated through params whose batch dims cannot be viewed as one") {
  manual_seed(11);
  std::vector<std::shared_ptr<nn::Module>> bns;
  for (int i = 0; i < 6; ++i) {
    bns.push_back(std::make_shared<nn::BatchNorm1d>(3));
    bns.back()->train();
  }
  // batch [2, 3] laid out transposed: flattening it to 6 sets copies every leaf
  auto transposed = [&] {
    return TensorDict::from_modules(bns).apply(
        [](const Tensor& t) {
          Shape s{3, 2};
          s.insert(s.end(), t.shape().begin() + 1, t.shape().end());
          return t.reshape(s).transpose(0, 1);
        },
        Shape{2, 3});
  };
  Tensor x = randn({8, 3});
  auto at = [](Tensor t, std::initializer_list<int64_t> idx) {
    for (int64_t i : idx) t = t.select(0, i);
    return t.item<double>();
  };
  for (bool loop : {false, true}) {
    TensorDict p = transposed();
    functional_vmap(*bns[0], {.params = p, .args = {x}, .loop = loop});
    // by hand: every set saw the same x, so running_mean = 0.1 * mean(x) and running_var =
    // 0.9 + 0.1 * unbiased var(x), per feature, in every set
    for (int64_t f = 0; f < 3; ++f) {
      double mean = 0, sq = 0;
      for (int64_t r = 0; r < 8; ++r) mean += at(x, {r, f}) / 8.0;
      for (int64_t r = 0; r < 8; ++r) sq += (at(x, {r, f}) - mean) * (at(x, {r, f}) - mean);
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t b = 0; b < 3; ++b) {
          CHECK(at(p.get("running_mean"), {a, b, f}) == doctest::Approx(0.1 * mean).epsilon(1e-5));
          CHECK(at(p.get("running_var"), {a, b, f}) ==
                doctest::Approx(0.9 + 0.1 * sq / 7.0).epsilon(1e-5));
        }
    }
    CHECK(p.get("num_batches_tracked").to_vector<int64_t>() == std::vector<int64_t>(6, 1));
  }
}

TEST_CASE("a failed call leaves the random generator where it was") {
  auto make = [] {
    // dropout draws, then the last Linear (7 features in) meets 6 and throws
    return std::shared_ptr<nn::Module>(
        std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
            std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::Dropout>(0.5),
            std::make_shared<nn::Linear>(7, 2)}));
  };
  auto nets = ensemble(4, make);
  for (auto& n : nets) n->train();
  TensorDict params = TensorDict::from_modules(nets);
  Tensor x = randn({5, 4});
  manual_seed(11);
  Tensor expected = rand({8});
  for (bool loop : {false, true})
    for (std::optional<int64_t> c : {std::optional<int64_t>{}, std::optional<int64_t>{3}}) {
      manual_seed(11);
      CHECK_THROWS_AS(functional_vmap(*nets[0], {.params = params,
                                                 .args = {x},
                                                 .randomness = Randomness::Different,
                                                 .chunk_size = c,
                                                 .loop = loop}),
                      ValueError);
      CHECK(equal(rand({8}), expected));
    }
}

TEST_CASE(
    "a write into a leaf every set shares raises, batched or in a loop, and changes nothing") {
  manual_seed(12);
  auto bn = std::make_shared<nn::BatchNorm1d>(2);
  bn->train();
  std::vector<std::shared_ptr<nn::Module>> same(3, bn);
  TensorDict params = TensorDict::from_modules(same, {.expand_identical = true});
  REQUIRE(params.get("running_mean").stride(0) == 0);
  TensorDict before = params.clone();
  Tensor xs = randn({3, 4, 2});
  for (bool loop : {false, true}) {
    CAPTURE(loop);
    std::string m = message_of([&] {
      functional_vmap(
          *bn,
          {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}, .loop = loop});
    });
    // the loop names the key it compared; the batched call, the in-place op that met the
    // expanded tensor and the shared buffers (not the shared weight and bias, which no set writes)
    CHECK(m.find(loop ? "'running_mean' of shape [2]" : "cannot write into an expanded tensor") !=
          std::string::npos);
    if (!loop)
      CHECK(m.find("clone it first: params' 'running_mean', 'running_var', 'num_batches_tracked' "
                   "are shared by every set (stacked with stride 0") != std::string::npos);
    CHECK_THROWS_AS(
        functional_vmap(
            *bn,
            {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}, .loop = loop}),
        RuntimeError);
    for (const auto& [key, t] : params.leaves()) CHECK(equal(t, before.get(key)));
  }
  // in eval mode nothing is written: the shared leaves are fine
  bn->eval();
  Value out = functional_vmap(
      *bn, {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}, .loop = true});
  CHECK(out.tensor().shape() == Shape{3, 4, 2});
}
