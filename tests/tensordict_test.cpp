// TensorDict: nesting, batch size checks, indexing, stack/reshape/apply/clone, printing, and the
// module bridge (from_module, from_modules, to_module, ParameterOverride).
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {
Tensor iota(const Shape& s) {  // 0, 1, 2, ... as float32
  return arange(static_cast<double>(shape_numel(s))).to(kFloat32).reshape(s);
}
}  // namespace

TEST_CASE("tensordict nesting, get/set/contains/keys/leaves") {
  TensorDict d({4});
  d.set("weight", zeros({4, 3}));
  d.set("0.weight", ones({4, 2, 2}));
  d.set("0.bias", ones({4, 2}));
  d.set("1.inner.x", zeros({4}));
  CHECK(d.size() == 3);
  CHECK(d.keys() == std::vector<std::string>{"weight", "0", "1"});
  CHECK(d.keys(true) ==
        std::vector<std::string>{"weight", "0", "0.weight", "0.bias", "1", "1.inner", "1.inner.x"});
  CHECK(d.keys(true, true) ==
        std::vector<std::string>{"weight", "0.weight", "0.bias", "1.inner.x"});
  CHECK(d.get("0.bias").shape() == Shape{4, 2});
  CHECK(d.get_dict("0").batch_size() == Shape{4});
  CHECK(d.contains("1.inner"));
  CHECK(d.contains("1.inner.x"));
  CHECK_FALSE(d.contains("1.inner.y"));
  CHECK_FALSE(d.contains("weight.x"));
  auto leaves = d.leaves();
  REQUIRE(leaves.size() == 4);
  CHECK(leaves[1].first == "0.weight");
  // set replaces in place, keeping the order
  d.set("weight", full({4, 3}, 2.0));
  CHECK(d.keys().front() == "weight");
  CHECK(d.get("weight").to_vector<float>()[0] == 2.0f);
  CHECK(d.erase("0.bias"));
  CHECK_FALSE(d.contains("0.bias"));
  CHECK_FALSE(d.erase("nope"));
  // the entries share storage with what was set
  Tensor w = zeros({4, 1});
  d.set("w", w);
  CHECK(d.get("w").is_same(w));
}

TEST_CASE("tensordict errors") {
  TensorDict d({4});
  CHECK_THROWS_AS(d.set("x", zeros({3, 2})), ValueError);
  std::string msg = message_of([&] { d.set("x", zeros({3, 2})); });
  CHECK(has(msg, "'x'"));
  CHECK(has(msg, "[3, 2]"));
  CHECK(has(msg, "[4]"));
  CHECK_THROWS_AS(d.set("a.b", zeros({2})), ValueError);
  CHECK_FALSE(d.contains("a"));  // nothing half-inserted
  d.set("t", zeros({4}));
  CHECK_THROWS_AS(d.get("missing"), KeyError);
  CHECK(has(message_of([&] { (void)d.get("missing"); }), "'missing'"));
  CHECK_THROWS_AS(d.set("t.sub", zeros({4})), KeyError);
  CHECK_THROWS_AS(d.get_dict("t"), TypeError);
  d.set("n.x", zeros({4}));
  CHECK_THROWS_AS(d.get("n"), TypeError);
  CHECK_THROWS_AS(d.set("", zeros({4})), KeyError);
  CHECK_THROWS_AS(d.set("a..b", zeros({4})), KeyError);
  CHECK_THROWS_AS(d.set_batch_size({5}), ValueError);
  CHECK(d.batch_size() == Shape{4});
  CHECK_THROWS_AS(d[4], IndexError);
  CHECK_THROWS_AS(d[-5], IndexError);
  CHECK_THROWS_AS(TensorDict()[0], ValueError);
  CHECK_THROWS_AS(TensorDict().slice(0, 1), ValueError);
  CHECK_THROWS_AS(d.slice(0, 2, 0), ValueError);
  CHECK_THROWS_AS(d.reshape({3}), ValueError);
  CHECK_THROWS_AS(d.reshape({-1, -1}), ValueError);
  CHECK_THROWS_AS(TensorDict::stack({}), ValueError);
  // a nested dict whose leaves do not fit
  TensorDict bad({});
  bad.set("y", zeros({2}));
  CHECK_THROWS_AS(d.set("nested", bad), ValueError);
}

