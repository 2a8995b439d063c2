// Value: kinds, checked accessors, Python-like printing, map_tensors / for_each_tensor.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {
std::string repr(const Value& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
}  // namespace

TEST_CASE("value kinds and accessors") {
  CHECK(Value().is_none());
  CHECK(Value(nullptr).is_none());
  CHECK(Value(true).kind() == Value::Kind::Bool);
  CHECK(Value(3).kind() == Value::Kind::Int);
  CHECK(Value(int64_t{3}).to_int() == 3);
  CHECK(Value(2.5).to_double() == 2.5);
  CHECK(Value(3).to_double() == 3.0);  // an int converts
  CHECK(Value("abc").str() == "abc");
  CHECK(Value(std::string("x")).kind() == Value::Kind::String);
  Tensor t = zeros({2});
  CHECK(Value(t).tensor().is_same(t));
  CHECK(Value(TensorDict()).is_tensordict());
  Value l = ValueList{1, 2.0, "s"};
  CHECK(l.is_list());
  CHECK(l.list().size() == 3);
  CHECK(l[1].to_double() == 2.0);
  Value d = ValueDict{{"a", 1}, {"b", "x"}};
  CHECK(d.is_dict());
  CHECK(d["b"].str() == "x");
  CHECK(d.dict().keys() == std::vector<std::string>{"a", "b"});
  CHECK(std::string(Value(1.5).kind_name()) == "float");
  // every integer type is an int, every floating type a double
  CHECK(Value(3u).to_int() == 3);
  CHECK(Value(size_t{4}).to_int() == 4);
  CHECK(Value(uint64_t{INT64_MAX}).to_int() == INT64_MAX);
  check_throws_mentioning<ValueError>([] { Value(uint64_t{1} << 63); }, "does not fit");
  CHECK(Value(5LL).to_int() == 5);
  CHECK(Value(short{-6}).to_int() == -6);
  CHECK(Value(1.5f).to_double() == 1.5);
  CHECK(Value(2.5L).to_double() == 2.5);
  // tuples, pairs and vectors are lists
  Value tp = std::make_tuple(t, 2, std::string("s"));
  REQUIRE(tp.is_list());
  CHECK(tp[0].tensor().is_same(t));
  CHECK(tp[1].to_int() == 2);
  CHECK(tp[2].str() == "s");
  Value pr = std::make_pair(1.5, true);
  CHECK(pr[0].to_double() == 1.5);
  CHECK(pr[1].to_bool());
  Value vt = std::vector<Tensor>{t, t};
  CHECK(vt.list().size() == 2);
  CHECK(vt[1].tensor().is_same(t));
  Value vb = std::vector<bool>{true, false};
  CHECK(vb[1].kind() == Value::Kind::Bool);
  CHECK(Value(std::vector<int>{}).list().empty());
}

TEST_CASE("value checked accessors throw TypeError naming what is held") {
  CHECK_THROWS_AS(Value(3).tensor(), TypeError);
  CHECK(message_of([] { (void)Value(3).tensor(); }).find("int") != std::string::npos);
  CHECK(message_of([] { (void)Value().tensor(); }).find("None") != std::string::npos);
  CHECK_THROWS_AS(Value("s").to_int(), TypeError);
  CHECK_THROWS_AS(Value(1).to_bool(), TypeError);
  CHECK_THROWS_AS(Value(true).to_double(), TypeError);
  CHECK_THROWS_AS(Value(1.0).str(), TypeError);
  CHECK_THROWS_AS(Value(1).list(), TypeError);
  CHECK_THROWS_AS(Value(1).dict(), TypeError);
  CHECK_THROWS_AS(Value(1).tensordict(), TypeError);
  Value l = ValueList{1};
  CHECK_THROWS_AS(l[1], IndexError);
  CHECK_THROWS_AS(l["k"], TypeError);
  Value d = ValueDict{{"a", 1}};
  CHECK_THROWS_AS(d["zz"], KeyError);
  CHECK(message_of([&] { (void)d["zz"]; }).find("'zz'") != std::string::npos);
  CHECK_THROWS_AS(d[0], TypeError);
}

