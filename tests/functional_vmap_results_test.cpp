// functional_vmap's results against an independent reference (each set's parameters put into the
// module with to_module, the module called plainly, the results stacked), bit for bit across
// chunk sizes and the loop; randomness; batch sizes of every rank.
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

TEST_CASE("the reference page's examples") {
  manual_seed(0);
  std::vector<std::shared_ptr<nn::Module>> nets;
  for (int i = 0; i < 4; ++i) nets.push_back(std::make_shared<nn::Linear>(3, 1));
  TensorDict params = TensorDict::from_modules(nets);
  CHECK(params.batch_size() == Shape{4});
  Tensor x = randn({10, 3});
  Value y = functional_vmap(*nets[0], {.params = params, .args = {x}});
  CHECK(y.tensor().shape() == Shape{4, 10, 1});
  // each set is its own Linear: y[i] = x @ w_i^T + b_i, checked by hand loops
  auto xv = x.to_vector<float>();
  auto yv = y.tensor().contiguous().to_vector<float>();
  for (int i = 0; i < 4; ++i) {
    auto w = params.get("weight")[i].contiguous().to_vector<float>();
    float b = params.get("bias")[i].item<float>();
    for (int n = 0; n < 10; ++n) {
      float acc = b;
      for (int k = 0; k < 3; ++k) acc += xv[n * 3 + k] * w[k];
      CHECK(yv[i * 10 + n] == doctest::Approx(acc).epsilon(1e-5));
    }
  }
  Tensor x_per_set = randn({4, 10, 3});
  Value z = functional_vmap(
      *nets[0], {.params = params, .kwargs = {{"input", x_per_set}}, .in_dims = {{"input", 0}}});
  CHECK(z.tensor().shape() == Shape{4, 10, 1});
  for (int i = 0; i < 4; ++i) CHECK(close(z.tensor()[i], (*nets[i])({x_per_set[i]}).tensor()));
}

TEST_CASE("MLP: shared and per-set inputs, in_dims 0, 1 and -1, chunks and loop") {
  manual_seed(1);
  const int B = 5;
  auto nets = ensemble(B, [] { return mlp(6, 16, 3); });
  TensorDict params = TensorDict::from_modules(nets);
  nn::Module& m = *nets[0];
  Tensor x = randn({7, 6});
  Tensor ref_shared = loop_reference(m, params, {x}, {}, {});
  CHECK(close(functional_vmap(m, {.params = params, .args = {x}}).tensor(), ref_shared));
  for (int64_t c : {1, 3, B, B + 4})
    CHECK(close(functional_vmap(m, {.params = params, .args = {x}, .chunk_size = c}).tensor(),
                ref_shared));
  CHECK(close(functional_vmap(m, {.params = params, .args = {x}, .loop = true}).tensor(),
              ref_shared));

  Tensor xs0 = randn({B, 7, 6});
  Tensor xs1 = randn({7, B, 6});
  Tensor xsm = randn({7, 6, B});  // in_dims -1: the sets are the last dim
  struct Case {
    Tensor x;
    int64_t dim;
  };
  for (auto [xi, d] : {Case{xs0, 0}, Case{xs1, 1}, Case{xsm, -1}}) {
    int64_t pd = d < 0 ? d + xi.dim() : d;
    Tensor ref = loop_reference(m, params, {}, {{"input", xi}}, {{"input", pd}});
    for (std::optional<int64_t> c : {std::optional<int64_t>{}, std::optional<int64_t>{1},
                                     std::optional<int64_t>{3}, std::optional<int64_t>{B}}) {
      Value out = functional_vmap(m, {.params = params,
                                      .kwargs = {{"input", xi}},
                                      .in_dims = {{"input", d}},
                                      .chunk_size = c});
      CHECK(close(out.tensor(), ref));
    }
    Value looped = functional_vmap(
        m, {.params = params, .kwargs = {{"input", xi}}, .in_dims = {{"input", d}}, .loop = true});
    CHECK(close(looped.tensor(), ref));
  }
}

TEST_CASE("two batch dims come back unflattened and equal a nested loop") {
  manual_seed(2);
  auto nets = ensemble(6, [] { return mlp(4, 8, 2); });
  TensorDict params = TensorDict::from_modules(nets).reshape({2, 3});
  CHECK(params.batch_size() == Shape{2, 3});
  Tensor x = randn({2, 3, 5, 4});  // per set, batch dims at 0..1
  Value out = functional_vmap(
      *nets[0],
      {.params = params, .kwargs = {{"input", x}}, .in_dims = {{"input", 0}}, .chunk_size = 4});
  REQUIRE(out.tensor().shape() == Shape{2, 3, 5, 2});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      CHECK(close(out.tensor()[i][j], (*nets[i * 3 + j])({x[i][j]}).tensor()));
  Tensor xs = randn({5, 2, 3, 4});  // batch dims at 1..2
  Value out2 = functional_vmap(
      *nets[0], {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 1}}});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      CHECK(
          close(out2.tensor()[i][j], (*nets[i * 3 + j])({xs.select(1, i).select(1, j)}).tensor()));
}

