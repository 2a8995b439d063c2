// nn::Module: registration, tree walks, train/eval, method binding with Python's rules.
#include <doctest/doctest.h>

#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/test_util.h"

using namespace td;
using namespace td::test;

// A user-defined module with two methods and keyword arguments (README example):
//
//   struct Scaler : nn::Module {
//     nn::Param scale;
//     Scaler() {
//       scale = register_parameter("scale", ones({3}));
//       register_method("forward", &Scaler::forward, {"input"});
//       register_method("shifted", &Scaler::shifted, {"input", "shift", "twice"},
//                       {{"shift", 0.0}, {"twice", false}});
//     }
//     Tensor forward(const Tensor& input) { return input * scale; }
//     Tensor shifted(const Tensor& input, double shift, bool twice) {
//       Tensor y = input * scale + shift;
//       return twice ? y * 2.0 : y;
//     }
//   };
//   auto m = std::make_shared<Scaler>();
//   Value y = (*m)({x});                                            // forward
//   Value z = m->call_method("shifted", {x}, {{"shift", 1.5}, {"twice", true}});
struct Scaler : nn::Module {
  nn::Param scale;
  Scaler() {
    scale = register_parameter("scale", ones({3}));
    register_method("forward", &Scaler::forward, {"input"});
    register_method("shifted", &Scaler::shifted, {"input", "shift", "twice"},
                    {{"shift", 0.0}, {"twice", false}});
  }
  Tensor forward(const Tensor& input) { return input * scale; }
  Tensor shifted(const Tensor& input, double shift, bool twice) {
    Tensor y = input * scale + shift;
    return twice ? y * 2.0 : y;
  }
};

// Every supported parameter type, a Value return, a const method and an int argument.
struct Kinds : nn::Module {
  Kinds() {
    register_method("forward", &Kinds::forward, {"a", "b", "c", "d", "e", "f", "g"});
    register_method("count", &Kinds::count, {"n"});
  }
  Value forward(Tensor a, const Tensor& b, Value c, const Value& d, int64_t e, double f, bool g) {
    return ValueList{a.numel() + b.numel(), c, d, e, f, g};
  }
  int64_t count(int64_t n) const { return n + 1; }
};

// Lists, dicts and optional arguments in, a tuple out (a Python module's natural signatures).
struct Containers : nn::Module {
  Containers() {
    register_method("forward", &Containers::forward, {"xs", "opts", "scale", "extra"},
                    {{"scale", Value()}, {"extra", ValueList{}}});
  }
  std::tuple<Tensor, int64_t> forward(const std::vector<Tensor>& xs, const ValueDict& opts,
                                      std::optional<double> scale, const ValueList& extra) {
    Tensor sum = zeros({2});
    for (const Tensor& x : xs) sum = sum + x;
    const double s = scale.value_or(1.0) * opts.at("k").to_double();
    return {sum * s, static_cast<int64_t>(extra.size())};
  }
};

struct Tree : nn::Module {
  nn::Param w, buf;
  std::shared_ptr<nn::Linear> child;
  std::shared_ptr<nn::Sequential> seq;
  Tree() {
    w = register_parameter("w", zeros({2}));
    buf = register_buffer("buf", zeros({1}));
    child = register_module("child", std::make_shared<nn::Linear>(2, 3));
    seq = register_module(
        "seq", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                   std::make_shared<nn::BatchNorm1d>(3), std::make_shared<nn::Dropout>(0.2)}));
  }
};