TEST_CASE("tensordict batch size: set_batch_size and nested dicts") {
  TensorDict d;
  d.set("a", zeros({2, 3, 5}));
  d.set("n.b", zeros({2, 3}));
  d.set_batch_size({2, 3});
  CHECK(d.batch_size() == Shape{2, 3});
  CHECK(d.get_dict("n").batch_size() == Shape{2, 3});
  CHECK(d.batch_dims() == 2);
  TensorDict sub;  // batch [] is lifted to the parent's
  sub.set("c", zeros({2, 3, 1}));
  d.set("s", sub);
  CHECK(d.get_dict("s").batch_size() == Shape{2, 3});
}

TEST_CASE("a nested dict keeps its extra batch dims through every operation, as tensordict") {
  // b [4] holds s [4, 5] (one more batch dim) and a nested-nested t [4, 5, 2]
  TensorDict s({4, 5});
  s.set("q", iota({4, 5, 7}));
  s.set("t", TensorDict({{"r", iota({4, 5, 2, 3})}}, {4, 5, 2}));
  TensorDict b({4});
  b.set("w", iota({4, 3}));
  b.set("s", s);
  auto nested = [](const TensorDict& d) {  // the batch sizes of s and s.t
    return shape_str(d.get_dict("s").batch_size()) + " " +
           shape_str(d.get_dict("s.t").batch_size());
  };
  CHECK(nested(b) == "[4, 5] [4, 5, 2]");
  CHECK(nested(b.clone()) == "[4, 5] [4, 5, 2]");
  CHECK(nested(b.apply([](const Tensor& t) { return t * 2.0; })) == "[4, 5] [4, 5, 2]");
  CHECK(nested(b[1]) == "[5] [5, 2]");
  CHECK(nested(b.slice(1, 4, 2)) == "[2, 5] [2, 5, 2]");
  CHECK(nested(b.reshape({2, 2})) == "[2, 2, 5] [2, 2, 5, 2]");
  CHECK(nested(b.reshape({2, 2}).flatten_batch()) == "[4, 5] [4, 5, 2]");
  CHECK(nested(TensorDict::stack({b, b}, 0)) == "[2, 4, 5] [2, 4, 5, 2]");
  CHECK(nested(TensorDict::stack({b, b}, 1)) == "[4, 2, 5] [4, 2, 5, 2]");
  CHECK(TensorDict::stack({b, b}, 1).get("s.t.r").shape() == Shape{4, 2, 5, 2, 3});
  // the values go with the shapes: b[1]'s s.q is rows 5..9 of iota
  CHECK(b[1].get("s.q").to_vector<float>()[0] == 35.0f);
  // dicts whose nested batch sizes differ do not stack
  TensorDict c({4});
  c.set("w", iota({4, 3}));
  c.set("s", TensorDict({{"q", iota({4, 5, 7})}, {"t.r", iota({4, 5, 2, 3})}}, {4}));
  check_throws_mentioning<ValueError>(
      [&] {
        TensorDict::stack({b, c});
      },
      "[TensorDict.stack] 's' has batch_size [4] in dict 1");
  // under vmap each set sees its slice with the extra dims, and the output gets them back
  const TensorDict out = vmap([&](TensorDict d) {
    CHECK(nested(d) == "[5] [5, 2]");
    return d.apply([](const Tensor& t) { return t + 1.0; });
  })(b);
  CHECK(nested(out) == "[4, 5] [4, 5, 2]");
  CHECK(allclose(out.get("s.t.r"), b.get("s.t.r") + 1.0));
}

TEST_CASE("tensordict indexing and slicing on the first batch dim") {
  TensorDict d({3});
  d.set("w", iota({3, 2}));
  d.set("n.b", iota({3}));
  TensorDict one = d[1];
  CHECK(one.batch_size().empty());
  CHECK(one.get("w").to_vector<float>() == std::vector<float>{2, 3});
  CHECK(one.get("n.b").item<float>() == 1.0f);
  CHECK(d[-1].get("w").to_vector<float>() == std::vector<float>{4, 5});
  TensorDict s = d.slice(0, 3, 2);
  CHECK(s.batch_size() == Shape{2});
  CHECK(s.get("w").to_vector<float>() == std::vector<float>{0, 1, 4, 5});
  CHECK(s.get("n.b").to_vector<float>() == std::vector<float>{0, 2});
  CHECK(d.slice(1, 100).batch_size() == Shape{2});
  CHECK(d.slice(-2, 3).get("n.b").to_vector<float>() == std::vector<float>{1, 2});
  CHECK(d.slice(2, 1).batch_size() == Shape{0});
  // views: share storage
  CHECK(one.get("w").shares_storage(d.get("w")));
}

