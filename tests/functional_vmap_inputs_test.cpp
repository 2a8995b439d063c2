// functional_vmap's inputs and outputs: methods and keyword inputs, in_dims on structured inputs,
// output kinds, and the errors that name the key, the dim and the shapes.
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
// A module with a second method and keyword arguments.
struct Scaler : nn::Module {
  nn::Param weight;
  Scaler() {
    weight = register_parameter("weight", randn({3}));
    register_method("forward", &Scaler::forward, {"input"});
    register_method("scaled", &Scaler::scaled, {"input", "factor", "shift"},
                    {{"shift", Value(0.0)}});
  }
  std::string type_name() const override { return "Scaler"; }
  Tensor forward(const Tensor& input) { return input * weight.get(); }
  Tensor scaled(const Tensor& input, double factor, double shift) {
    return input * weight.get() * factor + shift;
  }
};
}  // namespace

TEST_CASE("method calls a registered method with keyword inputs") {
  manual_seed(4);
  std::vector<std::shared_ptr<Scaler>> mods;
  for (int i = 0; i < 3; ++i) mods.push_back(std::make_shared<Scaler>());
  TensorDict params = TensorDict::from_modules(mods);
  Tensor x = randn({2, 3});
  Value out = functional_vmap(*mods[0], {.params = params,
                                         .kwargs = {{"input", x}, {"factor", 2.0}, {"shift", 1.0}},
                                         .method = "scaled"});
  REQUIRE(out.tensor().shape() == Shape{3, 2, 3});
  auto xv = x.to_vector<float>();
  auto ov = out.tensor().contiguous().to_vector<float>();
  for (int i = 0; i < 3; ++i) {
    auto w = mods[i]->weight.get().to_vector<float>();
    for (int n = 0; n < 2; ++n)
      for (int k = 0; k < 3; ++k)
        CHECK(ov[(i * 2 + n) * 3 + k] == doctest::Approx(xv[n * 3 + k] * w[k] * 2 + 1));
  }
  CHECK_THROWS_AS(functional_vmap(*mods[0], {.params = params, .args = {x}, .method = "nope"}),
                  KeyError);
}

TEST_CASE("errors name the key, the dim and the shapes") {
  auto nets = ensemble(3, [] { return mlp(3, 4, 2); });
  TensorDict params = TensorDict::from_modules(nets);
  nn::Module& m = *nets[0];
  Tensor xs = randn({3, 5, 3});
  CHECK_THROWS_AS(
      functional_vmap(m, {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"x", 0}}}),
      KeyError);
  CHECK(message_of([&] {
          functional_vmap(m, {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"x", 0}}});
        }).find("'x'") != std::string::npos);
  TensorDict single = TensorDict::from_module(m);
  CHECK_THROWS_AS(
      functional_vmap(m, {.params = single, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}}),
      ValueError);
  std::string msg = message_of([&] {
    functional_vmap(m, {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 1}}});
  });
  CHECK(msg.find("input") != std::string::npos);
  CHECK(msg.find("[3, 5, 3]") != std::string::npos);
  CHECK(msg.find("[3]") != std::string::npos);
  CHECK_THROWS_AS(
      functional_vmap(m, {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 1}}}),
      ValueError);
  CHECK_THROWS_AS(
      functional_vmap(m, {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 3}}}),
      ValueError);
  CHECK_THROWS_AS(functional_vmap(m, {.params = params,
                                      .args = {randn({5, 3})},
                                      .randomness = Randomness::Same,
                                      .loop = true}),
                  ValueError);
  CHECK_THROWS_AS(functional_vmap(m, {.params = params, .args = {randn({5, 3})}, .chunk_size = 0}),
                  ValueError);
  CHECK_THROWS_AS(functional_vmap(m, {.params = params, .args = {randn({5, 3})}, .chunk_size = -2}),
                  ValueError);
  CHECK_THROWS_AS(parse_randomness("sometimes"), ValueError);
  CHECK(parse_randomness("same") == Randomness::Same);
  // params that do not fit the module: a missing key, an extra key, a wrong per-set shape
  TensorDict missing = params.clone();
  missing.erase("0.bias");
  CHECK_THROWS_AS(functional_vmap(m, {.params = missing, .args = {randn({5, 3})}}), KeyError);
  TensorDict extra = params.clone();
  extra.set("extra", zeros({3, 2}));
  CHECK_THROWS_AS(functional_vmap(m, {.params = extra, .args = {randn({5, 3})}}), KeyError);
  TensorDict wrong = params.clone();
  wrong.set("0.bias", zeros({3, 5}));
  std::string shape_msg = message_of([&] {
    functional_vmap(m, {.params = wrong, .args = {randn({5, 3})}});
  });
  CHECK(shape_msg.find("0.bias") != std::string::npos);
  CHECK(shape_msg.find("[5]") != std::string::npos);
  CHECK_THROWS_AS(functional_vmap(m, {.params = wrong, .args = {randn({5, 3})}}), ValueError);
}