TEST_CASE("registration rejects empty, dotted and duplicate names") {
  nn::Module m;
  m.register_parameter("a", zeros({1}));
  CHECK_THROWS_AS(m.register_parameter("", zeros({1})), ValueError);
  CHECK_THROWS_AS(m.register_parameter("x.y", zeros({1})), ValueError);
  CHECK(has(message_of([&] { m.register_parameter("x.y", zeros({1})); }), "'x.y'"));
  CHECK_THROWS_AS(m.register_parameter("a", zeros({1})), ValueError);
  CHECK(has(message_of([&] { m.register_parameter("a", zeros({1})); }), "'a'"));
  CHECK_THROWS_AS(m.register_buffer("a", zeros({1})), ValueError);
  CHECK_THROWS_AS(m.register_buffer("", zeros({1})), ValueError);
  CHECK_THROWS_AS(m.register_buffer("b.c", zeros({1})), ValueError);
  CHECK_THROWS_AS(m.register_module("a", std::make_shared<nn::ReLU>()), ValueError);
  CHECK_THROWS_AS(m.register_module("", std::make_shared<nn::ReLU>()), ValueError);
  CHECK_THROWS_AS(m.register_module("r.s", std::make_shared<nn::ReLU>()), ValueError);
  CHECK_THROWS_AS(m.register_module("n", std::shared_ptr<nn::ReLU>()), ValueError);
  m.register_module("r", std::make_shared<nn::ReLU>());
  CHECK_THROWS_AS(m.register_parameter("r", zeros({1})), ValueError);
  CHECK(has(message_of([&] { m.register_buffer("r", zeros({1})); }), "'r'"));

  // a cycle (a module holding itself, directly or below a child) would make every walk recurse
  auto s = std::make_shared<nn::Sequential>();
  check_throws_mentioning<ValueError>([&] { s->push_back(s); }, "cannot contain itself");
  auto inner = std::make_shared<nn::Sequential>();
  s->push_back(inner);
  check_throws_mentioning<ValueError>([&] { inner->push_back(s); }, "[register_module]");
  CHECK(s->children().size() == 1);
  CHECK(inner->children().empty());
  // the same module twice, side by side, is no cycle
  auto twice = std::make_shared<nn::ReLU>();
  nn::Sequential both({twice, twice});
  CHECK(both.children().size() == 2);
}

TEST_CASE("named_parameters, named_buffers, named_modules in insertion order") {
  auto t = std::make_shared<Tree>();
  std::vector<std::string> pn, bn, mn;
  for (auto& [n, p] : t->named_parameters()) pn.push_back(n);
  for (auto& [n, b] : t->named_buffers()) bn.push_back(n);
  for (auto& [n, m] : t->named_modules()) mn.push_back(n);
  CHECK(pn ==
        std::vector<std::string>{"w", "child.weight", "child.bias", "seq.0.weight", "seq.0.bias"});
  CHECK(bn == std::vector<std::string>{"buf", "seq.0.running_mean", "seq.0.running_var",
                                       "seq.0.num_batches_tracked"});
  CHECK(mn == std::vector<std::string>{"", "child", "seq", "seq.0", "seq.1"});
  CHECK(t->named_modules()[0].second.get() == t.get());
  CHECK(t->parameters().size() == 5);
  CHECK(t->buffers().size() == 4);
  CHECK(t->children().size() == 2);
  CHECK(t->named_children()[1].first == "seq");
  CHECK(t->named_parameters()[1].second.is_same(t->child->weight.get()));
  // Param handles read like tensors
  const Tensor& w = t->w;
  CHECK(w.shape() == Shape{2});
  CHECK(t->w->numel() == 2);
  CHECK(t->w.defined());
  CHECK_FALSE(nn::Param().defined());
  CHECK(t->find_slot("seq.0.running_var") != nullptr);
  CHECK(t->find_slot("seq.1.x") == nullptr);
}

namespace {
// Sequential(lin, ReLU, lin): one Linear used twice.
std::shared_ptr<nn::Sequential> twice_used(int64_t features) {
  auto lin = std::make_shared<nn::Linear>(features, features);
  return std::make_shared<nn::Sequential>(
      std::initializer_list<std::shared_ptr<nn::Module>>{lin, std::make_shared<nn::ReLU>(), lin});
}
struct TiedPair : nn::Module {
  TiedPair() {
    Tensor t = ones({2});
    register_parameter("a", t);
    register_parameter("b", t);
  }
};
std::vector<std::string> names_of(const auto& named) {
  std::vector<std::string> out;
  for (const auto& [n, x] : named) out.push_back(n);
  return out;
}
}  // namespace

