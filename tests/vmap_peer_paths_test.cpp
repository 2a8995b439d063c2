// Paths the peers' own suites test (tensordict's test_functorch.py / test_nn.py, PyTorch's
// test_vmap.py): tensordict's ensemble recipe, structured outputs, nested vmaps with out_dims,
// chunking with randomness off dim 0, rand_like / randn_like, vmaps with nothing to map.
#include <doctest/doctest.h>

#include <memory>
#include <optional>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using td::test::check_throws_mentioning;

namespace {

std::shared_ptr<nn::Sequential> small_mlp() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(4, 2)});
}

// Returns a dict, a TensorDict or a list holding None, by method.
struct Structured : nn::Module {
  std::shared_ptr<nn::Linear> lin;
  Structured() {
    lin = register_module("lin", std::make_shared<nn::Linear>(3, 2));
    register_method("forward", &Structured::as_dict, {"input"});
    register_method("as_tensordict", &Structured::as_tensordict, {"input"});
    register_method("with_none", &Structured::with_none, {"input"});
  }
  ValueDict as_dict(const Tensor& x) {
    Tensor y = lin->forward(x);
    return {{"y", y}, {"nested", ValueDict{{"twice", y * 2.0}}}};
  }
  TensorDict as_tensordict(const Tensor& x) {
    Tensor y = lin->forward(x);
    return TensorDict({{"y", y}, {"sum", y.sum(-1)}}, Shape{x.size(0)});
  }
  ValueList with_none(const Tensor& x) { return {Value(lin->forward(x)), Value()}; }
};

// Each set of params alone: to_module, then a plain call.
std::vector<Value> single_calls(nn::Module& m, const TensorDict& params, const std::string& method,
                                const Tensor& x) {
  std::vector<Value> out;
  for (int64_t i = 0; i < params.batch_size()[0]; ++i) {
    auto guard = params[i].to_module(m);
    out.push_back(m.call_method(method, {x}));
  }
  return out;
}

}  // namespace

TEST_CASE("tensordict's ensemble recipe: vmap over params.to_module(module) then the module") {
  manual_seed(11);
  std::vector<std::shared_ptr<nn::Sequential>> nets;
  for (int i = 0; i < 4; ++i) nets.push_back(small_mlp());
  TensorDict params = TensorDict::from_modules(nets);
  auto& m = *nets[0];
  const Tensor x = randn({5, 3});
  auto call = [&m](TensorDict p, Tensor input) {
    auto guard = p.to_module(m);
    return m({input}).tensor();
  };
  for (std::optional<int64_t> chunk : {std::optional<int64_t>(), std::optional<int64_t>(3)}) {
    CAPTURE(chunk.has_value());
    const Tensor y = vmap(call, {.in_dims = {0, std::nullopt}, .chunk_size = chunk})(params, x);
    REQUIRE(y.shape() == Shape{4, 5, 2});
    for (int64_t i = 0; i < 4; ++i) CHECK(allclose(y.select(0, i), (*nets[i])({x}).tensor()));
  }
  // the module's own tensors are back, and it still runs alone
  CHECK(nets[0]->named_parameters()[0].second.is_same(
      std::dynamic_pointer_cast<nn::Linear>(nets[0]->children()[0])->weight.get()));
  CHECK(!nets[0]->named_parameters()[0].second.is_batched());
}

TEST_CASE("functional_vmap: forward returning a dict, a TensorDict, a list holding None") {
  manual_seed(12);
  std::vector<std::shared_ptr<Structured>> nets;
  for (int i = 0; i < 3; ++i) nets.push_back(std::make_shared<Structured>());
  TensorDict params = TensorDict::from_modules(nets);
  const Tensor x = randn({4, 3});
  for (bool loop : {false, true}) {
    CAPTURE(loop);
    const Value d = nn::functional_vmap(*nets[0], {.params = params, .args = {x}, .loop = loop});
    const Value td = nn::functional_vmap(
        *nets[0], {.params = params, .args = {x}, .method = "as_tensordict", .loop = loop});
    const Value wn = nn::functional_vmap(
        *nets[0], {.params = params, .args = {x}, .chunk_size = 2, .method = "with_none"});
    const auto want_d = single_calls(*nets[0], params, "forward", x);
    const auto want_td = single_calls(*nets[0], params, "as_tensordict", x);
    REQUIRE(td.tensordict().batch_size() == Shape{3, 4});
    CHECK(wn[1].is_none());
    for (int64_t i = 0; i < 3; ++i) {
      CHECK(allclose(d["y"].tensor().select(0, i), want_d[i]["y"].tensor()));
      CHECK(allclose(d["nested"]["twice"].tensor().select(0, i),
                     want_d[i]["nested"]["twice"].tensor()));
      CHECK(allclose(td.tensordict().get("sum").select(0, i), want_td[i].tensordict().get("sum")));
      CHECK(allclose(wn[0].tensor().select(0, i), want_d[i]["y"].tensor()));
    }
  }
}

TEST_CASE("functional_vmap: MultiheadAttention with need_weights=False returns (output, None)") {
  manual_seed(13);
  std::vector<std::shared_ptr<nn::MultiheadAttention>> nets;
  for (int i = 0; i < 3; ++i)
    nets.push_back(std::make_shared<nn::MultiheadAttention>(4, 2, 0.0, true, true));
  TensorDict params = TensorDict::from_modules(nets);
  const Tensor q = randn({2, 5, 4});
  const ValueDict kw{{"query", q}, {"key", q}, {"value", q}, {"need_weights", false}};
  for (bool loop : {false, true}) {
    const Value out = nn::functional_vmap(*nets[0], {.params = params, .kwargs = kw, .loop = loop});
    REQUIRE(out.is_list());
    CHECK(out[1].is_none());
    REQUIRE(out[0].tensor().shape() == Shape{3, 2, 5, 4});
    for (int64_t i = 0; i < 3; ++i)
      CHECK(allclose(out[0].tensor().select(0, i), (*nets[i])({}, kw)[0].tensor(), 1e-5, 1e-6));
  }
}