namespace {
// methods with string and int arguments, and one returning a number beside a tensor
struct Tagger : nn::Module {
  nn::Param w;
  Tagger() {
    w = register_parameter("w", ones({2}));
    register_method("forward", &Tagger::forward, {"input", "mode", "times"});
    register_method("with_count", &Tagger::with_count, {"input"});
  }
  Tensor forward(const Tensor& input, std::string mode, int times) {
    return mode == "scale" ? input * w * static_cast<double>(times) : input * w;
  }
  Value with_count(const Tensor& input) { return ValueList{Value(input * w), Value(3.0)}; }
};
}  // namespace

TEST_CASE("bound methods take strings and ints; a number output raises, batched and looped") {
  std::vector<std::shared_ptr<nn::Module>> ts{std::make_shared<Tagger>(),
                                              std::make_shared<Tagger>()};
  TensorDict params = TensorDict::from_modules(ts);
  Tensor x = ones({2});
  for (bool loop : {false, true}) {
    Value y = functional_vmap(*ts[0], {.params = params, .args = {x, "scale", 3}, .loop = loop});
    CHECK(y.tensor().to_vector<float>() == std::vector<float>(4, 3.0f));
    CHECK_THROWS_AS(functional_vmap(*ts[0], {.params = params, .args = {x, "scale", 1.5}}),
                    TypeError);  // times is an int
    CHECK_THROWS_AS(
        functional_vmap(*ts[0], {.params = params, .args = {x}, .method = "with_count",
                                 .loop = loop}),
        ValueError);
    // named as functional_vmap's, batched too (not vmap's, which suggests an out_dims)
    const std::string m = message_of([&] {
      functional_vmap(*ts[0],
                      {.params = params, .args = {x}, .method = "with_count", .loop = loop});
    });
    CHECK_MESSAGE(m.find("[functional_vmap] the module must only return Tensors") == 0, m);
    CHECK_MESSAGE(m.find("float") != std::string::npos, m);
    CHECK_MESSAGE(m.find("out_dims") == std::string::npos, m);
  }
}

TEST_CASE("float indices raise, batched and in a loop") {
  std::vector<std::shared_ptr<nn::Module>> embs{std::make_shared<nn::Embedding>(4, 2),
                                                std::make_shared<nn::Embedding>(4, 2)};
  TensorDict params = TensorDict::from_modules(embs);
  for (bool loop : {false, true}) {
    // an index 1.7 must not become row 1
    CHECK_THROWS_AS(functional_vmap(*embs[0], {.params = params,
                                               .args = {tensor({1.7f, 2.2f})},
                                               .loop = loop}),
                    TypeError);
    CHECK(message_of([&] {
            functional_vmap(*embs[0],
                            {.params = params, .args = {tensor({1.7f, 2.2f})}, .loop = loop});
          }).find("[embedding] indices must be int64") != std::string::npos);
  }
}