TEST_CASE("a submodule used twice and a tensor registered twice are listed once, as in torch") {
  auto seq = twice_used(2);
  CHECK(names_of(seq->named_parameters()) == std::vector<std::string>{"0.weight", "0.bias"});
  CHECK(seq->parameters().size() == 2);
  CHECK(names_of(seq->named_modules()) == std::vector<std::string>{"", "0", "1"});
  // the module's structure keeps every use
  CHECK(names_of(seq->named_children()) == std::vector<std::string>{"0", "1", "2"});
  CHECK(TensorDict::from_module(*seq).keys(true, true) ==
        std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  TiedPair tied;
  CHECK(names_of(tied.named_parameters()) == std::vector<std::string>{"a"});
  CHECK(tied.parameters().size() == 1);
  CHECK(TensorDict::from_module(tied).keys() == std::vector<std::string>{"a", "b"});
}

TEST_CASE(
    "to_module on a submodule used twice: equal entries go in, the module gets its own back") {
  auto seq = twice_used(2);
  auto lin = std::dynamic_pointer_cast<nn::Linear>(seq->children()[0]);
  const Tensor w0 = lin->weight.get();
  TensorDict p = TensorDict::from_module(*seq).apply([](const Tensor& t) { return t * 2.0; });
  {
    auto guard = p.to_module(*seq);
    CHECK(equal(lin->weight.get(), w0 * 2.0));
  }
  CHECK(lin->weight.get().is_same(w0));  // the old guard put back 0.weight's substitute
  p.set("2.bias", zeros({2}));
  check_throws_mentioning<ValueError>([&] { (void)p.to_module(*seq); },
                                      "[to_module] params gives '0.bias' and '2.bias' different");
  CHECK(lin->weight.get().is_same(w0));
  // ParameterOverride, which functional_vmap uses, refuses them too
  check_throws_mentioning<ValueError>([&] { nn::ParameterOverride o(*seq, p); },
                                      "'0.bias' and '2.bias'");
  p.set("2.bias", p.get("0.bias"));  // one tensor under both names
  nn::ParameterOverride o(*seq, p);
  CHECK(equal(
      (*seq)(ValueList{ones({1, 2})}).tensor(),
      linear(relu(linear(ones({1, 2}), w0 * 2.0, p.get("0.bias"))), w0 * 2.0, p.get("0.bias"))));
}

TEST_CASE("train and eval are recursive") {
  auto t = std::make_shared<Tree>();
  CHECK(t->is_training());
  t->eval();
  CHECK_FALSE(t->is_training());
  CHECK_FALSE(t->child->is_training());
  CHECK_FALSE((*t->seq)[1]->is_training());
  t->train();
  CHECK((*t->seq)[0]->is_training());
  t->train(false);
  CHECK_FALSE((*t->seq)[0]->is_training());
}

TEST_CASE("user-defined module with two methods and keyword arguments") {
  auto m = std::make_shared<Scaler>();
  Tensor x = tensor({1.f, 2.f, 3.f});
  CHECK((*m)({x}).tensor().to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK((*m)({}, {{"input", x}}).tensor().to_vector<float>() == std::vector<float>{1, 2, 3});
  Value z = m->call_method("shifted", {x}, {{"shift", 1.5}, {"twice", true}});
  CHECK(z.tensor().to_vector<float>() == std::vector<float>{5, 7, 9});
  CHECK(m->call_method("shifted", {x, 1}).tensor().to_vector<float>() ==
        std::vector<float>{2, 3, 4});  // an int is accepted for a float
  CHECK(m->call_method("shifted", {x}, {{"twice", true}}).tensor().to_vector<float>() ==
        std::vector<float>{2, 4, 6});
  CHECK(m->has_method("shifted"));
  CHECK_FALSE(m->has_method("nope"));
  CHECK(m->method_names() == std::vector<std::string>{"forward", "shifted"});
  CHECK(m->method_arg_names("shifted") == std::vector<std::string>{"input", "shift", "twice"});
  CHECK_THROWS_AS(m->method_arg_names("nope"), KeyError);
}

TEST_CASE("method binding errors are TypeErrors naming the method and argument") {
  auto m = std::make_shared<Scaler>();
  Tensor x = tensor({1.f, 2.f, 3.f});
  auto expect_type_error = [&](const std::function<void()>& f, const std::string& part) {
    CHECK_THROWS_AS(f(), TypeError);
    std::string msg = message_of(f);
    CHECK(has(msg, "Scaler.shifted"));
    CHECK(has(msg, part));
  };
  expect_type_error([&] { m->call_method("shifted", {}); }, "missing required argument 'input'");
  expect_type_error(
      [&] {
        m->call_method("shifted", {x}, {{"bogus", 1}});
      },
      "unexpected keyword argument 'bogus'");
  expect_type_error(
      [&] {
        m->call_method("shifted", {x}, {{"input", x}});
      },
      "multiple values for argument 'input'");
  expect_type_error([&] { m->call_method("shifted", {x, 1.0, true, 4}); }, "3 positional");
  expect_type_error([&] { m->call_method("shifted", {1}); }, "'input'");
  expect_type_error([&] { m->call_method("shifted", {x, "a"}); }, "'shift'");
  expect_type_error([&] { m->call_method("shifted", {x}, {{"twice", 1}}); }, "'twice'");
  CHECK_THROWS_AS(m->call_method("nope", {x}), KeyError);
  std::string msg = message_of([&] { m->call_method("nope", {x}); });
  CHECK(has(msg, "'nope'"));
  CHECK(has(msg, "'forward'"));
  CHECK(has(msg, "'shifted'"));
  CHECK_THROWS_AS((*std::make_shared<nn::Module>())({x}), KeyError);
}

TEST_CASE("method argument kinds and registration errors") {
  auto k = std::make_shared<Kinds>();
  Value r = (*k)({zeros({2}), zeros({3}), "c", Value(), 7, 2.5, true});
  CHECK(r[0].to_int() == 5);
  CHECK(r[1].str() == "c");
  CHECK(r[2].is_none());
  CHECK(r[3].to_int() == 7);
  CHECK(r[4].to_double() == 2.5);
  CHECK(r[5].to_bool());
  CHECK(k->call_method("count", {}, {{"n", 4}}).to_int() == 5);
  CHECK_THROWS_AS(k->call_method("count", {2.5}), TypeError);  // a float is not an int
  CHECK_THROWS_AS(k->call_method("count", {true}), TypeError);
  CHECK_THROWS_AS((*k)({zeros({2}), 1, "c", Value(), 7, 2.5, true}), TypeError);
  CHECK(has(message_of([&] { (*k)({zeros({2}), 1, "c", Value(), 7, 2.5, true}); }), "'b'"));

  auto c = std::make_shared<Containers>();
  Value out = (*c)({ValueList{ones({2}), full({2}, 2.0)}, ValueDict{{"k", 3}}});
  REQUIRE(out.is_list());
  CHECK(out[0].tensor().to_vector<float>() == std::vector<float>{9.f, 9.f});  // (1 + 2) * 3
  CHECK(out[1].to_int() == 0);
  out = c->call_method("forward", {ValueList{ones({2})}, ValueDict{{"k", 1}}},
                       {{"scale", 0.5}, {"extra", ValueList{1, 2}}});
  CHECK(out[0].tensor().to_vector<float>() == std::vector<float>{0.5f, 0.5f});
  CHECK(out[1].to_int() == 2);
  check_throws_mentioning<TypeError>(
      [&] {
        (*c)({ones({2}), ValueDict{}});
      },
      "argument 'xs' must be a list, not Tensor");
  check_throws_mentioning<TypeError>(
      [&] {
        (*c)({ValueList{1}, ValueDict{}});
      },
      "argument 'xs' must be a Tensor, not int");
  check_throws_mentioning<TypeError>(
      [&] {
        (*c)({ValueList{}, ValueList{}});
      },
      "argument 'opts' must be a dict");

  nn::Module m;
  auto noop = [](std::vector<Value>&, const std::string&) { return Value(); };
  m.register_method_raw("f", {"a", "b"}, {{"b", 1}}, noop);
  CHECK(m.call_method("f", {0}).is_none());
  CHECK_THROWS_AS(m.register_method_raw("f", {}, {}, noop), ValueError);  // duplicate
  CHECK_THROWS_AS(m.register_method_raw("", {}, {}, noop), ValueError);
  CHECK_THROWS_AS(m.register_method_raw("g", {"a", "a"}, {}, noop), ValueError);
  CHECK_THROWS_AS(m.register_method_raw("g", {"a", "b"}, {{"a", 1}}, noop), ValueError);
  CHECK_THROWS_AS(m.register_method_raw("g", {"a"}, {{"z", 1}}, noop), ValueError);
  struct Bad : nn::Module {
    Tensor f(const Tensor& x) { return x; }
  };
  Bad b;
  CHECK_THROWS_AS(b.register_method("f", &Bad::f, {"x", "y"}), ValueError);
}

TEST_CASE("module printing like PyTorch") {
  manual_seed(0);
  auto s = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::ReLU>()});
  std::ostringstream os;
  os << *s;
  CHECK(os.str() ==
        "Sequential(\n"
        "  (0): Linear(in_features=3, out_features=4, bias=True)\n"
        "  (1): ReLU()\n"
        ")");
  CHECK(s->type_name() == "Sequential");
}