TEST_CASE("tensordict stack, reshape, flatten_batch, apply, clone") {
  TensorDict a({}), b({});
  a.set("w", tensor({1.f, 2.f}));
  a.set("n.x", tensor({5.f}));
  b.set("n.x", tensor({6.f}));
  b.set("w", tensor({3.f, 4.f}));
  TensorDict s = TensorDict::stack({a, b});
  CHECK(s.batch_size() == Shape{2});
  CHECK(s.keys(true, true) == std::vector<std::string>{"w", "n.x"});
  CHECK(s.get("w").to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  CHECK(s.get("n.x").to_vector<float>() == std::vector<float>{5, 6});
  TensorDict s1 = TensorDict::stack({s, s}, 1);
  CHECK(s1.batch_size() == Shape{2, 2});
  CHECK(s1.get("w").shape() == Shape{2, 2, 2});
  CHECK(s1.get("w").to_vector<float>() == std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4});
  TensorDict c({});
  c.set("w", tensor({1.f, 2.f, 3.f}));
  c.set("n.x", tensor({5.f}));
  CHECK_THROWS_AS(TensorDict::stack({a, c}), ValueError);
  CHECK(has(message_of([&] { TensorDict::stack({a, c}); }), "'w'"));
  TensorDict e({});
  e.set("w", tensor({1.f, 2.f}));
  CHECK_THROWS_AS(TensorDict::stack({a, e}), ValueError);
  CHECK_THROWS_AS(TensorDict::stack({a, s}), ValueError);  // batch sizes differ

  TensorDict r({2, 3});
  r.set("w", iota({2, 3, 4}));
  TensorDict f = r.flatten_batch();
  CHECK(f.batch_size() == Shape{6});
  CHECK(f.get("w").shape() == Shape{6, 4});
  TensorDict r2 = r.reshape({3, -1});
  CHECK(r2.batch_size() == Shape{3, 2});
  CHECK(r2.get("w").shape() == Shape{3, 2, 4});
  CHECK(r2.get("w").to_vector<float>() == r.get("w").to_vector<float>());

  TensorDict doubled = r.apply([](const Tensor& t) { return mul(t, 2.0); });
  CHECK(doubled.get("w").to_vector<float>()[5] == 10.0f);
  TensorDict summed = r.apply([](const Tensor& t) { return t.sum({2}); }, {2});
  CHECK(summed.batch_size() == Shape{2});
  CHECK(summed.get("w").shape() == Shape{2, 3});
  CHECK_THROWS_AS(r.apply([](const Tensor& t) { return t.sum(); }), ValueError);

  TensorDict cl = r.clone();
  CHECK_FALSE(cl.get("w").shares_storage(r.get("w")));
  Tensor w = cl.get("w");
  copy_(w, zeros_like(w));
  CHECK(r.get("w").to_vector<float>()[1] == 1.0f);
}

TEST_CASE("tensordict printing like tensordict") {
  TensorDict d({4});
  d.set("weight", zeros({4, 1, 3}));
  std::ostringstream os;
  os << d;
  CHECK(os.str() ==
        "TensorDict(\n"
        "    fields={\n"
        "        weight: Tensor(shape=[4, 1, 3], dtype=td.float32)},\n"
        "    batch_size=[4])");
  d.set("0.bias", zeros({4, 2}, kInt64));
  std::ostringstream os2;
  os2 << d;
  CHECK(has(os2.str(), "0: TensorDict(\n"));
  CHECK(has(os2.str(), "bias: Tensor(shape=[4, 2], dtype=td.int64)},\n"));
  // fields sorted as tensordict sorts its lines ("w2: ..." before "w: ...", as ':' > '2'),
  // whatever the insertion order
  TensorDict e({2});
  e.set("w", zeros({2}));
  e.set("b", zeros({2}));
  e.set("w2", zeros({2}));
  std::ostringstream os3;
  os3 << e;
  CHECK(os3.str() ==
        "TensorDict(\n"
        "    fields={\n"
        "        b: Tensor(shape=[2], dtype=td.float32),\n"
        "        w2: Tensor(shape=[2], dtype=td.float32),\n"
        "        w: Tensor(shape=[2], dtype=td.float32)},\n"
        "    batch_size=[2])");
}

