// Tied parameters (one tensor reachable under two names), params that do not fit a module (every
// missing and unexpected key in one message), and what TensorDict::from_modules refuses to stack:
// the cases PyTorch's test_stateless.py and stack_module_state's checks cover.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using nn::functional_vmap;
using td::test::check_throws_mentioning;
using td::test::has;
using td::test::message_of;

namespace {

// One tensor registered as "a" and "b", read under both names.
struct TwoNames : nn::Module {
  nn::Param a, b;
  TwoNames() {
    Tensor w = randn({3});
    a = register_parameter("a", w);
    b = register_parameter("b", w);
    register_method("forward", &TwoNames::forward, {"input"});
  }
  Tensor forward(const Tensor& x) { return x * a.get() + x * b.get() * 2.0; }
};

// Classic weight tying: the head reuses the embedding's weight as its own parameter.
struct TiedHead : nn::Module {
  std::shared_ptr<nn::Linear> enc;
  nn::Param out_weight;
  TiedHead() {
    enc = register_module("enc", std::make_shared<nn::Linear>(3, 3, false));
    out_weight = register_parameter("out_weight", enc->weight.get());
    register_method("forward", &TiedHead::forward, {"input"});
  }
  Tensor forward(const Tensor& x) { return linear(relu(enc->forward(x)), out_weight); }
};

// x * a + 2 x * b by hand, for a given a and b.
Tensor two_names_by_hand(const Tensor& x, const Tensor& a, const Tensor& b) {
  return x * a + x * b * 2.0;
}

}  // namespace

TEST_CASE("ties: a tensor registered under two names takes one value from params") {
  manual_seed(3);
  TwoNames m;
  CHECK(nn::ParameterOverride::has_ties(m));
  CHECK(m.named_parameters().size() == 1);  // listed once, as torch's
  TensorDict full = TensorDict::from_module(m);
  REQUIRE(full.keys() == std::vector<std::string>{"a", "b"});
  const Tensor x = randn({2, 3}), w = randn({3}), other = randn({3});

  SUBCASE("one entry fills the other name, as torch.func.functional_call does") {
    TensorDict only_a{{"a", w}};
    {
      nn::ParameterOverride o(m, only_a);
      CHECK(allclose(m({x}).tensor(), two_names_by_hand(x, w, w)));
    }
    TensorDict only_b{{"b", w}};
    {
      auto guard = only_b.to_module(m);
      CHECK(m.a.get().is_same(w));
      CHECK(allclose(m({x}).tensor(), two_names_by_hand(x, w, w)));
    }
    CHECK(m.a.get().is_same(m.b.get()));  // restored, still tied
  }
  SUBCASE("two different tensors are refused by every path") {
    TensorDict both{{"a", w}, {"b", other}};
    check_throws_mentioning<ValueError>([&] { nn::ParameterOverride o(m, both); },
                                        "'a' and 'b' different tensors");
    check_throws_mentioning<ValueError>([&] { auto g = both.to_module(m); },
                                        "[to_module] params gives 'a' and 'b'");
    CHECK(m.a.get().is_same(m.b.get()));  // a refused to_module changes nothing
    check_throws_mentioning<ValueError>([&] { auto g = both.to_module(m); },
                                        "one tensor registered under both names");
  }
  SUBCASE("one tensor, or equal ones, under both names pass") {
    TensorDict same{{"a", w}, {"b", w}};
    TensorDict equal_copies{{"a", w}, {"b", w.clone()}};
    for (const TensorDict& p : {same, equal_copies}) {
      nn::ParameterOverride o(m, p);
      CHECK(allclose(m({x}).tensor(), two_names_by_hand(x, w, w)));
    }
  }
}

TEST_CASE("ties: functional_vmap over stacked sets of a module with a tensor under two names") {
  manual_seed(4);
  std::vector<std::shared_ptr<TwoNames>> nets;
  for (int i = 0; i < 3; ++i) nets.push_back(std::make_shared<TwoNames>());
  TensorDict params = TensorDict::from_modules(nets);
  const Tensor x = randn({2, 3});
  std::vector<Tensor> want;
  for (const auto& n : nets) want.push_back(two_names_by_hand(x, n->a.get(), n->a.get()));
  const Tensor expected = stack(want, 0);
  TensorDict only_a(params.batch_size());
  only_a.set("a", params.get("a"));
  for (const TensorDict& p : {params, only_a})
    for (int mode = 0; mode < 3; ++mode) {
      CAPTURE(mode);
      nn::FunctionalVmapOptions o{.params = p, .args = {x}};
      if (mode == 1) o.chunk_size = 2;
      if (mode == 2) o.loop = true;
      CHECK(allclose(functional_vmap(*nets[0], o).tensor(), expected));
    }
  TensorDict edited = params.clone();
  edited.set("b", params.get("b") + 1.0);
  for (int mode = 0; mode < 3; ++mode) {
    CAPTURE(mode);
    nn::FunctionalVmapOptions o{.params = edited, .args = {x}};
    if (mode == 1) o.chunk_size = 2;
    if (mode == 2) o.loop = true;
    check_throws_mentioning<ValueError>([&] { functional_vmap(*nets[0], o); },
                                        "[functional_vmap] params gives 'a' and 'b' different");
  }
}