namespace {
// forward(input) = a * weight + b, with a and b taken from a dict, a list or a TensorDict.
struct Mixer : nn::Module {
  nn::Param weight;
  Mixer() {
    weight = register_parameter("weight", randn({4}));
    register_method("forward", &Mixer::forward, {"input"});
  }
  std::string type_name() const override { return "Mixer"; }
  Tensor forward(const Value& input) {
    Tensor a, b;
    if (input.is_dict()) a = input.dict().at("a").tensor(), b = input.dict().at("b").tensor();
    if (input.is_list()) a = input.list().at(0).tensor(), b = input.list().at(1).tensor();
    if (input.is_tensordict()) a = input.tensordict().get("a"), b = input.tensordict().get("b");
    if (input.is_dict() && input.dict().contains("c") && !input.dict().at("c").is_none())
      throw std::runtime_error("Mixer: 'c' should stay None");
    if (input.is_dict() && input.dict().contains("note") && input.dict().at("note").str() != "text")
      throw std::runtime_error("Mixer: 'note' should stay 'text'");
    return a * weight.get() + b;
  }
};
}  // namespace

TEST_CASE("in_dims on a dict, list or TensorDict input splits every Tensor leaf into sets") {
  manual_seed(10);
  std::vector<std::shared_ptr<Mixer>> mods;
  for (int i = 0; i < 3; ++i) mods.push_back(std::make_shared<Mixer>());
  TensorDict params = TensorDict::from_modules(mods);
  Tensor a = randn({3, 5, 4}), b = randn({3, 4});  // set at dim 0
  // expected by hand: out[i, n, k] = a[i, n, k] * w_i[k] + b[i, k]
  auto av = a.to_vector<float>(), bv = b.to_vector<float>();
  std::vector<float> want;
  for (int i = 0; i < 3; ++i) {
    auto w = mods[i]->weight.get().to_vector<float>();
    for (int n = 0; n < 5; ++n)
      for (int k = 0; k < 4; ++k) want.push_back(av[(i * 5 + n) * 4 + k] * w[k] + bv[i * 4 + k]);
  }
  Tensor expected = tensor(want).view({3, 5, 4});
  ValueDict as_dict;
  as_dict.set("a", a);
  as_dict.set("b", b);
  // a TensorDict of batch_size [5, 3] holding the sets at its dim 1 (= -1)
  TensorDict as_td({{"a", a.permute({1, 0, 2})}, {"b", b.unsqueeze(0).expand({5, 3, 4})}}, {5, 3});
  // other leaves go to every set as they are: the Mixer checks that 'c' is still None
  ValueDict with_none = as_dict;
  with_none.set("c", Value());
  with_none.set("note", "text");
  const std::vector<std::pair<Value, int64_t>> inputs = {{Value(as_dict), 0},
                                                         {Value(with_none), 0},
                                                         {Value(ValueList{a, b}), 0},
                                                         {Value(as_td), 1},
                                                         {Value(as_td), -1}};
  for (const auto& [input, dim] : inputs)
    for (bool loop : {false, true})
      for (std::optional<int64_t> c : {std::optional<int64_t>{}, std::optional<int64_t>{2}}) {
        CAPTURE(input.kind_name());
        CAPTURE(loop);
        Value out = functional_vmap(*mods[0], {.params = params,
                                               .kwargs = {{"input", input}},
                                               .in_dims = {{"input", dim}},
                                               .chunk_size = c,
                                               .loop = loop});
        CHECK(close(out.tensor(), expected, 1e-6));
      }
  // an input with no Tensor in it has no dim to split; a TensorDict needs the sets in its batch
  ValueDict no_tensor;
  no_tensor.set("b", 2.0);
  no_tensor.set("c", Value());
  for (const Value& bad : {Value(2.0), Value(no_tensor), Value(), Value(ValueList{})}) {
    CHECK_THROWS_AS(
        functional_vmap(*mods[0],
                        {.params = params, .kwargs = {{"input", bad}}, .in_dims = {{"input", 0}}}),
        ValueError);
  }
  std::string m = message_of([&] {
    functional_vmap(
        *mods[0], {.params = params, .kwargs = {{"input", Value(2.0)}}, .in_dims = {{"input", 0}}});
  });
  CHECK(m.find("'input'") != std::string::npos);
  CHECK(m.find("[3]") != std::string::npos);
  for (int64_t dim : {0, 2}) {  // [5] at dim 0; no dim 2 in a batch of [5, 3]
    CHECK_THROWS_AS(functional_vmap(*mods[0], {.params = params,
                                               .kwargs = {{"input", as_td}},
                                               .in_dims = {{"input", dim}}}),
                    ValueError);
  }
}

