// Per-leaf in_dims / out_dims (td::Dims, pytree prefixes as torch's and JAX's), for vmap and for
// functional_vmap's kwargs, against loops of single calls; their structure errors.
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using td::test::check_throws_mentioning;
using td::test::has;
using td::test::message_of;

namespace {

// Linear over the first entry of a list input plus its second entry: forward([x, shift]).
struct ListInput : nn::Module {
  std::shared_ptr<nn::Linear> lin;
  ListInput() {
    lin = register_module("lin", std::make_shared<nn::Linear>(3, 2));
    register_method("forward", &ListInput::forward, {"input"});
    register_method("dict_forward", &ListInput::dict_forward, {"input"});
  }
  Tensor forward(const ValueList& xs) {
    return lin->forward(xs.at(0).tensor()) + xs.at(1).tensor();
  }
  Tensor dict_forward(const ValueDict& xs) {
    return lin->forward(xs.at("x").tensor()) * xs.at("scale").tensor();
  }
};

}  // namespace

TEST_CASE("vmap: nested in_dims map each leaf at its own dim") {
  manual_seed(1);
  const Tensor x = randn({4, 3}), y = randn({3}), z = randn({3, 4});
  auto f = [](Value pair, Tensor c) { return pair[0].tensor() * pair[1].tensor() + c; };
  // torch: in_dims=((0, None), 1)
  const Tensor out = vmap(f, {.in_dims = {{0, std::nullopt}, 1}})(Value(ValueList{x, y}), z);
  REQUIRE(out.shape() == Shape{4, 3});
  for (int64_t i = 0; i < 4; ++i)
    CHECK(allclose(out.select(0, i), x.select(0, i) * y + z.select(1, i)));
  // a dict argument: a dict of dims with the same keys, in any order
  ValueDict d{{"a", x.t()}, {"b", y}};
  auto g = [](Value v) { return v["a"].tensor() - v["b"].tensor(); };
  const Tensor dout = vmap(g, {.in_dims = {Dims::dict({{"b", std::nullopt}, {"a", 1}})}})(Value(d));
  REQUIRE(dout.shape() == Shape{4, 3});
  for (int64_t i = 0; i < 4; ++i) CHECK(allclose(dout.select(0, i), x.select(0, i) - y));
  // one dim for a whole list still applies to each leaf
  const Tensor both =
      vmap(f, {.in_dims = {0, std::nullopt}})(Value(ValueList{x, x * 2.0}), zeros({3}));
  CHECK(allclose(both, x * x * 2.0));
}

TEST_CASE("vmap: nested out_dims place each output's sets") {
  manual_seed(2);
  const Tensor x = randn({4, 2, 3});
  auto f = [](Tensor t) { return ValueList{Value(t), Value(ValueList{Value(t), Value(t * 2.0)})}; };
  // torch: out_dims=(0, (0, 1))
  for (std::optional<int64_t> chunk : {std::optional<int64_t>(), std::optional<int64_t>(3)}) {
    CAPTURE(chunk.has_value());
    const Value out = vmap(f, {.out_dims = {0, {0, 1}}, .chunk_size = chunk})(x);
    CHECK(equal(out[0].tensor(), x));
    CHECK(equal(out[1][0].tensor(), x));
    REQUIRE(out[1][1].tensor().shape() == Shape{2, 4, 3});
    for (int64_t i = 0; i < 4; ++i)
      CHECK(equal(out[1][1].tensor().select(1, i), x.select(0, i) * 2.0));
  }
  // a dict output with a dict of out_dims
  auto h = [](Tensor t) { return ValueDict{{"p", t}, {"q", t.sum()}}; };
  const Value hd = vmap(h, {.out_dims = {Dims::dict({{"q", 0}, {"p", -1}})}})(x);
  REQUIRE(hd["p"].tensor().shape() == Shape{2, 3, 4});
  for (int64_t i = 0; i < 4; ++i) {
    CHECK(equal(hd["p"].tensor().select(2, i), x.select(0, i)));
    CHECK(allclose(hd["q"].tensor().select(0, i), x.select(0, i).sum()));
  }
  // a single output takes a list of one (torch's out_dims=(1,)), or a plain dim
  const Tensor one = vmap([](Tensor t) { return t; }, {.out_dims = {1}})(x);
  const Tensor plain = vmap([](Tensor t) { return t; }, {.out_dims = 1})(x);
  CHECK(equal(one, x.permute({1, 0, 2})));
  CHECK(equal(plain, x.permute({1, 0, 2})));
  // one plain dim covers every output
  const Value all = vmap(f, {.out_dims = 2})(x);
  CHECK(equal(all[1][1].tensor(), (x * 2.0).permute({1, 2, 0})));
}