namespace {
// The reprs of torch 1.13 in the checks below come from
//   class Foo(nn.Module):   # children lin = Linear(2, 3), seq = Sequential(ReLU(), Dropout(0.25))
//     def extra_repr(self): return 'k=3'
//   class Bar(nn.Module):   # no children
//     def extra_repr(self): return 'a=1\nb=2'
//   class Baz(nn.Module):   # child b = Bar()
// printed with repr().
struct Foo : nn::Module {
  Foo() {
    register_module("lin", std::make_shared<nn::Linear>(2, 3));
    register_module(
        "seq", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                   std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(0.25)}));
  }
  std::string extra_repr() const override { return "k=3"; }
};
struct Bar : nn::Module {
  std::string extra_repr() const override { return "a=1\nb=2"; }
};
struct Baz : nn::Module {
  Baz() { register_module("b", std::make_shared<Bar>()); }
};
template <class M>
struct Wrap : nn::Module {
  Wrap() {
    register_module("m", std::make_shared<M>(2, 2));
    register_method("forward", &Wrap::forward, {"n"});
  }
  int64_t forward(int n) { return n; }
};
std::string repr_of(const nn::Module& m) {
  std::ostringstream os;
  os << m;
  return os.str();
}
}  // namespace

TEST_CASE("module printing follows torch's layout: extra_repr lines, then children") {
  CHECK(repr_of(Foo()) ==
        "Foo(\n"
        "  k=3\n"
        "  (lin): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (seq): Sequential(\n"
        "    (0): ReLU()\n"
        "    (1): Dropout(p=0.25, inplace=False)\n"
        "  )\n"
        ")");
  CHECK(repr_of(Bar()) == "Bar(\n  a=1\n  b=2\n)");
  CHECK(repr_of(Baz()) == "Baz(\n  (b): Bar(\n    a=1\n    b=2\n  )\n)");
  // doubles as Python's repr writes them (torch 1.13's reprs)
  CHECK(repr_of(nn::Dropout(0.0)) == "Dropout(p=0.0, inplace=False)");
  CHECK(repr_of(nn::BatchNorm2d(3, 1e-5, 1.0)) ==
        "BatchNorm2d(3, eps=1e-05, momentum=1.0, affine=True, track_running_stats=True)");
  CHECK(repr_of(nn::LayerNorm({2, 3}, 1e10)) ==
        "LayerNorm((2, 3), eps=10000000000.0, elementwise_affine=True)");
  CHECK(repr_of(nn::LayerNorm({4}, 0.123456789)) ==
        "LayerNorm((4,), eps=0.123456789, elementwise_affine=True)");
  // a class template's name keeps its arguments, namespaces and all, and loses only its own
  // namespace
  Wrap<nn::Linear> w;
  CHECK(w.type_name() == "Wrap<td::nn::Linear>");
  CHECK(repr_of(w).rfind("Wrap<td::nn::Linear>(\n  (m): Linear(", 0) == 0);
}