TEST_CASE("value dict keeps insertion order and replaces in place") {
  ValueDict d;
  d.set("z", 1);
  d.set("a", 2);
  d.set("z", 3);
  CHECK(d.keys() == std::vector<std::string>{"z", "a"});
  CHECK(d.at("z").to_int() == 3);
  d["new"];  // inserts None
  CHECK(d.at("new").is_none());
  CHECK(d.erase("a"));
  CHECK_FALSE(d.erase("a"));
  CHECK(d.size() == 2);
  CHECK_THROWS_AS(d.at("a"), KeyError);
}

TEST_CASE("value printing follows Python reprs") {
  CHECK(repr(Value()) == "None");
  CHECK(repr(Value(true)) == "True");
  CHECK(repr(Value(false)) == "False");
  CHECK(repr(Value(3)) == "3");
  CHECK(repr(Value(-7)) == "-7");
  CHECK(repr(Value(2.5)) == "2.5");
  CHECK(repr(Value(1.0)) == "1.0");
  CHECK(repr(Value(0.1)) == "0.1");
  CHECK(repr(Value(1e20)) == "1e+20");
  CHECK(repr(Value("str")) == "'str'");
  CHECK(repr(Value("it's")) == "\"it's\"");
  CHECK(repr(Value(ValueList{1, "a", Value()})) == "[1, 'a', None]");
  CHECK(repr(Value(ValueDict{{"k", 1}, {"j", ValueList{}}})) == "{'k': 1, 'j': []}");
  std::string tr = repr(Value(zeros({2})));
  CHECK(tr.find("tensor") != std::string::npos);
}

TEST_CASE("doubles print as Python's repr, subnormals and all") {
  // the right column is Python 3.11's repr() of the left (python3 -c 'print(repr(x))')
  const std::pair<double, const char*> cases[] = {
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {1.0, "1.0"},
      {0.1, "0.1"},
      {1e-05, "1e-05"},
      {0.0001, "0.0001"},
      {1e16, "1e+16"},
      {1e15, "1000000000000000.0"},
      {123456789.0, "123456789.0"},
      {1e-310, "1e-310"},  // subnormal: std::stod refused it, so printing threw
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {0.30000000000000004, "0.30000000000000004"},
      {1.5e-7, "1.5e-07"},
      {1e10, "10000000000.0"},
      {-123.456, "-123.456"},
      {12345678901234567890.0, "1.2345678901234567e+19"},
      {9999999999999998.0, "9999999999999998.0"},
      {0.000123, "0.000123"},
      {2.5e-5, "2.5e-05"},
      {100.0, "100.0"},
      {12.345, "12.345"},
  };
  for (const auto& [d, want] : cases) {
    CAPTURE(want);
    CHECK(repr_double(d) == want);
    CHECK(repr(Value(d)) == want);
  }
  CHECK(repr_double(std::nan("")) == "nan");
  CHECK(repr_double(-INFINITY) == "-inf");
  // every repr reads back as the same double
  for (double d = 1e-320; d < 1e300; d *= 7.3)
    for (double v : {d, -d, d * (1 + 1e-9)})
      CHECK(std::strtod(repr_double(v).c_str(), nullptr) == v);
}

TEST_CASE("a list or dict that holds itself prints as Python's [...] and {...}") {
  Value l(ValueList{1});
  l.list().push_back(l);  // Values share their list, as Python's names do
  CHECK(repr(l) == "[1, [...]]");
  Value d(ValueDict{{"a", 1}});
  d.dict().set("self", d);
  CHECK(repr(d) == "{'a': 1, 'self': {...}}");
  // the same list twice, not inside itself, prints twice
  Value inner(ValueList{2});
  CHECK(repr(Value(ValueList{inner, inner})) == "[[2], [2]]");
  l.list().pop_back();  // break the cycles, which reference counting cannot free
  d.dict().erase("self");
}