TEST_CASE("ties: a parameter shared across submodules (weight tying)") {
  manual_seed(5);
  TiedHead m;
  const Tensor x = randn({4, 3}), w = randn({3, 3});
  const Tensor by_hand = linear(relu(linear(x, w)), w);
  // from_module lists both names; either one alone is enough
  TensorDict full = TensorDict::from_module(m);
  CHECK(full.keys(true, true) == std::vector<std::string>{"out_weight", "enc.weight"});
  TensorDict enc_only;
  enc_only.set("enc.weight", w);
  TensorDict head_only{{"out_weight", w}};
  for (const TensorDict& p : {enc_only, head_only}) {
    nn::ParameterOverride o(m, p);
    CHECK(allclose(m({x}).tensor(), by_hand));
  }
  TensorDict clash = enc_only.clone();
  clash.set("out_weight", w * 2.0);
  check_throws_mentioning<ValueError>([&] { nn::ParameterOverride o(m, clash); },
                                      "'out_weight' and 'enc.weight'");
  // stacked: the sets' entries are compared before any set runs
  std::vector<std::shared_ptr<TiedHead>> nets{std::make_shared<TiedHead>(),
                                              std::make_shared<TiedHead>()};
  TensorDict stacked = TensorDict::from_modules(nets);
  stacked.set("out_weight", stacked.get("out_weight").clone());  // equal copies: fine
  const Tensor y = functional_vmap(*nets[0], {.params = stacked, .args = {x}}).tensor();
  for (int64_t i = 0; i < 2; ++i) {
    const Tensor wi = nets[i]->enc->weight.get();
    CHECK(allclose(y.select(0, i), linear(relu(linear(x, wi)), wi)));
  }
  stacked.set("out_weight", stacked.get("out_weight") * 0.5);
  check_throws_mentioning<ValueError>(
      [&] { functional_vmap(*nets[0], {.params = stacked, .args = {x}}); },
      "'out_weight' and 'enc.weight'");
}

TEST_CASE("params that do not fit: every missing and every unexpected key in one message") {
  auto m = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(4, 2)});
  std::vector<std::shared_ptr<nn::Module>> nets{m};
  TensorDict params = TensorDict::from_modules(nets);
  params.erase("0");  // 0.weight, 0.bias
  params.erase("2.bias");
  params.set("extra", zeros({1, 2}));
  params.set("0x.weight", zeros({1, 2}));
  const std::vector<std::string> keys{"'0.weight'",  "'0.bias'",     "'2.bias'",       "'extra'",
                                      "'0x.weight'", "missing keys", "unexpected keys"};
  auto check_all = [&](const std::function<void()>& f, const std::string& op) {
    CHECK_THROWS_AS(f(), KeyError);
    const std::string msg = message_of(f);
    CHECK(has(msg, "[" + op + "]"));
    for (const auto& k : keys) CHECK_MESSAGE(has(msg, k), msg);
  };
  check_all(
      [&] {
        functional_vmap(*m, {.params = params, .args = {zeros({2, 3})}});
      },
      "ParameterOverride");
  check_all(
      [&] {
        functional_vmap(*m, {.params = params, .args = {zeros({2, 3})}, .loop = true});
      },
      "ParameterOverride");
  check_all([&] { auto g = params[0].to_module(*m); }, "to_module");
  // only missing, only unexpected
  TensorDict none;
  check_throws_mentioning<KeyError>([&] { nn::ParameterOverride o(*m, none); },
                                    "missing keys (no entry) ['0.weight', '0.bias', '2.weight', "
                                    "'2.bias']");
  TensorDict more = TensorDict::from_module(*m).clone();
  more.set("zz", zeros({1}));
  const std::string msg = message_of([&] { nn::ParameterOverride o(*m, more); });
  CHECK(has(msg, "unexpected keys (not a parameter or buffer) ['zz']"));
  CHECK(!has(msg, "missing"));
  // a very long list is capped
  auto big = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 25; ++i) big->push_back(std::make_shared<nn::Linear>(1, 1));
  const std::string capped = message_of([&] { nn::ParameterOverride o(*big, none); });
  CHECK(has(capped, "'9.bias', ... and 30 more]"));
  CHECK(!has(capped, "'10.weight'"));
}

TEST_CASE("from_modules refuses modules of different classes or modes, naming the first") {
  struct MyLinear : nn::Linear {
    using nn::Linear::Linear;
    std::string type_name() const override { return "MyLinear"; }
  };
  auto a = std::make_shared<nn::Linear>(3, 2);
  auto b = std::make_shared<nn::Linear>(3, 2);
  auto mine = std::make_shared<MyLinear>(3, 2);
  check_throws_mentioning<ValueError>(
      [&] {
        TensorDict::from_modules({std::shared_ptr<nn::Module>(a), b, mine});
      },
      "[from_modules] module 2 differs from module 0: it is a MyLinear where module 0 has a "
      "Linear");
  b->eval();
  check_throws_mentioning<ValueError>(
      [&] {
        TensorDict::from_modules({a, b});
      },
      "module 1 differs from module 0: it is in eval mode where module 0 is in training mode");
  a->eval();
  CHECK(TensorDict::from_modules({a, b}).batch_size() == Shape{2});  // both in eval: fine

  auto seq = [](std::shared_ptr<nn::Module> act) {
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(3, 4), act, std::make_shared<nn::Dropout>(0.5)});
  };
  auto s0 = seq(std::make_shared<nn::ReLU>()), s1 = seq(std::make_shared<nn::ReLU>());
  auto s2 = seq(std::make_shared<nn::Tanh>());
  // a parameterless submodule of another class: same keys, shapes and dtypes, still refused
  check_throws_mentioning<ValueError>(
      [&] {
        TensorDict::from_modules({s0, s1, s2});
      },
      "module 2 differs from module 0 in submodule '1': it is a Tanh where module 0 has a ReLU");
  // one submodule in eval mode: its Dropout would run in training mode for that set
  s1->children()[2]->eval();
  check_throws_mentioning<ValueError>(
      [&] {
        TensorDict::from_modules({s0, s1});
      },
      "module 1 differs from module 0 in submodule '2': it is in "
      "eval mode");
}