TEST_CASE("an empty batch size calls the module once with params") {
  manual_seed(3);
  auto net = mlp(3, 4, 2);
  auto other = mlp(3, 4, 2);
  TensorDict params = TensorDict::from_module(*other);
  Tensor x = randn({5, 3});
  Value out = functional_vmap(*net, {.params = params, .args = {x}});
  CHECK(close(out.tensor(), (*other)({x}).tensor()));
}

TEST_CASE("a batch of size 0 gives empty outputs of the per-set shape") {
  auto nets = ensemble(2, [] { return mlp(3, 4, 2); });
  TensorDict params = TensorDict::from_modules(nets).slice(0, 0);
  REQUIRE(params.batch_size() == Shape{0});
  Tensor x = randn({5, 3});
  for (bool loop : {false, true})
    for (std::optional<int64_t> c : {std::optional<int64_t>{}, std::optional<int64_t>{2}}) {
      Value out =
          functional_vmap(*nets[0], {.params = params, .args = {x}, .chunk_size = c, .loop = loop});
      CHECK(out.tensor().shape() == Shape{0, 5, 2});
    }
}

TEST_CASE("randomness: different is bit-identical across chunking and loop; same; error") {
  auto nets = ensemble(4, [] { return mlp(5, 32, 3, 0.5); });
  for (auto& n : nets) n->train();
  TensorDict params = TensorDict::from_modules(nets);
  Tensor x = randn({6, 5});
  auto run = [&](Randomness r, std::optional<int64_t> c, bool loop) {
    manual_seed(42);
    return functional_vmap(
               *nets[0],
               {.params = params, .args = {x}, .randomness = r, .chunk_size = c, .loop = loop})
        .tensor();
  };
  Tensor base = run(Randomness::Different, std::nullopt, false);
  for (int64_t c : {1, 2, 3, 4}) CHECK(equal(run(Randomness::Different, c, false), base));
  CHECK(equal(run(Randomness::Different, std::nullopt, true), base));
  // loop with randomness "error" draws as "different" does
  CHECK(equal(run(Randomness::Error, std::nullopt, true), base));
  // the dropout masks differ between sets: set 0's output differs from what set 0's
  // parameters give under set 1's mask
  Tensor same = run(Randomness::Same, std::nullopt, false);
  for (int64_t c : {1, 3}) CHECK(equal(run(Randomness::Same, c, false), same));
  // with identical parameters in every set, "same" gives identical outputs and "different" not
  std::vector<std::shared_ptr<nn::Module>> clones(4, nets[0]);
  TensorDict shared = TensorDict::from_modules(clones);
  manual_seed(7);
  Tensor s =
      functional_vmap(*nets[0], {.params = shared, .args = {x}, .randomness = Randomness::Same})
          .tensor();
  manual_seed(7);
  Tensor d = functional_vmap(*nets[0],
                             {.params = shared, .args = {x}, .randomness = Randomness::Different})
                 .tensor();
  for (int i = 1; i < 4; ++i) {
    CHECK(equal(s[i], s[0]));
    CHECK_FALSE(equal(d[i], d[0]));
  }
  CHECK_THROWS_AS(functional_vmap(*nets[0], {.params = params, .args = {x}}), RuntimeError);
  // eval-mode dropout is not random
  for (auto& n : nets) n->eval();
  CHECK_NOTHROW(functional_vmap(*nets[0], {.params = params, .args = {x}}));
}

// Tanh's vector code and std::tanh differ in the last bits: the elements a call left to a
// scalar tail (15 a set here, a tail of 16-float vectors on AVX-512) moved with the chunk size.
TEST_CASE("Tanh and GELU give the same bits with any chunk_size, loop and input layout") {
  manual_seed(11);
  auto nets = ensemble(7, [] {
    return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::Tanh>(),
        std::make_shared<nn::Linear>(3, 3), std::make_shared<nn::GELU>()});
  });
  TensorDict params = TensorDict::from_modules(nets);
  // the per-set inputs with the sets at dim 1
  check_shared_and_per_set(*nets[0], params, randn({5, 4}), randn({5, 7, 4}), 1,
                           {1, 2, 3, 4, 5, 6, 7});
}

// A few input rows take dot products over the weights for any width (six rows from a depth of
// 64: the second layer here); the output columns of a set sit at other places in the shared
// input's single product than in a set's own.
TEST_CASE("a few input rows: the same bits with any chunk_size, loop and input layout") {
  manual_seed(12);
  auto nets = ensemble(6, [] { return mlp(37, 70, 10); });
  TensorDict params = TensorDict::from_modules(nets);
  for (int64_t rows : {1, 2, 6}) {
    CAPTURE(rows);
    check_shared_and_per_set(*nets[0], params, randn({rows, 37}), randn({6, rows, 37}), 0,
                             {1, 4, 5});
  }
}