TEST_CASE("vmap: dims that do not fit the structure are a ValueError naming the path") {
  const Tensor x = randn({4, 3});
  auto f = [](Value pair) { return pair[0].tensor() + pair[1].tensor(); };
  const Value pair(ValueList{x, x});
  check_throws_mentioning<ValueError>(
      [&] {
        vmap(f, {.in_dims = {{0, 0, 0}}})(pair);
      },
      "[vmap] in_dims is not compatible with the structure of inputs: argument 0 is a list of 2 "
      "but its dims are (0, 0, 0)");
  check_throws_mentioning<ValueError>(
      [&] {
        vmap(f, {.in_dims = {Dims::dict({{"a", 0}})}})(pair);
      },
      "argument 0 is a list of 2");
  // nested: a list of dims for a tensor leaf
  const Value deep(ValueList{x, Value(ValueList{x})});
  auto g = [](Value v) { return v[0].tensor() + v[1][0].tensor(); };
  check_throws_mentioning<ValueError>(
      [&] {
        vmap(g, {.in_dims = {{0, {0, {1}}}}})(deep);
      },
      "argument 0[1] is a list of 1 but its dims are (0, (1,))");
  check_throws_mentioning<ValueError>(
      [&] {
        vmap(g, {.in_dims = {{0, {{0}}}}})(deep);
      },
      "argument 0[1][0] is a Tensor but its dims are (0,)");
  // dict keys that differ
  ValueDict d{{"a", x}, {"b", x}};
  auto h = [](Value v) { return v["a"].tensor(); };
  check_throws_mentioning<ValueError>(
      [&] {
        vmap(h, {.in_dims = {Dims::dict({{"a", 0}, {"c", 0}})}})(Value(d));
      },
      "argument 0 is a dict with keys ['a', 'b']");
  CHECK_THROWS_AS(Dims::dict({{"a", 0}, {"a", 1}}), ValueError);
  // an out-of-range dim deep inside names its path
  check_throws_mentioning<IndexError>(
      [&] {
        vmap(g, {.in_dims = {{0, {2}}}})(deep);
      },
      "in_dim 2 is out of range for argument 0[1][0] of shape");
  // an explicit dim for a number inside a list, as torch's
  const Value with_number(ValueList{x, Value(int64_t{2})});
  auto k = [](Value v) { return v[0].tensor(); };
  check_throws_mentioning<ValueError>(
      [&] {
        vmap(k, {.in_dims = {{0, 0}}})(with_number);
      },
      "got in_dim=0 for argument 0[1] of type int");
  CHECK(equal(vmap(k, {.in_dims = {{0, std::nullopt}}})(with_number), x));
  // out_dims: one entry for a function with several outputs is a count mismatch (torch raises)
  auto two = [](Tensor t) { return std::make_tuple(t, t * 2.0); };
  check_throws_mentioning<ValueError>(
      [&] { vmap(two, {.out_dims = {1}})(x); },
      "[vmap] out_dims is not compatible with the structure of the outputs: output 0 is a list "
      "of 2 but its dims are (1,)");
  auto nested = [](Tensor t) { return ValueList{Value(t), Value(ValueList{Value(t), Value(t)})}; };
  check_throws_mentioning<ValueError>(
      [&] {
        vmap(nested, {.out_dims = {0, {0, 1, 1}}})(x);
      },
      "output 1 is a list of 2 but its dims are (0, 1, 1)");
  check_throws_mentioning<IndexError>(
      [&] {
        vmap(nested, {.out_dims = {0, {0, 3}}})(x);
      },
      "out_dim 3 is out of range for output 1[1]");
  check_throws_mentioning<ValueError>(
      [&] {
        vmap(nested, {.out_dims = {0, {0, std::nullopt}}})(x);
      },
      "out_dims is None for output 1[1]");
}