// ---- module bridge ----

TEST_CASE("from_module shares storage and nests by submodule") {
  manual_seed(0);
  auto net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::BatchNorm1d>(4)});
  TensorDict p = TensorDict::from_module(*net);
  CHECK(p.batch_size().empty());
  CHECK(p.keys(true, true) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias",
                                                       "2.running_mean", "2.running_var",
                                                       "2.num_batches_tracked"});
  auto lin = std::static_pointer_cast<nn::Linear>((*net)[0]);
  CHECK(p.get("0.weight").is_same(lin->weight.get()));
  CHECK(p.get("2.num_batches_tracked").dtype() == kInt64);
  // the ReLU holds nothing: no entry "1" (tensordict's from_module filters it out too)
  CHECK(p.keys() == std::vector<std::string>{"0", "2"});
  CHECK_FALSE(p.contains("1"));
  // nor does a container of parameterless modules, or one alone
  auto nested = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
          std::make_shared<nn::ReLU>(), std::make_shared<nn::Tanh>()}),
      std::make_shared<nn::Linear>(2, 2)});
  CHECK(TensorDict::from_module(*nested).keys(true, false) ==
        std::vector<std::string>{"1", "1.weight", "1.bias"});
  CHECK(TensorDict::from_module(nn::ReLU()).keys().empty());
}

TEST_CASE("from_modules stacks, checks structure, expands identical tensors") {
  manual_seed(1);
  std::vector<std::shared_ptr<nn::Linear>> nets;
  for (int i = 0; i < 3; ++i) nets.push_back(std::make_shared<nn::Linear>(2, 1));
  TensorDict p = TensorDict::from_modules(nets);
  CHECK(p.batch_size() == Shape{3});
  CHECK(p.get("weight").shape() == Shape{3, 1, 2});
  for (int i = 0; i < 3; ++i)
    CHECK(p.get("weight")[i].to_vector<float>() == nets[i]->weight->to_vector<float>());
  CHECK_FALSE(p.get("weight").shares_storage(nets[0]->weight));

  // raw pointers work too
  std::vector<nn::Linear*> raw{nets[0].get(), nets[1].get()};
  CHECK(TensorDict::from_modules(raw).batch_size() == Shape{2});

  // a tensor that is the same object in every module is expanded, not copied
  Tensor shared = ones({1, 2});
  std::vector<TensorDict::ModuleGuard> guards;
  for (auto& n : nets) {
    TensorDict one;
    one.set("weight", shared);
    one.set("bias", n->bias.get());
    guards.push_back(one.to_module(*n));
  }
  TensorDict e = TensorDict::from_modules(nets, {.expand_identical = true});
  CHECK(e.get("weight").shape() == Shape{3, 1, 2});
  CHECK(e.get("weight").strides()[0] == 0);
  CHECK(e.get("weight").shares_storage(shared));
  CHECK(e.get("bias").strides()[0] != 0);
  TensorDict ne = TensorDict::from_modules(nets);
  CHECK_FALSE(ne.get("weight").shares_storage(shared));
  guards.clear();

  // structure and shape mismatches name the key and the shapes
  std::vector<std::shared_ptr<nn::Module>> mixed{std::make_shared<nn::Linear>(2, 1),
                                                 std::make_shared<nn::Linear>(3, 1)};
  CHECK_THROWS_AS(TensorDict::from_modules(mixed), ValueError);
  std::string msg = message_of([&] { TensorDict::from_modules(mixed); });
  CHECK(has(msg, "'weight'"));
  // a key that is a submodule in one and a tensor in the other, in either order
  auto with_child = std::make_shared<nn::Module>();  // of one class: only the keys differ
  with_child->register_module("0", std::make_shared<nn::Linear>(1, 1));
  auto with_param = std::make_shared<nn::Module>();
  with_param->register_parameter("0", zeros({1}));
  for (bool child_first : {true, false}) {
    std::vector<std::shared_ptr<nn::Module>> kinds{with_child, with_param};
    if (!child_first) std::swap(kinds[0], kinds[1]);
    check_throws_mentioning<ValueError>([&] { TensorDict::from_modules(kinds); },
                                        "[from_modules] key '0' is a ");
  }
  CHECK(has(msg, "[1, 3]"));
  CHECK(has(msg, "[1, 2]"));
  std::vector<std::shared_ptr<nn::Module>> other{std::make_shared<nn::Linear>(2, 1),
                                                 std::make_shared<nn::Linear>(2, 1, false)};
  CHECK_THROWS_AS(TensorDict::from_modules(other), ValueError);
  CHECK(has(message_of([&] { TensorDict::from_modules(other); }), "'bias'"));
  CHECK_THROWS_AS(TensorDict::from_modules(std::vector<nn::Module*>{}), ValueError);
}