TEST_CASE("map_tensors and for_each_tensor visit every tensor leaf in order") {
  Tensor a = zeros({2}), b = ones({3});
  TensorDict td({{"w", full({4, 2}, 2.0)}}, {4});
  Value v = ValueList{a, ValueDict{{"x", b}, {"n", 5}}, td};
  std::vector<int64_t> sizes;
  for_each_tensor(v, [&](const Tensor& t) { sizes.push_back(t.numel()); });
  CHECK(sizes == std::vector<int64_t>{2, 3, 8});
  Value m = map_tensors(v, [](const Tensor& t) { return add(t, 1.0); });
  CHECK(m[0].tensor().to_vector<float>() == std::vector<float>{1, 1});
  CHECK(m[1]["x"].tensor().to_vector<float>() == std::vector<float>{2, 2, 2});
  CHECK(m[1]["n"].to_int() == 5);
  CHECK(m[2].tensordict().batch_size() == Shape{4});
  CHECK(m[2].tensordict().get("w").to_vector<float>() == std::vector<float>(8, 3.0f));
  // A leaf that loses the batch dims drops the batch size.
  Value s = map_tensors(Value(td), [](const Tensor& t) { return t.sum(); });
  CHECK(s.tensordict().batch_size().empty());
}

TEST_CASE("walking a list that holds itself is a ValueError, not a stack overflow") {
  Value l(ValueList{zeros({2, 3})});
  l.list().push_back(l);
  auto id = [](const Tensor& t) { return t; };
  check_throws_mentioning<ValueError>([&] { map_tensors(l, id); },
                                      "does a list or dict hold itself");
  CHECK_THROWS_AS(for_each_tensor(l, [](const Tensor&) {}), ValueError);
  CHECK_THROWS_AS(vmap([](Value v) { return v[0].tensor(); })(l), ValueError);
  CHECK_THROWS_AS(vmap([](Value v) { return v[0].tensor(); }, {.in_dims = {0}})(l), ValueError);
  l.list().pop_back();  // break the cycle
  // deep but finite nesting is walked, and the depth count is back to zero after an error
  Value deep = zeros({2});
  for (int i = 0; i < 500; ++i) deep = Value(ValueList{deep});
  int leaves = 0;
  for_each_tensor(deep, [&](const Tensor&) { ++leaves; });
  CHECK(leaves == 1);
  CHECK(map_tensors(l, id).list().size() == 1);
}

namespace {
// A tensor inside `levels` lists, one in the other.
Value nested(int levels, const Tensor& t) {
  Value v = t;
  for (int i = 0; i < levels; ++i) v = Value(ValueList{v});
  return v;
}
}  // namespace

// A finite tree (no cycle) deeper than ValueDepthGuard allows is refused by every public entry
// that walks Values, inputs and outputs alike; one level less is walked.
TEST_CASE("a Value nested deeper than the limit is a ValueError in every walk") {
  const int limit = ValueDepthGuard::kMaxDepth;
  const Value deep = nested(limit, zeros({3}));
  const char* what = "levels deep";
  auto id = [](const Tensor& t) { return t; };
  check_throws_mentioning<ValueError>([&] { repr(deep); }, what);
  check_throws_mentioning<ValueError>([&] { map_tensors(deep, id); }, what);
  check_throws_mentioning<ValueError>([&] { for_each_tensor(deep, [](const Tensor&) {}); }, what);
  // vmap: an input, and an output
  check_throws_mentioning<ValueError>([&] { vmap([](Value v) { return v; })(deep); }, what);
  check_throws_mentioning<ValueError>(
      [&] {
        vmap([&](Tensor t) { return nested(limit, t); })(zeros({2, 3}));
      },
      what);
  // functional_vmap: an input split into sets, and an output, batched and in a loop
  auto identity = std::make_shared<nn::Identity>();
  const TensorDict sets(Shape{3});
  check_throws_mentioning<ValueError>(
      [&] {
        nn::functional_vmap(
            *identity, {.params = sets, .kwargs = {{"input", deep}}, .in_dims = {{"input", 0}}});
      },
      what);
  for (bool loop : {false, true}) {
    CAPTURE(loop);
    check_throws_mentioning<ValueError>(
        [&] { nn::functional_vmap(*identity, {.params = sets, .args = {deep}, .loop = loop}); },
        what);
  }
  // one level less is walked
  const Value fits = nested(limit - 2, zeros({3}));
  CHECK(repr(fits).size() > 0);
  CHECK(map_tensors(fits, id).is_list());
  CHECK(vmap([](Value v) { return v; })(fits).is_list());
}