// Its score products are small enough for Eigen's coefficient-based product, whose bits on
// AVX-512 depended on where a set's output sat in the chunk.
// vmap normalised and then applied the per-set weights in float32; a call alone applies them
// in the kernel, in double: the last bits differed from loop = true.
TEST_CASE("LayerNorm with per-set weights gives the bits of each set's call alone") {
  manual_seed(13);
  auto nets = ensemble(5, [] {
    return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::LayerNorm>(IntList{6})});
  });
  TensorDict params =
      TensorDict::from_modules(nets).apply([](const Tensor& t) { return randn(t.shape()); });
  Tensor x = randn({3, 4}), xs = randn({5, 3, 4});
  const nn::FunctionalVmapOptions shared{.params = params, .args = {x}};
  const nn::FunctionalVmapOptions per_set{
      .params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}};
  for (const auto& o : {shared, per_set}) {
    const Tensor whole = functional_vmap(*nets[0], o).tensor();
    check_same_bits_chunked_and_looped(*nets[0], o, whole, {1, 2, 3});
  }
}

// The same for BatchNorm on a shared input without running stats: only its affine weights are
// per set, and the rule applied them after the kernel, in float32.
TEST_CASE("BatchNorm with per-set weights on a shared input gives each set's bits") {
  manual_seed(14);
  auto nets = ensemble(4, [] {
    return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::BatchNorm1d>(5, 1e-5, 0.1, true, false),
        std::make_shared<nn::Linear>(5, 2)});
  });
  for (auto& n : nets) n->train();
  TensorDict params =
      TensorDict::from_modules(nets).apply([](const Tensor& t) { return randn(t.shape()); });
  const nn::FunctionalVmapOptions o{.params = params, .args = {randn({6, 5})}};
  const Tensor whole = functional_vmap(*nets[0], o).tensor();
  check_same_bits_chunked_and_looped(*nets[0], o, whole, {1, 3});
}

// Also one query (a set alone keeps a transposed operand that the batch copies).
TEST_CASE("MultiheadAttention gives the same bits with any chunk_size and loop") {
  manual_seed(12);
  for (auto [e, h, l] : {std::array<int64_t, 3>{6, 1, 5}, {28, 4, 1}}) {
    CAPTURE(e);
    auto nets = ensemble(
        7, [e, h] { return std::make_shared<nn::MultiheadAttention>(e, h, 0.0, true, true); });
    TensorDict params =
        TensorDict::from_modules(nets).apply([](const Tensor& t) { return randn(t.shape()); });
    Tensor q = randn({1, l, e}), k = randn({1, 4, e}), v = randn({1, 4, e});
    nn::FunctionalVmapOptions o{.params = params,
                                .kwargs = {{"query", q}, {"key", k}, {"value", v}}};
    const Tensor whole = functional_vmap(*nets[0], o).list().at(0).tensor();
    for (int64_t c = 1; c <= 7; ++c) {
      CAPTURE(c);
      o.chunk_size = c;
      CHECK(equal(functional_vmap(*nets[0], o).list().at(0).tensor(), whole));
    }
    o.chunk_size = std::nullopt;
    o.loop = true;
    CHECK(equal(functional_vmap(*nets[0], o).list().at(0).tensor(), whole));
  }
}

TEST_CASE("modules without parameters: the sets come from params.batch_size") {
  std::vector<std::shared_ptr<nn::Module>> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(std::make_shared<nn::ReLU>());
  TensorDict params = TensorDict::from_modules(ids);
  REQUIRE(params.batch_size() == Shape{3});
  Tensor x = tensor({-1.0f, 2.0f, -3.0f, 4.0f}).view({2, 2});
  Tensor relu_x = tensor({0.0f, 2.0f, 0.0f, 4.0f}).view({2, 2});
  for (bool loop : {false, true}) {
    Value out = functional_vmap(*ids[0], {.params = params, .args = {x}, .loop = loop});
    REQUIRE(out.tensor().shape() == Shape{3, 2, 2});
    for (int i = 0; i < 3; ++i) CHECK(equal(out.tensor().select(0, i), relu_x));
  }
  // per-set inputs too
  Tensor xs = randn({3, 2, 2});
  Value out = functional_vmap(
      *ids[0], {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}});
  CHECK(equal(out.tensor(), relu(xs)));
}

TEST_CASE("randomness 'different' over two batch dims: set (i, j) draws as flat set 3i + j") {
  auto nets = ensemble(6, [] { return mlp(5, 16, 3, 0.5); });
  for (auto& n : nets) n->train();
  TensorDict flat = TensorDict::from_modules(nets);
  TensorDict grid = flat.reshape({2, 3});
  Tensor x = randn({4, 5});
  auto run = [&](const TensorDict& p, std::optional<int64_t> c, bool loop) {
    manual_seed(21);
    return functional_vmap(*nets[0], {.params = p,
                                      .args = {x},
                                      .randomness = Randomness::Different,
                                      .chunk_size = c,
                                      .loop = loop})
        .tensor();
  };
  Tensor base = run(flat, std::nullopt, false);  // [6, 4, 3]
  for (std::optional<int64_t> c : {std::optional<int64_t>{}, std::optional<int64_t>{4}})
    for (bool loop : {false, true}) {
      Tensor g = run(grid, c, loop);
      REQUIRE(g.shape() == Shape{2, 3, 4, 3});
      CHECK(equal(g.reshape({6, 4, 3}), base));
    }
}