TEST_CASE("to_module swaps tensors and the guard restores them, also on exceptions") {
  manual_seed(2);
  auto lin = std::make_shared<nn::Linear>(2, 1);
  Tensor w0 = lin->weight, b0 = lin->bias;
  TensorDict p;
  p.set("weight", tensor({1.f, 2.f}, {1, 2}));
  p.set("bias", tensor({0.5f}));
  {
    auto guard = p.to_module(*lin);
    CHECK(lin->weight->is_same(p.get("weight")));
    Tensor y = lin->forward(tensor({1.f, 1.f}, {1, 2}));
    CHECK(y.item<float>() == doctest::Approx(3.5));
  }
  CHECK(lin->weight->is_same(w0));
  CHECK(lin->bias->is_same(b0));
  try {
    auto guard = p.to_module(*lin);
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  CHECK(lin->weight->is_same(w0));

  TensorDict missing;
  missing.set("weight", zeros({1, 2}));
  CHECK_THROWS_AS(missing.to_module(*lin), KeyError);
  CHECK(has(message_of([&] { (void)missing.to_module(*lin); }), "'bias'"));
  TensorDict extra = p.clone();
  extra.set("gamma", zeros({1}));
  CHECK_THROWS_AS(extra.to_module(*lin), KeyError);
  CHECK(has(message_of([&] { (void)extra.to_module(*lin); }), "'gamma'"));
  TensorDict wrong;
  wrong.set("weight", zeros({2, 2}));
  wrong.set("bias", zeros({1}));
  CHECK_THROWS_AS(wrong.to_module(*lin), ValueError);
  std::string msg = message_of([&] { (void)wrong.to_module(*lin); });
  CHECK(has(msg, "'weight'"));
  CHECK(has(msg, "[2, 2]"));
  CHECK(has(msg, "[1, 2]"));
  CHECK(lin->weight->is_same(w0));  // unchanged
  CHECK(lin->bias->is_same(b0));
}

TEST_CASE("ParameterOverride substitutes per thread, nests and validates") {
  manual_seed(3);
  auto net = std::make_shared<nn::Sequential>(
      std::initializer_list<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(2, 1)});
  auto lin = std::static_pointer_cast<nn::Linear>((*net)[0]);
  Tensor w0 = lin->weight;
  TensorDict p;
  p.set("0.weight", tensor({1.f, 2.f}, {1, 2}));
  p.set("0.bias", tensor({0.f}));
  TensorDict q = p.apply([](const Tensor& t) { return mul(t, 10.0); });
  Tensor x = tensor({1.f, 1.f}, {1, 2});
  {
    nn::ParameterOverride o(*net, p);
    CHECK(lin->weight->is_same(p.get("0.weight")));
    CHECK(lin->forward(x).item<float>() == doctest::Approx(3.0));
    CHECK(net->named_parameters()[0].second.is_same(w0));  // the module itself is untouched
    {
      nn::ParameterOverride inner(*net, q);
      CHECK(lin->forward(x).item<float>() == doctest::Approx(30.0));
      // another thread sees the module's own tensors
      bool other_sees_own = false;
      std::thread t([&] { other_sees_own = lin->weight->is_same(w0); });
      t.join();
      CHECK(other_sees_own);
    }
    CHECK(lin->forward(x).item<float>() == doctest::Approx(3.0));
  }
  CHECK(lin->weight->is_same(w0));
  {
    // keys in another order than the module's are matched by name
    TensorDict reordered;
    reordered.set("0.bias", tensor({5.f}));
    reordered.set("0.weight", tensor({1.f, 2.f}, {1, 2}));
    nn::ParameterOverride o(*net, reordered);
    CHECK(lin->forward(x).item<float>() == doctest::Approx(8.0));
    CHECK(lin->bias->is_same(reordered.get("0.bias")));
  }

  TensorDict missing;
  missing.set("0.weight", zeros({1, 2}));
  CHECK_THROWS_AS(nn::ParameterOverride(*net, missing), KeyError);
  CHECK(has(message_of([&] { nn::ParameterOverride o(*net, missing); }), "'0.bias'"));
  TensorDict extra = p.clone();
  extra.set("1.weight", zeros({1}));
  CHECK_THROWS_AS(nn::ParameterOverride(*net, extra), KeyError);
  CHECK(has(message_of([&] { nn::ParameterOverride o(*net, extra); }), "'1.weight'"));
  TensorDict wrong;
  wrong.set("0.weight", zeros({3, 2}));
  wrong.set("0.bias", zeros({1}));
  CHECK_THROWS_AS(nn::ParameterOverride(*net, wrong), ValueError);
  std::string msg = message_of([&] { nn::ParameterOverride o(*net, wrong); });
  CHECK(has(msg, "'0.weight'"));
  CHECK(has(msg, "[3, 2]"));
  CHECK(has(msg, "[1, 2]"));
  CHECK(lin->weight->is_same(w0));  // failed overrides leave nothing active
}