TEST_CASE("nested vmap with non-default out_dims, and a no-op inner vmap") {
  manual_seed(14);
  const Tensor x = randn({2, 3, 4}), y = randn({4});
  // inner maps dim 1 of its [3, 4] slice and puts it last; outer maps dim 0 and puts it at 1
  auto inner = vmap([](Tensor a, Tensor b) { return a * b; }, {.in_dims = {1, 0}, .out_dims = 1});
  const Tensor z = vmap(inner, {.in_dims = {0, std::nullopt}, .out_dims = 1})(x, y);
  REQUIRE(z.shape() == Shape{3, 2, 4});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 4; ++k)
      CHECK(allclose(z.select(1, i).select(1, k), x.select(0, i).select(1, k) * y[k]));
  // an inner vmap that maps nothing the function uses: its output is expanded at its out_dim
  auto noop =
      vmap([](Tensor, Tensor b) { return b; }, {.in_dims = {0, std::nullopt}, .out_dims = 1});
  const Tensor e = vmap(noop, {.in_dims = {0, std::nullopt}, .out_dims = 2})(x, y);
  REQUIRE(e.shape() == Shape{4, 3, 2});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(equal(e.select(2, i).select(1, j), y));
  // the identity as the inner vmap
  const Tensor same = vmap(vmap([](Tensor a) { return a; }), {.in_dims = {1}, .out_dims = 1})(x);
  CHECK(equal(same, x));
}

TEST_CASE("chunk_size with randomness, sets at dims other than 0") {
  const Tensor x = zeros({3, 5, 2});  // sets at dim 1
  auto draw = [](Tensor t) { return t + rand_like(t) + dropout(ones_like(t), 0.5, true); };
  for (Randomness r : {Randomness::Different, Randomness::Same}) {
    CAPTURE(static_cast<int>(r));
    manual_seed(21);
    const Tensor whole = vmap(draw, {.in_dims = {1}, .out_dims = {2}, .randomness = r})(x);
    REQUIRE(whole.shape() == Shape{3, 2, 5});
    for (int64_t c : {1, 2, 4, 5, 9}) {
      CAPTURE(c);
      manual_seed(21);
      CHECK(
          equal(vmap(draw, {.in_dims = {1}, .out_dims = {2}, .randomness = r, .chunk_size = c})(x),
                whole));
    }
    // same: every set's slice alike; different: no two alike
    for (int64_t i = 1; i < 5; ++i)
      CHECK(equal(whole.select(2, i), whole.select(2, 0)) == (r == Randomness::Same));
  }
}

TEST_CASE("rand_like and randn_like under each randomness mode") {
  const Tensor x = zeros({4, 3});
  for (auto like : {&rand_like, &randn_like}) {
    auto f = [like](Tensor t) { return like(t); };
    CHECK_THROWS_AS(vmap(f)(x), RuntimeError);
    manual_seed(5);
    const Tensor diff = vmap(f, {.randomness = Randomness::Different})(x);
    manual_seed(5);
    const Tensor same = vmap(f, {.randomness = Randomness::Same})(x);
    REQUIRE(diff.shape() == Shape{4, 3});
    REQUIRE(same.shape() == Shape{4, 3});
    for (int64_t i = 1; i < 4; ++i) {
      CHECK(!equal(diff.select(0, i), diff.select(0, 0)));
      CHECK(equal(same.select(0, i), same.select(0, 0)));
    }
    // a shared input: still per set under "different"
    const Tensor shared =
        vmap([like](Tensor t, Tensor u) { return like(u) + t; },
             {.in_dims = {0, std::nullopt}, .randomness = Randomness::Different})(x, zeros({3}));
    CHECK(!equal(shared.select(0, 1), shared.select(0, 0)));
    if (like == &rand_like) {
      CHECK(diff.min().item<float>() >= 0.0f);
      CHECK(diff.max().item<float>() < 1.0f);
    }
  }
}

TEST_CASE("vmap with nothing to map, and in_dims on a 0-d input") {
  check_throws_mentioning<ValueError>([] { vmap([] { return ones({2}); })(); }, "got no inputs");
  check_throws_mentioning<ValueError>([] { vmap([](Value d) { return d; })(Value(ValueDict{})); },
                                      "at least one input must be batched");
  // torch: "expected in_dim to satisfy -0 <= in_dim < 0"; td's dims out of range are IndexErrors
  check_throws_mentioning<IndexError>([] { vmap([](Tensor t) { return t; })(zeros(Shape{})); },
                                      "in_dim 0 is out of range for argument 0 of shape []");
  CHECK_THROWS_AS(vmap([](Tensor t) { return t; }, {.in_dims = {-1}})(zeros(Shape{})), IndexError);
  // functional_vmap: a 0-d kwarg cannot hold params.batch_size
  std::vector<std::shared_ptr<nn::Linear>> nets{std::make_shared<nn::Linear>(1, 1),
                                                std::make_shared<nn::Linear>(1, 1)};
  check_throws_mentioning<ValueError>(
      [&] {
        nn::functional_vmap(*nets[0], {.params = TensorDict::from_modules(nets),
                                       .kwargs = {{"input", zeros(Shape{})}},
                                       .in_dims = {{"input", 0}}});
      },
      "input 'input' of shape []");
}