TEST_CASE("two batch dims: negative in_dims, unbatched outputs expanded, empty batches") {
  manual_seed(13);
  auto nets = ensemble(6, [] { return mlp(3, 4, 2); });
  TensorDict params = TensorDict::from_modules(nets).reshape({2, 3});
  // sets at dims 1, 2 of [5, 2, 3, 3], named by -3
  Tensor xs = randn({5, 2, 3, 3});
  Value out = functional_vmap(
      *nets[0], {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", -3}}});
  REQUIRE(out.tensor().shape() == Shape{2, 3, 5, 2});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      auto guard = params[i][j].to_module(*nets[0]);
      Tensor ref = (*nets[0])({xs.select(1, i).select(1, j)}).tensor();
      CHECK(close(out.tensor().select(0, i).select(0, j), ref));
    }
  // an output leaf that does not depend on the sets gets the batch dims too
  std::vector<std::shared_ptr<Mixer>> mods;
  for (int i = 0; i < 6; ++i) mods.push_back(std::make_shared<Mixer>());
  TensorDict mp = TensorDict::from_modules(mods).reshape({2, 3});
  Tensor b = randn({4});
  for (bool loop : {false, true}) {
    Value o = functional_vmap(
        *mods[0], {.params = mp, .args = {Value(ValueList{zeros({4}), b})}, .loop = loop});
    REQUIRE(o.tensor().shape() == Shape{2, 3, 4});
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) CHECK(equal(o.tensor().select(0, i).select(0, j), b));
  }
  // a batch of size 0 with a per-set input
  TensorDict none = TensorDict::from_modules(nets).slice(0, 0);
  for (bool loop : {false, true}) {
    Value o = functional_vmap(*nets[0], {.params = none,
                                         .kwargs = {{"input", randn({0, 5, 3})}},
                                         .in_dims = {{"input", 0}},
                                         .loop = loop});
    CHECK(o.tensor().shape() == Shape{0, 5, 2});
  }
}

TEST_CASE("method with per-set keyword inputs, batched and in a loop") {
  manual_seed(15);
  std::vector<std::shared_ptr<Scaler>> mods;
  for (int i = 0; i < 3; ++i) mods.push_back(std::make_shared<Scaler>());
  TensorDict params = TensorDict::from_modules(mods);
  Tensor xs = randn({2, 3, 3});  // the sets at dim 1
  for (bool loop : {false, true}) {
    Value out = functional_vmap(*mods[0], {.params = params,
                                           .kwargs = {{"input", xs}, {"factor", 3.0}},
                                           .in_dims = {{"input", 1}},
                                           .method = "scaled",
                                           .loop = loop});
    REQUIRE(out.tensor().shape() == Shape{3, 2, 3});
    for (int i = 0; i < 3; ++i) {
      auto w = mods[i]->weight.get().to_vector<float>();
      auto xi = xs.select(1, i).contiguous().to_vector<float>();
      auto oi = out.tensor().select(0, i).contiguous().to_vector<float>();
      for (int n = 0; n < 2; ++n)
        for (int k = 0; k < 3; ++k)
          CHECK(oi[n * 3 + k] == doctest::Approx(xi[n * 3 + k] * w[k] * 3.0));
    }
  }
}

TEST_CASE("an in_dims of INT64_MAX is a ValueError, not an overflow") {
  auto net = std::make_shared<nn::Linear>(3, 1);
  TensorDict params = TensorDict::from_modules(
      std::vector<std::shared_ptr<nn::Module>>{net, std::make_shared<nn::Linear>(3, 1)});
  test::check_throws_naming_op<ValueError>(
      [&] {
        nn::functional_vmap(*net, {.params = params,
                                   .kwargs = {{"input", randn({2, 3})}},
                                   .in_dims = {{"input", INT64_MAX}}});
      },
      "functional_vmap");
}