TEST_CASE("vmap: the former in_dims and out_dims types still work") {
  const Tensor x = randn({4, 3}), w = randn({3});
  const std::vector<std::optional<int64_t>> in{0, std::nullopt};
  VmapOptions o{.in_dims = in, .out_dims = std::vector<std::optional<int64_t>>{1}};
  CHECK(equal(vmap([](Tensor a, Tensor b) { return a * b; }, o)(x, w), (x * w).t()));
  const std::vector<std::optional<int64_t>> back = o.in_dims;
  CHECK(back == in);
  o.in_dims.push_back(Dims{0, 1});
  CHECK_THROWS_AS(static_cast<std::vector<std::optional<int64_t>>>(o.in_dims), ValueError);
  // an empty out_dims list is dim 0 for all outputs, as before
  CHECK(Dims(std::vector<std::optional<int64_t>>{}).dim() == 0);
}

TEST_CASE("functional_vmap: nested in_dims for a kwarg split only the leaves they name") {
  manual_seed(7);
  std::vector<std::shared_ptr<ListInput>> nets;
  for (int i = 0; i < 3; ++i) nets.push_back(std::make_shared<ListInput>());
  TensorDict params = TensorDict::from_modules(nets);
  const Tensor xs = randn({5, 3, 3});  // sets at dim 1
  const Tensor shift = randn({5, 2});  // shared
  const Value input(ValueList{xs, shift});
  std::vector<Tensor> want;
  for (int64_t i = 0; i < 3; ++i) want.push_back(nets[i]->forward({xs.select(1, i), shift}));
  const Tensor expected = stack(want, 0);
  for (int mode = 0; mode < 3; ++mode) {
    CAPTURE(mode);
    nn::FunctionalVmapOptions o{
        .params = params, .kwargs = {{"input", input}}, .in_dims = {{"input", {1, std::nullopt}}}};
    if (mode == 1) o.chunk_size = 2;
    if (mode == 2) o.loop = true;
    CHECK(allclose(nn::functional_vmap(*nets[0], o).tensor(), expected));
  }
  // a dict input
  const Tensor scales = randn({3, 2});  // per set at dim 0
  const Value dict_input(ValueDict{{"x", xs.select(1, 0)}, {"scale", scales}});
  std::vector<Tensor> want_d;
  for (int64_t i = 0; i < 3; ++i)
    want_d.push_back(
        nets[i]->dict_forward({{"x", xs.select(1, 0)}, {"scale", scales.select(0, i)}}));
  const Value got = nn::functional_vmap(
      *nets[0], {.params = params,
                 .kwargs = {{"input", dict_input}},
                 .in_dims = {{"input", Dims::dict({{"x", std::nullopt}, {"scale", 0}})}},
                 .method = "dict_forward"});
  CHECK(allclose(got.tensor(), stack(want_d, 0)));
  // the structure must fit; the path names the kwarg
  check_throws_mentioning<ValueError>(
      [&] {
        nn::functional_vmap(*nets[0], {.params = params,
                                       .kwargs = {{"input", input}},
                                       .in_dims = {{"input", {1, std::nullopt, 0}}}});
      },
      "[functional_vmap] in_dims is not compatible with the structure of kwargs: input 'input' "
      "is a list of 2");
  // a dim that does not hold params.batch_size names the leaf
  check_throws_mentioning<ValueError>(
      [&] {
        nn::functional_vmap(*nets[0], {.params = params,
                                       .kwargs = {{"input", input}},
                                       .in_dims = {{"input", {0, std::nullopt}}}});
      },
      "input 'input'[0] of shape [5, 3, 3] has [5] at dim 0 but params.batch_size is [3]");
  // every leaf shared: nothing indexes the sets
  check_throws_mentioning<ValueError>(
      [&] {
        nn::functional_vmap(*nets[0], {.params = params,
                                       .kwargs = {{"input", input}},
                                       .in_dims = {{"input", {std::nullopt, std::nullopt}}}});
      },
      "in_dims names 'input'");
  // the former map type
  const std::map<std::string, int64_t> old{{"input", 1}};
  nn::FunctionalVmapOptions o{.params = params, .kwargs = {{"input", input}}, .in_dims = old};
  CHECK_THROWS_AS(nn::functional_vmap(*nets[0], o), ValueError);  // the shift has no dim 1 of 3
  const std::map<std::string, int64_t> back = o.in_dims;
  CHECK(back == old);
}