TEST_CASE("a method argument of a narrower C++ type must hold the value") {
  Wrap<nn::Linear> w;
  CHECK(w({int64_t{7}}).to_int() == 7);
  CHECK(w({int64_t{-2147483648}}).to_int() == -2147483648);
  // a static_cast would have made 2^32 a 0 and 5e9 705032704
  check_throws_mentioning<ValueError>([&] { w({int64_t{1} << 32}); },
                                      "[Wrap<td::nn::Linear>.forward] argument 'n' is 4294967296, "
                                      "which a C++ int32 cannot hold");
  CHECK_THROWS_AS(w({int64_t{5000000000}}), ValueError);
  struct F : nn::Module {
    F() { register_method("forward", &F::forward, {"x"}); }
    double forward(float x) { return x; }
  } f;
  CHECK(f({0.5}).to_double() == 0.5);
  CHECK(std::isinf(f({INFINITY}).to_double()));  // not finite: not an overflow, as item<float>
  check_throws_mentioning<ValueError>([&] { f({1e300}); }, "which a C++ float cannot hold");
  // an argument without a name cannot be bound by keyword, nor reported
  struct E : nn::Module {
    E() { register_method("forward", &E::forward, {"x", ""}); }
    int64_t forward(int64_t x, int64_t) { return x; }
  };
  check_throws_mentioning<ValueError>([] { E(); }, "argument 1 has an empty name");
}