TEST_CASE("buffers updated in place under an override write into the override's tensor") {
  auto bn = std::make_shared<nn::BatchNorm1d>(2);
  TensorDict p = TensorDict::from_module(*bn).clone();
  Tensor own_count = bn->num_batches_tracked;
  {
    nn::ParameterOverride o(*bn, p);
    bn->forward(tensor({0.f, 1.f, 2.f, 5.f}, {2, 2}));
  }
  CHECK(p.get("num_batches_tracked").item<int64_t>() == 1);
  CHECK(own_count.item<int64_t>() == 0);
  // running_mean = 0.9 * 0 + 0.1 * batch mean ([1, 3])
  auto rm = p.get("running_mean").to_vector<float>();
  CHECK(rm[0] == doctest::Approx(0.1));
  CHECK(rm[1] == doctest::Approx(0.3));
  CHECK(bn->running_mean->to_vector<float>() == std::vector<float>{0, 0});
}

TEST_CASE("from_modules takes a braced list of module pointers") {
  manual_seed(2);
  auto a = std::make_shared<nn::Linear>(2, 1), b = std::make_shared<nn::Linear>(2, 1);
  TensorDict p = TensorDict::from_modules({a, b});
  CHECK(p.batch_size() == Shape{2});
  CHECK(p.get("weight")[1].to_vector<float>() == b->weight->to_vector<float>());
  std::shared_ptr<nn::Module> ma = a, mb = b;
  CHECK(TensorDict::from_modules({ma, mb}).get("bias").shape() == Shape{2, 1});
  // mixed pointer types convert to shared_ptr<Module>
  CHECK(TensorDict::from_modules({ma, b}).batch_size() == Shape{2});
  CHECK(TensorDict::from_modules({a.get(), b.get()}, {.expand_identical = true}).batch_size() ==
        Shape{2});
}

TEST_CASE("TensorDict slice with a huge step and reshape to an overflowing batch") {
  TensorDict d({4});
  d.set("a", arange(4));
  TensorDict s = d.slice(0, 2, INT64_MAX);
  CHECK(s.batch_size() == Shape{1});
  CHECK(s.get("a").to_vector<int64_t>() == std::vector<int64_t>{0});
  TensorDict e({0});
  e.set("a", zeros({0}));
  check_throws_naming_op<ValueError>(
      [&] {
        e.reshape({int64_t{1} << 62, 4, 0});
      },
      "TensorDict.reshape");
}

TEST_CASE("TensorDict: a key of more than 256 dot-separated parts is a KeyError") {
  // 40,000 parts nested 40,000 dicts, copying the rest of the key at every level (6 s, 1.3 GB)
  std::string deep = "a";
  for (int i = 1; i < 40000; ++i) deep += ".a";
  TensorDict d;
  check_throws_mentioning<KeyError>([&] { d.set(deep, ones({1})); },
                                    "has more than 256 dot-separated parts");
  check_throws_mentioning<KeyError>([&] { d.set(deep, TensorDict()); }, "256 dot-separated");
  CHECK(d.empty());
  const std::string k256 = deep.substr(0, 2 * 256 - 1);
  d.set(k256, ones({1}));
  CHECK(d.get(k256).numel() == 1);
  CHECK(d.keys(true, true) == std::vector<std::string>{k256});
}
