// The vmap transform: API, in/out dims, TensorDict/Value arguments, chunking, errors, in-place
// semantics, the fallback, and the kernel-count proof that ensemble linear is one GEMM.
#include "vmap/vmap.h"

#include <doctest/doctest.h>

#include <cmath>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "modules/tensordict.h"
#include "modules/value.h"
#include "tests/test_util.h"

using namespace td;
using namespace td::test;

namespace {

// element (indices) of a contiguous copy
double at(const Tensor& t, std::initializer_list<int64_t> idx) {
  Tensor c = t.contiguous().to(kFloat64);
  auto v = c.to_vector<double>();
  int64_t off = 0, k = 0;
  for (int64_t i : idx) off = off * t.size(k++) + i;
  return v[off];
}

}  // namespace

TEST_CASE("vmap: the bmm and nested dot examples") {
  manual_seed(1);
  auto bmm = vmap([](Tensor a, Tensor b) { return matmul(a, b); }, {.in_dims = {0, std::nullopt}});
  Tensor a = randn({5, 3, 4}), b = randn({4, 2});
  Tensor c = bmm(a, b);
  REQUIRE(c.shape() == Shape{5, 3, 2});
  auto av = a.to_vector<float>(), bv = b.to_vector<float>(), cv = c.to_vector<float>();
  for (int n = 0; n < 5; ++n)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2; ++j) {
        double s = 0;
        for (int k = 0; k < 4; ++k) s += double(av[n * 12 + i * 4 + k]) * bv[k * 2 + j];
        CHECK(cv[n * 6 + i * 2 + j] == doctest::Approx(s).epsilon(1e-5));
      }
  auto dot = vmap(vmap([](Tensor u, Tensor v) { return (u * v).sum(); }));
  Tensor u = randn({6, 5, 3}), v = randn({6, 5, 3});
  Tensor d = dot(u, v);
  REQUIRE(d.shape() == Shape{6, 5});
  auto uv = u.to_vector<float>(), vv = v.to_vector<float>(), dv = d.to_vector<float>();
  for (int i = 0; i < 30; ++i) {
    double s = 0;
    for (int k = 0; k < 3; ++k) s += double(uv[i * 3 + k]) * vv[i * 3 + k];
    CHECK(dv[i] == doctest::Approx(s).epsilon(1e-5));
  }
}

TEST_CASE("vmap: the function sees per-set shapes") {
  Shape seen;
  auto f = vmap(
      [&](Tensor x) {
        seen = x.shape();
        CHECK(x.dim() == 2);
        return x;
      },
      {.in_dims = {1}});
  Tensor y = f(zeros({2, 7, 3}));
  CHECK(seen == Shape{2, 3});
  CHECK(y.shape() == Shape{7, 2, 3});
}

TEST_CASE("vmap: negative in_dims and out_dims") {
  Tensor x = arange(12).view({3, 4}).to(kFloat32);  // map over dim -1 (size 4)
  Tensor y = vmap([](Tensor t) { return mul(t, 2.0); }, {.in_dims = {-1}, .out_dims = {-1}})(x);
  REQUIRE(y.shape() == Shape{3, 4});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(at(y, {i, j}) == 2.0 * (i * 4 + j));
  Tensor z = vmap([](Tensor t) { return t.sum(); }, {.in_dims = {-1}})(x);  // [4]
  REQUIRE(z.shape() == Shape{4});
  for (int j = 0; j < 4; ++j) CHECK(at(z, {j}) == (0 + j) + (4 + j) + (8 + j));
}

TEST_CASE("vmap: out_dims per output, None for unbatched outputs, unbatched outputs expand") {
  Tensor x = arange(6).view({2, 3}).to(kFloat32), s = full({2}, 5.0);
  auto f = vmap([](Tensor t, Tensor u) { return std::make_tuple(mul(t, 10.0), u, ones({2})); },
                {.in_dims = {0, std::nullopt}, .out_dims = {1, std::nullopt, 0}});
  auto [a, b, c] = f(x, s);
  REQUIRE(a.shape() == Shape{3, 2});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) CHECK(at(a, {j, i}) == 10.0 * (i * 3 + j));
  CHECK(b.is_same(s));
  REQUIRE(c.shape() == Shape{2, 2});
  for (double v : c.to_vector<double>()) CHECK(v == 1.0);
  // out_dims None on a batched output
  auto g = vmap([](Tensor t) { return t; }, {.out_dims = {std::nullopt}});
  CHECK_THROWS_AS(g(x), ValueError);
  CHECK(has(message_of([&] { g(x); }), "out_dims is None"));
  auto h = vmap([](Tensor t) { return t; }, {.out_dims = {3}});
  CHECK_THROWS_AS(h(x), IndexError);
  auto k = vmap([](Tensor t) { return std::make_tuple(t, t); }, {.out_dims = {0, 0, 0}});
  CHECK_THROWS_AS(k(x), ValueError);
  // a number cannot carry the sets along a dim: only with out_dims None (PyTorch's rule)
  auto num = vmap([](Tensor t) { return std::make_tuple(t, 3.0); });
  CHECK_THROWS_AS(num(x), ValueError);
  CHECK(has(message_of([&] { num(x); }), "output 1 is of type float"));
  CHECK(has(message_of([&] { num(x); }), "out_dims = None"));
  auto num_none =
      vmap([](Tensor t) { return std::make_tuple(t, 3.0); }, {.out_dims = {0, std::nullopt}});
  auto [t0, three] = num_none(x);
  CHECK(t0.shape() == Shape{2, 3});
  CHECK(three == 3.0);
  // None carries nothing and passes through
  auto none = vmap([](Tensor t) { return ValueList{Value(t), Value()}; });
  ValueList nv = none(x);
  REQUIRE(nv.size() == 2);
  CHECK(nv[0].tensor().shape() == Shape{2, 3});
  CHECK(nv[1].is_none());
  // std::vector outputs
  auto l = vmap([](Tensor t) { return std::vector<Tensor>{t, neg(t)}; });
  auto outs = l(x);
  REQUIRE(outs.size() == 2);
  CHECK(at(outs[1], {1, 2}) == -5.0);
}

TEST_CASE("vmap: TensorDict and Value arguments") {
  Tensor a = arange(12).view({4, 3}).to(kFloat32);
  Tensor c = ones({4, 2, 2});
  TensorDict td({{"a", a}}, {4});
  td.set("b.c", c);
  Shape inner_bs{9};
  auto f = vmap([&](TensorDict t) {
    inner_bs = t.batch_size();
    CHECK(t.get("a").shape() == Shape{3});
    CHECK(t.get("b.c").shape() == Shape{2, 2});
    return add(t.get("a").sum(), t.get("b.c").sum());
  });
  Tensor r = f(td);
  CHECK(inner_bs == Shape{});
  REQUIRE(r.shape() == Shape{4});
  for (int i = 0; i < 4; ++i) CHECK(at(r, {i}) == (3 * i) + (3 * i + 1) + (3 * i + 2) + 4);
  // in_dim indexes the batch dims of a TensorDict with two of them
  TensorDict td2({{"w", arange(24).view({2, 4, 3}).to(kFloat32)}}, {2, 4});
  auto g = vmap(
      [&](TensorDict t) {
        inner_bs = t.batch_size();
        return t.get("w").sum({-1});
      },
      {.in_dims = {1}});
  Tensor r2 = g(td2);
  CHECK(inner_bs == Shape{2});
  REQUIRE(r2.shape() == Shape{4, 2});
  CHECK(at(r2, {1, 1}) == (15 + 16 + 17));
  // TensorDict output gets the batch dim
  auto h = vmap([](Tensor x) { return TensorDict({{"y", mul(x, 2.0)}}); });
  TensorDict out = h(a);
  CHECK(out.batch_size() == Shape{4});
  CHECK(at(out.get("y"), {3, 2}) == 22.0);
  // Value list / dict arguments: each leaf mapped at the in_dim
  auto m = vmap([](Value v) { return add(v[0].tensor(), v[1].tensor()); });
  Tensor mv = m(Value(ValueList{Value(a), Value(mul(a, 2.0))}));
  CHECK(at(mv, {2, 1}) == 3.0 * 7);
  auto n = vmap([](Value v) { return v["x"].tensor().sum(); });
  Tensor nv = n(Value(ValueDict{{"x", Value(a)}, {"note", Value("text")}}));
  REQUIRE(nv.shape() == Shape{4});
  CHECK(at(nv, {0}) == 3.0);
}

TEST_CASE("vmap: a batch of size 0 gives empty outputs of the right shape") {
  Tensor x = zeros({0, 4, 3});
  Tensor w = ones({5, 3});
  for (std::optional<int64_t> c : {std::optional<int64_t>(), std::optional<int64_t>(2)}) {
    auto f = vmap([&](Tensor t) { return softmax(linear(t, w), -1).sum({0}); }, {.chunk_size = c});
    Tensor y = f(x);
    CHECK(y.shape() == Shape{0, 5});
  }
  auto g = vmap([](Tensor t, Tensor wt) { return linear(t, wt); }, {.in_dims = {std::nullopt, 0}});
  CHECK(g(ones({4, 3}), zeros({0, 5, 3})).shape() == Shape{0, 4, 5});
}

TEST_CASE("vmap: any chunk_size gives the same result as none") {
  manual_seed(4);
  Tensor x = randn({7, 4, 3}), w = randn({5, 3});
  auto make = [&](std::optional<int64_t> c) {
    return vmap([&](Tensor t) { return softmax(linear(relu(t), w), -1).mean({0}); },
                {.chunk_size = c})(x);
  };
  Tensor ref = make(std::nullopt);
  for (int64_t c : std::initializer_list<int64_t>{1, 2, 3, 6, 7, 12})
    CHECK(allclose(make(c), ref, 1e-6, 1e-7));
  CHECK_THROWS_AS(make(0), ValueError);
  CHECK_THROWS_AS(make(-2), ValueError);
  CHECK(has(message_of([&] { make(0); }), "chunk_size"));
}

TEST_CASE("vmap: input errors name the arguments and shapes") {
  Tensor x = zeros({3, 2}), y = zeros({4, 2});
  auto id2 = [](Tensor a, Tensor b) { return add(a, b); };
  // in_dims structure
  CHECK_THROWS_AS(vmap(id2, {.in_dims = {0}})(x, x), ValueError);
  CHECK(has(message_of([&] { vmap(id2, {.in_dims = {0}})(x, x); }),
                 "in_dims is not compatible"));
  // in_dim out of range
  CHECK_THROWS_AS(vmap(id2, {.in_dims = {0, 2}})(x, x), IndexError);
  std::string m = message_of([&] { vmap(id2, {.in_dims = {0, -3}})(x, x); });
  CHECK(has(m, "-ndim <= in_dim < ndim"));
  CHECK(has(m, "[3, 2]"));
  CHECK(has(m, "argument 1"));
  // mismatched batch sizes
  CHECK_THROWS_AS(vmap(id2)(x, y), ValueError);
  m = message_of([&] { vmap(id2)(x, y); });
  CHECK(has(m, "3 (argument 0 of shape [3, 2] at dim 0)"));
  CHECK(has(m, "4 (argument 1 of shape [4, 2] at dim 0)"));
  // nothing batched
  CHECK_THROWS_AS(vmap(id2, {.in_dims = {std::nullopt, std::nullopt}})(x, x), ValueError);
  CHECK(has(message_of([&] {
                   vmap(id2, {.in_dims = {std::nullopt, std::nullopt}})(x, x);
                 }),
                 "at least one input must be batched"));
}

TEST_CASE("vmap: an in_dim given for a non-tensor argument is refused, as torch") {
  auto scale = [](Tensor x, int64_t k) { return x * static_cast<double>(k); };
  check_throws_mentioning<ValueError>(
      [&] {
        vmap(scale, {.in_dims = {0, 0}})(randn({2, 3}), int64_t{3});
      },
      "in_dim=0 for argument 1 of type int");
  check_throws_mentioning<ValueError>(
      [&] {
        vmap(scale, {.in_dims = {0, -1}})(randn({2, 3}), int64_t{3});
      },
      "only Tensor and TensorDict inputs can be mapped");
  check_throws_mentioning<ValueError>(
      [] {
        vmap([](Tensor x, std::string) { return x; }, {.in_dims = {0, 5}})(randn({2, 3}),
                                                                           std::string("ab"));
      },
      "[vmap] got in_dim=5 for argument 1 of type str");
  // shared (nullopt), or with the default in_dims, it is passed through to every set
  const Tensor x = arange(6).view({2, 3}).to(kFloat32);
  CHECK(allclose(vmap(scale, {.in_dims = {0, std::nullopt}})(x, int64_t{3}), x * 3.0));
  CHECK(allclose(vmap(scale)(x, int64_t{3}), x * 3.0));
  // a mapped list's other leaves go to every set (as functional_vmap's inputs)
  const Tensor y = vmap([](Value v) { return v[0].tensor() * static_cast<double>(v[1].to_int()); },
                        {.in_dims = {0}})(Value(ValueList{x, Value(int64_t{2})}));
  CHECK(allclose(y, x * 2.0));
}

TEST_CASE("vmap: view and reshape sizes are checked against the per-set shape") {
  const int64_t g = int64_t{1} << 32;
  for (bool reshape : {false, true}) {
    const char* op = reshape ? "[reshape]" : "[view]";
    auto as = [reshape](const Shape& s) {
      return [reshape, s](Tensor a) { return reshape ? a.reshape(s) : a.view(s); };
    };
    // an overflowing product is refused before it is multiplied (UBSan caught the old rule)
    check_throws_mentioning<ValueError>(
        [&] {
          vmap(as({g, g, 0}))(randn({2, 3, 4}));
        },
        "too many elements");
    check_throws_mentioning<ValueError>(
        [&] {
          vmap(as({g, g, -1}))(randn({2, 3, 4}));
        },
        "too many elements");
    // the message gives the per-set element count (12), not the stacked one (24)
    check_throws_mentioning<ValueError>(
        [&] {
          vmap(as({5, -1}))(randn({2, 3, 4}));
        },
        "is invalid for input of 12 elements");
    CHECK_THROWS_AS(vmap(as({-1, -1}))(randn({2, 3, 4})), ValueError);
    CHECK(has(message_of([&] { vmap(as({-1, -1}))(randn({2, 3, 4})); }), op));
    CHECK(vmap(as({4, -1}))(randn({2, 3, 4})).shape() == Shape{2, 4, 3});
    // a -1 beside a 0 could be anything: refused per set as unbatched (torch alike)
    CHECK_THROWS_AS(vmap(as({0, -1}))(randn({2, 0, 4})), ValueError);
    CHECK(vmap(as({0, 4}))(randn({2, 4, 0})).shape() == Shape{2, 0, 4});
  }
}

TEST_CASE("vmap: errors name the per-set shapes and the caller's dims, as a call per set") {
  // each message is the unbatched call's on one set's slice (per-set shape [4] or [3, 4]),
  // never the stacked [2, ...] the rule runs
  auto says = [](auto f, const char* want) {
    const std::string m = message_of(f);
    CHECK_MESSAGE(has(m, want), m);
    CHECK_MESSAGE(!has(m, "[2, "), m);
  };
  const Tensor i = arange(8).view({2, 4}), x = randn({2, 3, 4});
  says([&] { vmap([](Tensor a) { return mean(a); })(i); },
       "[mean] expects a floating point input, got td.int64 of per-set shape [4]");
  says([&] { vmap([](Tensor a) { return softmax(a, 0); })(i); },
       "[softmax] expects a floating point input, got td.int64 of per-set shape [4]");
  says([&] { vmap([](Tensor a) {
               return sum(a, IntList{0, -2});
             })(x); },
       "[sum] dim appears multiple times in the list of dims [0, -2]");
  says(
      [&] {
        vmap([](Tensor a) { return amax(a, IntList{0}); })(randn({2, 0, 4}));
      },
      "[amax] cannot reduce over dim 0 of size 0 (input per-set shape [0, 4])");
  says([&] { vmap([](Tensor a) {
               return a.expand({5, 3, 3});
             })(x); },
       "cannot expand a tensor of per-set shape [3, 4] to [5, 3, 3] (dim 2: 4 vs 3)");
  says([&] { vmap([](Tensor a) { return a.expand({4}); })(x); },
       "cannot expand a tensor of per-set shape [3, 4] to [4] (fewer dims)");
  says(
      [&] {
        vmap([](Tensor a, Tensor b) { return add(a, b); })(x, randn({2, 5}));
      },
      "[add] per-set shapes [3, 4] and [5] do not broadcast (dim 1: 4 vs 5)");
  says(
      [&] {
        vmap([](Tensor a, Tensor b) { return mul(a, b); }, {.in_dims = {0, std::nullopt}})(
            x, randn({5, 5}));
      },
      "[mul] per-set shapes [3, 4] and [5, 5] do not broadcast");
  says(
      [&] {
        vmap([](Tensor c, Tensor a) { return where(c, a, a); })(x > 0.0, randn({2, 3}));
      },
      "[where] per-set shapes [3, 4] and [3] do not broadcast");
  says([&] { vmap([](Tensor a) {
               return split(a, IntList{1, 1}, 1)[0];
             })(x); },
       "[split] section sizes [1, 1] sum to 2 but dim 1 of per-set shape [3, 4] has size 4");
  says([&] { vmap([](Tensor a) { return a.transpose(0, 1).view({-1}); })(x); },
       "[view] shape [-1] is not compatible with the strides of a tensor of per-set shape [4, 3] "
       "and strides [1, 4]");
  // element-wise ops that refuse a dtype or a zero divisor: the set that fails says it
  const Tensor flags = zeros({2, 3, 4}, kBool);
  says([&] { vmap([](Tensor a) { return -a; })(flags); },
       "[neg] is not implemented for bool tensors (shape [3, 4]); use logical_not");
  says([&] { vmap([](Tensor a) { return floor(a); })(flags); },
       "[floor] is not implemented for bool tensors (shape [3, 4])");
  says([&] { vmap([](Tensor a) { return ~a; })(x); },
       "[bitwise_not] is not implemented for floating tensors (got float32 of shape [3, 4])");
  says(
      [&] {
        vmap([](Tensor a, Tensor b) { return pow(a, b); }, {.in_dims = {0, std::nullopt}})(
            flags, flags[0][0]);
      },
      "[pow] is not implemented for bool tensors (shapes [3, 4] and [4])");
  // set 1's divisor holds the 0; set 0's is fine
  const Tensor divisor = ones({2, 3, 4}, kInt64);
  divisor[1][2][1].fill_(0);
  says([&] { vmap([](Tensor a, Tensor b) { return remainder(a, b); })(i, divisor); },
       "[remainder] ZeroDivisionError: an integer divisor (shape [3, 4]) holds 0");
  // no set to run: the stacked call's error stands
  CHECK_THROWS_AS(vmap([](Tensor a) { return -a; })(zeros({0, 3}, kBool)), TypeError);
  // nested: the innermost set's shape
  says([&] { vmap(vmap([](Tensor a) { return -a; }))(flags); }, "(shape [4])");
  // the unbatched calls say the same of their own shapes
  CHECK(has(message_of([&] { mean(i[0]); }), "got td.int64 of shape [4]"));
  CHECK(has(message_of([&] { add(x[0], randn({5})); }), "[add] shapes [3, 4] and [5]"));
  CHECK(has(message_of([&] { x[0].transpose(0, 1).view({-1}); }),
            "tensor of shape [4, 3] and strides [1, 4]"));
}

TEST_CASE("vmap: in-place semantics") {
  Tensor x = arange(6).view({2, 3}).to(kFloat32);
  // batched into batched writes each set's slice (through a layout with the batch dim last)
  Tensor buf = zeros({3, 2});
  vmap(
      [](Tensor b, Tensor t) {
        add_(b, t);
        return b;
      },
      {.in_dims = {1, 0}})(buf, x);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) CHECK(at(buf, {j, i}) == i * 3 + j);
  // an unbatched value into a batched tensor broadcasts over the sets
  Tensor buf2 = zeros({2, 3});
  vmap(
      [](Tensor b, Tensor t) {
        copy_(b, t);
        return b;
      },
      {.in_dims = {0, std::nullopt}})(buf2, tensor({1.f, 2.f, 3.f}));
  CHECK(at(buf2, {1, 2}) == 3.0);
  // a batched value into an unbatched tensor
  Tensor dst = zeros({3});
  auto bad = vmap([&](Tensor t) {
    copy_(dst, t);
    return t;
  });
  CHECK_THROWS_AS(bad(x), RuntimeError);
  std::string m = message_of([&] { bad(x); });
  CHECK(has(m, "[copy_]"));
  CHECK(has(m, "per-set shape [3]"));
  CHECK(has(m, "unbatched"));
  CHECK(at(dst, {0}) == 0.0);
  // an operand with more dims than self is refused as in a call per set (copy_ of a [1, 3] into
  // a [3] raises); against the physical [2, 3] it broadcast over the sets and was taken
  CHECK_THROWS_AS(copy_(zeros({3}), ones({1, 3})), ValueError);
  Tensor buf3 = zeros({2, 3});
  auto wide = [](Tensor b, Tensor t) {
    add_(b, t);
    return b;
  };
  for (const Tensor& o : {ones({1, 3}), ones({1, 1, 3})}) {
    check_throws_mentioning<ValueError>(
        [&] {
          vmap(wide, {.in_dims = {0, std::nullopt}})(buf3, o);
        },
        "[add_] operand of per-set shape " + shape_str(o.shape()));
    CHECK_THROWS_AS(vmap(wide)(buf3, ones({2, 1, 3})), ValueError);
  }
  CHECK(buf3.to_vector<float>() == std::vector<float>(6, 0.f));  // nothing written
  vmap(wide, {.in_dims = {0, std::nullopt}})(buf3, ones({1}));   // a smaller one still broadcasts
  CHECK(buf3.to_vector<float>() == std::vector<float>(6, 1.f));
}

TEST_CASE("vmap: like-factories of a batched tensor are batched, as in PyTorch") {
  Tensor x = arange(6).view({2, 3}).to(kFloat32);
  // a destination made with zeros_like takes per-set values in place
  Tensor acc = vmap([](Tensor t) {
    Tensor z = zeros_like(t);
    CHECK(z.is_batched());
    CHECK(z.shape() == Shape{3});
    add_(z, t);
    return z;
  })(x);
  CHECK(equal(acc, x));
  // values, dtype, and in_dims other than 0
  Tensor o = vmap([](Tensor t) { return ones_like(t); }, {.in_dims = {1}})(x);
  CHECK(o.shape() == Shape{3, 2});
  for (double v : o.to_vector<double>()) CHECK(v == 1.0);
  Tensor xi = arange(6).view({2, 3});
  Tensor f = vmap([](Tensor t) { return full_like(t, 7.0); })(xi);
  CHECK(f.dtype() == DType::Int64);
  for (double v : f.to_vector<double>()) CHECK(v == 7.0);
  Tensor e = vmap([](Tensor t) {
    Tensor d = empty_like(t);
    copy_(d, mul(t, 2.0));
    return d;
  })(x);
  CHECK(equal(e, mul(x, 2.0)));
  // nested levels: batched at both
  Tensor x3 = arange(24).view({2, 3, 4}).to(kFloat32);
  Tensor n = vmap(vmap([](Tensor t) {
    Tensor z = zeros_like(t);
    add_(z, t);
    return z;
  }))(x3);
  CHECK(equal(n, x3));
  // outside vmap they stay plain factories
  Tensor z = zeros_like(x);
  CHECK_FALSE(z.is_batched());
  for (double v : z.to_vector<double>()) CHECK(v == 0.0);
}

TEST_CASE("vmap: batch_norm running statistics") {
  manual_seed(2);
  constexpr int64_t b = 3;
  Tensor x = randn({b, 8, 4});
  SUBCASE("unbatched running stats with a batched input in training raise") {
    Tensor rm = zeros({4}), rv = ones({4});
    auto f = vmap([&](Tensor t) { return batch_norm(t, rm, rv, {}, {}, true); });
    CHECK_THROWS_AS(f(x), RuntimeError);
    std::string m = message_of([&] { f(x); });
    CHECK(has(m, "batch_norm"));
    CHECK(has(m, "running_mean"));
    CHECK(has(m, "track_running_stats"));
    // eval mode works with any combination
    Tensor y = vmap([&](Tensor t) { return batch_norm(t, rm, rv, {}, {}, false); })(x);
    CHECK(y.shape() == Shape{b, 8, 4});
  }
  SUBCASE("stacked running stats are updated per set, as each set alone would") {
    Tensor rm = zeros({b, 4}), rv = ones({b, 4});
    Tensor y = vmap([](Tensor t, Tensor m, Tensor v) {
      return batch_norm(t, m, v, {}, {}, true, 0.1);
    })(x, rm, rv);
    for (int64_t i = 0; i < b; ++i) {
      Tensor m1 = zeros({4}), v1 = ones({4});
      Tensor yi = batch_norm(x.select(0, i), m1, v1, {}, {}, true, 0.1);
      CHECK(allclose(y.select(0, i), yi, 1e-5, 1e-6));
      CHECK(allclose(rm.select(0, i), m1, 1e-6, 1e-7));
      CHECK(allclose(rv.select(0, i), v1, 1e-6, 1e-7));
      // independent check of the mean update: 0.9 * 0 + 0.1 * mean over N
      auto xv = x.select(0, i).contiguous().to_vector<float>();
      double s = 0;
      for (int n = 0; n < 8; ++n) s += xv[n * 4 + 2];
      CHECK(at(rm, {i, 2}) == doctest::Approx(0.1 * s / 8).epsilon(1e-5));
    }
  }
  SUBCASE("stacked running stats with the batch dim last are written back") {
    Tensor rm = zeros({4, b}), rv = ones({4, b});
    vmap([](Tensor t, Tensor m, Tensor v) { return batch_norm(t, m, v, {}, {}, true, 0.1); },
         {.in_dims = {0, 1, 1}})(x, rm, rv);
    for (int64_t i = 0; i < b; ++i) {
      Tensor m1 = zeros({4}), v1 = ones({4});
      batch_norm(x.select(0, i), m1, v1, {}, {}, true, 0.1);
      CHECK(allclose(rm.select(1, i), m1, 1e-6, 1e-7));
      CHECK(allclose(rv.select(1, i), v1, 1e-6, 1e-7));
    }
  }
  SUBCASE("a shared running stat beside a stacked one, with a shared input, is updated once") {
    // every set computes the same update of the shared running_mean (the input is shared): it
    // was computed into a temporary and dropped, leaving running_mean as it was
    Tensor x0 = x.select(0, 0).clone();  // [8, 4], shared
    Tensor rm = full({4}, 0.5), rv = ones({b, 4});
    Tensor y = vmap([&](Tensor v) { return batch_norm(x0, rm, v, {}, {}, true, 0.1); })(rv);
    CHECK(y.shape() == Shape{b, 8, 4});
    auto xv = x0.to_vector<float>();
    for (int64_t ch = 0; ch < 4; ++ch) {
      double s = 0;
      for (int n = 0; n < 8; ++n) s += xv[n * 4 + ch];
      CHECK(at(rm, {ch}) == doctest::Approx(0.9 * 0.5 + 0.1 * s / 8).epsilon(1e-5));
    }
    Tensor m1 = full({4}, 0.5), v1 = ones({4});
    batch_norm(x0, m1, v1, {}, {}, true, 0.1);
    CHECK(allclose(rm, m1, 1e-6, 1e-7));
    for (int64_t i = 0; i < b; ++i) CHECK(allclose(rv.select(0, i), v1, 1e-6, 1e-7));
    // and the other way round: shared running_var, stacked running_mean
    Tensor rm2 = zeros({b, 4}), rv2 = ones({4});
    vmap([&](Tensor m) { return batch_norm(x0, m, rv2, {}, {}, true, 0.1); })(rm2);
    CHECK(allclose(rv2, v1, 1e-6, 1e-7));
    // nested, with one channel: the shared stat's temporary must be writable at the outer level
    Tensor x1 = x0.narrow(1, 0, 1).clone();  // [8, 1]
    Tensor rm3 = full({1}, 0.5), rv3 = ones({2, b, 1});
    vmap(vmap([&](Tensor v) { return batch_norm(x1, rm3, v, {}, {}, true, 0.1); }))(rv3);
    Tensor m3 = full({1}, 0.5), v3 = ones({1});
    batch_norm(x1, m3, v3, {}, {}, true, 0.1);
    CHECK(allclose(rm3, m3, 1e-6, 1e-7));
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < b; ++j)
        CHECK(allclose(rv3.select(0, i).select(0, j), v3, 1e-6, 1e-7));
  }
}

TEST_CASE("vmap: data access on a batched tensor raises") {
  auto f = vmap([](Tensor t) {
    (void)t.sum().item<float>();
    return t;
  });
  CHECK_THROWS_AS(f(zeros({3, 2})), RuntimeError);
  CHECK(has(message_of([&] { f(zeros({3, 2})); }), "item"));
}

// vmap(f)(x) == stack(f(x_i)): what a call per set refuses, the batched call refuses too (a rule
// that only saw the stacked shapes once let these through, silently wrong)
TEST_CASE("vmap: rules refuse what a call per set refuses") {
  auto refused_both = [](auto f, const Tensor& x, const char* op) {
    CHECK_THROWS_AS(f(x[0]), ValueError);
    CHECK_THROWS_AS(vmap(f)(x), ValueError);
    CHECK(has(message_of([&] { vmap(f)(x); }), op));
  };
  Tensor x = randn({3, 4});
  // normalized_shape [3, 4] over a per-set [4] (the stacked [3, 4] would normalise across sets)
  refused_both([](Tensor t) { return layer_norm(t, {3, 4}); }, x, "[layer_norm]");
  // flatten's dims on a per-set 0-d input are 0 and -1 only, as a call per set
  CHECK_THROWS_AS(vmap([](Tensor t) { return t.flatten(1); })(zeros({3})), IndexError);
  CHECK(vmap([](Tensor t) { return t.flatten(-1); })(zeros({3})).shape() == Shape{3, 1});
  // a repeated dim of a per-set 0-d input
  refused_both([](Tensor t) { return t.sum({0, 0}); }, randn({3}), "appears multiple times");
  refused_both([](Tensor t) { return t.amax({-1, 0}); }, randn({3}), "[amax]");
  // a per-set [H, W] is not a [C, H, W]
  refused_both([](Tensor t) { return max_pool2d(t, {2}); }, randn({2, 4, 4}), "[max_pool2d]");
  refused_both([](Tensor t) { return avg_pool2d(t, {2}); }, randn({2, 4, 4}), "[avg_pool2d]");
  // -1 cannot size a new leading dim
  refused_both([](Tensor t) { return t.expand({-1, 4}); }, x, "[expand]");
  // batch_norm and conv2d fold the sets into channels: per-set shapes are checked first
  Tensor x23 = randn({2, 3}), x1 = randn({1, 1, 4, 4});
  refused_both([&](Tensor rm) { return batch_norm(x23, rm, ones({3})); }, zeros({4, 1, 3}),
               "[batch_norm] running_mean of per-set shape [1, 3]");
  refused_both([&](Tensor w) { return batch_norm(x23, zeros({3}), ones({3}), w); }, ones({4, 1, 3}),
               "[batch_norm] weight");
  refused_both([](Tensor t) { return batch_norm(t, zeros({5}), ones({5})); }, randn({3, 2, 4}),
               "[batch_norm] running_mean of per-set shape [5]");
  refused_both(
      [&](Tensor b) {
        return conv2d(x1, ones({2, 1, 1, 1}), b);
      },
      randn({3, 1, 2}), "[conv2d] bias of per-set shape [1, 2]");
  // stacked weights fold the sets into the groups: the message names one set's weight
  // ([3, 2, 3, 3]), not the folded [9, 2, 3, 3]
  Tensor x455 = randn({4, 5, 5});
  refused_both([&](Tensor w) { return conv2d(x455, w); }, randn({3, 3, 2, 3, 3}),
               "[conv2d] input of per-set shape [4, 5, 5] and weight of per-set shape "
               "[3, 2, 3, 3] do not match with groups=1");
  refused_both(
      [](Tensor t) {
        return conv2d(t, ones({1, 2, 3, 3}));
      },
      randn({3, 2, 2, 2}),
      "[conv2d] kernel of per-set shape [1, 2, 3, 3] (with dilation) is larger than "
      "the padded input of per-set shape [2, 2, 2]");
  // pooling folds the sets into N: [4 sets of [2, 2, 2]] was reported as [4, 2, 2, 2]
  refused_both([](Tensor t) { return max_pool2d(t, 3); }, randn({4, 2, 2, 2}),
               "[max_pool2d] input of per-set shape [2, 2, 2] is too small for kernel [3]");
  refused_both([](Tensor t) { return avg_pool2d(t, 3); }, randn({4, 1, 2, 2, 2}),
               "[avg_pool2d] input of per-set shape [1, 2, 2, 2] is too small for kernel [3]");
  CHECK(has(message_of([] {
              max_pool2d(randn({2, 2, 2}), 3);
            }),
            "[max_pool2d] input of shape [2, 2, 2] is too small"));
  // an index past one set's table names that table (stacked tables are folded into one)
  Tensor i5 = tensor({5}).to(kInt64);
  auto emb = [&](Tensor w) { return embedding(i5, w); };
  CHECK_THROWS_WITH_AS(emb(randn({4, 2})),
                       "[embedding] index 5 is out of range for 4 embeddings (weight of shape "
                       "[4, 2])",
                       IndexError);
  CHECK_THROWS_WITH_AS(vmap(emb)(randn({3, 4, 2})),
                       "[embedding] index 5 is out of range for 4 embeddings (weight of per-set "
                       "shape [4, 2])",
                       IndexError);
  auto pick = [](Tensor t, Tensor i) { return index_select(t, 1, i); };
  Tensor i7 = tensor({1, 7}).to(kInt64);
  CHECK_THROWS_WITH_AS(pick(randn({2, 4}), i7.narrow(0, 1, 1)),
                       "[index_select] index 7 is out of bounds for dim 1 with size 4", IndexError);
  CHECK_THROWS_WITH_AS(vmap(pick)(randn({2, 2, 4}), i7.reshape({2, 1})),
                       "[index_select] index 7 is out of bounds for dim 1 with size 4", IndexError);
  refused_both(
      [](Tensor t) {
        return matmul(t, ones({5, 2}));
      },
      x, "[matmul] per-set shapes [4] and [5, 2]");
  refused_both(
      [](Tensor t) {
        return cat({t, ones({2, 2})}, 0);
      },
      x, "[cat] tensor at index 1 has per-set shape [2, 2]");
  refused_both(
      [](Tensor t) {
        return stack({t, ones({5})}, 0);
      },
      x, "[stack] tensor at index 1 has per-set shape [5]");
  auto sel = [](Tensor t) { return t.select(0, 5); };
  CHECK_THROWS_AS(sel(x[0]), IndexError);
  CHECK_THROWS_AS(vmap(sel)(x), IndexError);
  CHECK(has(message_of([&] { vmap(sel)(x); }), "index 5 out of range for dim 0 of size 4"));
  // linear: a per-set 1-D weight that does not match the input, or a bias of per-set [2, 4] for
  // an output [2, 4]
  Tensor x2 = randn({2, 3});
  refused_both([&](Tensor w) { return linear(x2, w); }, randn({4, 5}),
               "[linear] input of shape [2, 3] does not match weight of shape [5]");
  refused_both(
      [&](Tensor b) {
        return linear(x2, ones({4, 3}), b);
      },
      randn({5, 2, 4}), "[linear] bias of per-set shape [2, 4]");
  // stacked layer_norm weights: per-set [1, 4] is not normalized_shape [4]
  auto ln = vmap([](Tensor t, Tensor w) { return layer_norm(t, {4}, w); });
  CHECK_THROWS_AS(ln(randn({3, 2, 4}), ones({3, 1, 4})), ValueError);
  // and a stacked weight of another dtype, which the batched path would have promoted
  CHECK_THROWS_AS(layer_norm(randn({2, 4}), {4}, ones({4}, kFloat64)), TypeError);
  check_throws_mentioning<TypeError>(
      [&] {
        ln(randn({3, 2, 4}), ones({3, 4}, kFloat64));
      },
      "[layer_norm] weight has dtype");
  CHECK_THROWS_AS(layer_norm(randn({2, 4}), {4}, ones({1, 4})), ValueError);
  // and what a call per set accepts still runs: a per-set 1-D linear weight (x @ w), per-set
  // weight [4], per-set pool input [C, H, W]
  Tensor wv = randn({4, 3});
  Tensor yv = vmap([&](Tensor w) { return linear(x2, w); })(wv);
  REQUIRE(yv.shape() == Shape{4, 2});
  for (int64_t i = 0; i < 4; ++i) CHECK(allclose(yv[i], matmul(x2, wv[i])));
  Tensor y = ln(randn({3, 2, 4}), ones({3, 4}));
  CHECK(y.shape() == Shape{3, 2, 4});
  CHECK(vmap([](Tensor t) { return max_pool2d(t, {2}); })(randn({2, 1, 4, 4})).shape() ==
        Shape{2, 1, 2, 2});
  CHECK(vmap([](Tensor t) { return t.expand({2, 4}); })(x).shape() == Shape{3, 2, 4});
}

TEST_CASE("vmap: max_pool2d passes ceil_mode through") {
  // 3 sets of [2, 5, 5]: 2x2 windows, stride 2, ceil_mode: 3x3 per set, each equal to its own
  // call; set i's channel c is arange(25) + 25 (2i + c), so the maxima are hand values
  Tensor x = arange(150).to(kFloat32).reshape({3, 2, 5, 5});
  Tensor y = vmap([](Tensor t) { return max_pool2d(t, 2, 2, 0, 1, true); })(x);
  REQUIRE(y.shape() == Shape{3, 2, 3, 3});
  const std::vector<float> base{6, 8, 9, 16, 18, 19, 21, 23, 24};
  for (int64_t i = 0; i < 3; ++i) {
    CHECK(allclose(y[i], max_pool2d(x[i], 2, 2, 0, 1, true)));
    for (int64_t c = 0; c < 2; ++c) {
      std::vector<float> want = base;
      for (float& v : want) v += static_cast<float>(25 * (2 * i + c));
      CHECK(y[i][c].to_vector<float>() == want);
    }
  }
  // a batched 4-D input (sets folded into N), with the out -= 1 rule along H
  Tensor x4 = arange(60).to(kFloat32).reshape({2, 1, 1, 5, 6});
  Tensor y4 = vmap([](Tensor t) { return max_pool2d(t, {2, 3}, 2, {1, 0}, 1, true); })(x4);
  REQUIRE(y4.shape() == Shape{2, 1, 1, 3, 3});
  CHECK(y4[1].to_vector<float>() == std::vector<float>{32, 34, 35, 44, 46, 47, 56, 58, 59});
}

TEST_CASE("vmap: embedding with stacked tables rejects out-of-range indices") {
  Tensor w = ones({2, 5, 3});
  auto f = vmap([](Tensor i, Tensor t) { return embedding(i, t); }, {.in_dims = {std::nullopt, 0}});
  Tensor idx = tensor<int64_t>({0, 4});
  CHECK(f(idx, w).shape() == Shape{2, 2, 3});
  CHECK_THROWS_AS(f(tensor<int64_t>({5}), w), IndexError);
}

namespace {
std::vector<Tensor> my_double_impl(std::span<const Tensor> in, const OpAttrs&) {
  return {mul(in[0], 2.0)};
}
}  // namespace

TEST_CASE("vmap: an op without a rule runs per set with a warning, or raises when disabled") {
  OpId op = register_op("vmap_test_double", &my_double_impl);
  bool no_rule = batch_rule(op) == nullptr;
  CHECK(no_rule);
  Tensor x = arange(6).view({3, 2}).to(kFloat32);
  std::ostringstream captured;
  auto* old = std::cerr.rdbuf(captured.rdbuf());
  Tensor y;
  try {
    y = vmap([&](Tensor t) { return call_op1(op, {t}); })(x);
  } catch (...) {
    std::cerr.rdbuf(old);
    throw;
  }
  std::cerr.rdbuf(old);
  CHECK(has(captured.str(), "vmap_test_double"));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) CHECK(at(y, {i, j}) == 2.0 * (i * 2 + j));
  CHECK(fallback_count(op) >= 1);
  set_vmap_fallback_enabled(false);
  std::string m = message_of([&] { vmap([&](Tensor t) { return call_op1(op, {t}); })(x); });
  set_vmap_fallback_enabled(true);
  CHECK(has(m, "vmap_test_double"));
  set_vmap_fallback_enabled(false);
  CHECK_THROWS_AS(vmap([&](Tensor t) { return call_op1(op, {t}); })(x), RuntimeError);
  set_vmap_fallback_enabled(true);
}

TEST_CASE("call_op: attributes of another struct are a TypeError naming the op, under vmap too") {
  Tensor x = ones({2, 3});
  CHECK(has(message_of([&] { call_op1(OpId::softmax, {x}, ConvAttrs{}); }),
            "[softmax] takes DimAttrs, got ConvAttrs"));
  CHECK_THROWS_AS(call_op1(OpId::sum, {x}), TypeError);  // NoAttrs, the default
  CHECK_THROWS_AS(vmap([](Tensor t) { return call_op1(OpId::transpose, {t}, SliceAttrs{}); })(x),
                  TypeError);
  CHECK(has(message_of([&] { vmap([](Tensor t) { return add(t, call_op1(OpId::rand, {})); })(x); }),
            "[rand] takes RandomAttrs, got NoAttrs"));
}

TEST_CASE("vmap: ensemble linear over 64 stacked weights is as many GEMMs as one linear") {
  manual_seed(11);
  constexpr int64_t b = 64, n = 10, in = 3, out = 4;
  Tensor x = randn({n, in}), w = randn({b, out, in}), bias = randn({b, out});
  reset_kernel_counts();
  Tensor single = linear(x, w.select(0, 0), bias.select(0, 0));
  int64_t gemm_one = kernel_count(KernelKind::Gemm);
  int64_t copy_one = kernel_count(KernelKind::Copy);
  reset_kernel_counts();
  auto ens = vmap([](Tensor xx, Tensor ww, Tensor bb) { return linear(xx, ww, bb); },
                  {.in_dims = {std::nullopt, 0, 0}});
  Tensor y = ens(x, w, bias);
  CHECK(gemm_one >= 1);
  CHECK(kernel_count(KernelKind::Gemm) == gemm_one);
  CHECK(kernel_count(KernelKind::Copy) == copy_one);  // no copy of the stacked weights
  REQUIRE(y.shape() == Shape{b, n, out});
  CHECK(allclose(y.select(0, 0), single, 1e-5, 1e-6));
  // naive check of one set
  auto xv = x.to_vector<float>(), wv = w.to_vector<float>(), bv = bias.to_vector<float>();
  for (int64_t s : {int64_t{5}, int64_t{63}})
    for (int64_t i = 0; i < n; ++i)
      for (int64_t o = 0; o < out; ++o) {
        double acc = bv[s * out + o];
        for (int64_t k = 0; k < in; ++k) acc += double(xv[i * in + k]) * wv[(s * out + o) * in + k];
        CHECK(at(y, {s, i, o}) == doctest::Approx(acc).epsilon(1e-5));
      }
  // per-set inputs and stacked weights: a batched GEMM (one launch)
  reset_kernel_counts();
  Tensor xs = randn({b, n, in});
  Tensor y2 = vmap([](Tensor xx, Tensor ww, Tensor bb) { return linear(xx, ww, bb); })(xs, w, bias);
  CHECK(kernel_count(KernelKind::Gemm) == 1);
  for (int64_t s : {int64_t{0}, int64_t{33}})
    CHECK(allclose(y2.select(0, s), linear(xs.select(0, s), w.select(0, s), bias.select(0, s)),
                   1e-5, 1e-6));
}

TEST_CASE("vmap: view ops stay views of the input") {
  Tensor x = arange(24).view({4, 2, 3}).to(kFloat32);
  // per set s (mapped over the last dim): t = x[:, :, s] of shape [4, 2]
  Tensor y = vmap(
      [](Tensor t) {
        return t.transpose(0, 1).unsqueeze(0).expand({3, 2, 4}).select(0, 1).slice(1, 1, 3);
      },
      {.in_dims = {-1}})(x);
  CHECK(y.shares_storage(x));
  REQUIRE(y.shape() == Shape{3, 2, 2});
  // y[s][i][j] = t[j + 1][i] = x[j + 1][i][s] = (j + 1) * 6 + i * 3 + s
  for (int s = 0; s < 3; ++s)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) CHECK(at(y, {s, i, j}) == (j + 1) * 6 + i * 3 + s);
}

TEST_CASE("vmap: conv2d over stacked weights is one convolution") {
  manual_seed(8);
  constexpr int64_t b = 4;
  Tensor x = randn({2, 3, 6, 6}), w = randn({b, 5, 3, 3, 3}), bias = randn({b, 5});
  reset_kernel_counts();
  conv2d(x, w.select(0, 0), bias.select(0, 0));
  int64_t conv_one = kernel_count(KernelKind::Conv);
  reset_kernel_counts();
  Tensor y = vmap(
      [](Tensor xx, Tensor ww, Tensor bb) {
        return conv2d(xx, ww, bb, {1, 1}, {1, 1});
      },
      {.in_dims = {std::nullopt, 0, 0}})(x, w, bias);
  CHECK(kernel_count(KernelKind::Conv) == conv_one);
  REQUIRE(y.shape() == Shape{b, 2, 5, 6, 6});
  for (int64_t s = 0; s < b; ++s)
    CHECK(allclose(y.select(0, s), conv2d(x, w.select(0, s), bias.select(0, s), {1, 1}, {1, 1}),
                   1e-5, 1e-5));
  // per-set inputs too: the groups trick, still one convolution
  Tensor xs = randn({b, 2, 3, 6, 6});
  reset_kernel_counts();
  Tensor y2 = vmap([](Tensor xx, Tensor ww) { return conv2d(xx, ww); })(xs, w);
  CHECK(kernel_count(KernelKind::Conv) == conv_one);
  for (int64_t s = 0; s < b; ++s)
    CHECK(allclose(y2.select(0, s), conv2d(xs.select(0, s), w.select(0, s)), 1e-5, 1e-5));
}

TEST_CASE("vmap: three nested levels and non-tensor arguments") {
  Tensor x = arange(120).view({2, 3, 4, 5}).to(kFloat64);
  auto f =
      vmap(vmap(vmap([](Tensor t, int64_t k) { return mul(t.sum(), static_cast<double>(k)); })));
  Tensor y = f(x, int64_t{2});
  REQUIRE(y.shape() == Shape{2, 3, 4});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) {
        double base = ((i * 3 + j) * 4 + k) * 5;
        CHECK(at(y, {i, j, k}) == 2 * (5 * base + 10));
      }
  // an inner level mapping a different dim than the outer one
  auto g = vmap(vmap([](Tensor t) { return t.sum(); }, {.in_dims = {1}}), {.in_dims = {2}});
  Tensor z = g(x);  // outer over dim 2 (4), inner over dim 1 of the rest (3): [4, 3]
  REQUIRE(z.shape() == Shape{4, 3});
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j) {
      double s = 0;
      for (int i = 0; i < 2; ++i)
        for (int l = 0; l < 5; ++l) s += ((i * 3 + j) * 4 + k) * 5 + l;
      CHECK(at(z, {k, j}) == s);
    }
}

TEST_CASE("vmap: chunked TensorDict and dict outputs are concatenated") {
  Tensor x = arange(10).view({5, 2}).to(kFloat32);
  auto f = vmap(
      [](Tensor t) {
        return TensorDict({{"a", mul(t, 2.0)}, {"b.c", t.sum()}});
      },
      {.chunk_size = 2});
  TensorDict d = f(x);
  CHECK(d.batch_size() == Shape{5});
  REQUIRE(d.get("a").shape() == Shape{5, 2});
  REQUIRE(d.get("b.c").shape() == Shape{5});
  for (int i = 0; i < 5; ++i) {
    CHECK(at(d.get("a"), {i, 1}) == 2.0 * (2 * i + 1));
    CHECK(at(d.get("b.c"), {i}) == 4.0 * i + 1);
  }
  auto g = vmap(
      [](Tensor t) {
        return Value(ValueDict{{"y", Value(neg(t))}, {"k", Value()}});
      },
      {.out_dims = {1}, .chunk_size = 3});
  Value v = g(x);
  REQUIRE(v["y"].tensor().shape() == Shape{2, 5});
  CHECK(at(v["y"].tensor(), {1, 4}) == -9.0);
  CHECK(v["k"].is_none());
  // a number leaf has no dim 1 to put the sets on
  auto h = vmap(
      [](Tensor t) {
        return Value(ValueDict{{"y", Value(neg(t))}, {"k", Value(3)}});
      },
      {.out_dims = {1}, .chunk_size = 3});
  CHECK_THROWS_AS(h(x), ValueError);
}

// Every batching of (x, w, b) for linear_relu, and a nested level, against relu(linear) per set.
TEST_CASE("vmap: linear_relu over every stacking of input, weight and bias") {
  manual_seed(5);
  constexpr int64_t b = 3, n = 7, in = 5, out = 9;
  using OptDim = std::optional<int64_t>;
  for (OptDim xd : {OptDim{}, OptDim{0}, OptDim{1}})
    for (OptDim wd : {OptDim{}, OptDim{0}})
      for (int bias_kind : {0, 1, 2}) {  // none, shared, stacked
        if (!xd && !wd && bias_kind != 2) continue;  // nothing batched
        CAPTURE(xd.has_value());
        CAPTURE(wd.has_value());
        CAPTURE(bias_kind);
        Tensor x = !xd ? randn({n, in}) : *xd == 0 ? randn({b, n, in}) : randn({n, b, in});
        Tensor w = wd ? randn({b, out, in}) : randn({out, in});
        Tensor bias = bias_kind == 2 ? randn({b, out}) : randn({out});
        OptDim bd = bias_kind == 2 ? OptDim{0} : OptDim{};
        auto per_set = [&](int64_t s) {
          Tensor xs = xd ? x.select(*xd, s) : x;
          Tensor ws = wd ? w.select(0, s) : w;
          Tensor bs = bias_kind == 0 ? Tensor() : bd ? bias.select(0, s) : bias;
          return relu(linear(xs, ws, bs));
        };
        Tensor y = vmap([&](Tensor xx, Tensor ww, Tensor bb) {
          return linear_relu(xx, ww, bias_kind == 0 ? Tensor() : bb);
        }, {.in_dims = {xd, wd, bd}})(x, w, bias);
        REQUIRE(y.shape() == Shape{b, n, out});
        for (int64_t s = 0; s < b; ++s) CHECK(allclose(y.select(0, s), per_set(s), 1e-5, 1e-5));
        CHECK(amin(y).item<float>() >= 0.0f);
      }
  // an outer level over x around an inner level over the weights: the inner rule sees x still
  // batched at the outer level and must leave it to that level's rules
  Tensor x2 = randn({2, n, in}), w2 = randn({b, out, in}), b2 = randn({b, out});
  Tensor nested = vmap([&](Tensor xx) {
    return vmap([&](Tensor ww, Tensor bb) { return linear_relu(xx, ww, bb); })(w2, b2);
  })(x2);
  // stacked weights: the rule checks per-set shapes and dtypes as linear does
  auto stacked = vmap([](Tensor xx, Tensor ww) { return linear_relu(xx, ww); });
  std::string msg = message_of([&] { stacked(randn({b, n, in}), randn({b, out, in + 1})); });
  CHECK(has(msg, "[linear]"));
  CHECK(has(msg, "per-set shape [7, 5]"));
  CHECK(has(msg, "per-set shape [9, 6]"));
  CHECK_THROWS_AS(stacked(randn({b, n, in}), randn({b, out, in + 1})), ValueError);
  CHECK_THROWS_AS(stacked(ones({b, n, in}, kBool), ones({b, out, in}, kBool)), TypeError);
  REQUIRE(nested.shape() == Shape{2, b, n, out});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t s = 0; s < b; ++s)
      CHECK(allclose(nested.select(0, i).select(0, s),
                     relu(linear(x2.select(0, i), w2.select(0, s), b2.select(0, s))), 1e-5, 1e-5));
}

TEST_CASE("vmap: all, any and max along a dim are per set, as a loop over the sets") {
  Tensor x = tensor({0.f, 2.f, 3.f, 4.f, 0.f, 0.f, 5.f, 1.f}, {2, 2, 2});
  Tensor a = vmap([](Tensor t) { return t.all(); })(x);
  Tensor n = vmap([](Tensor t) { return any(t, 1); })(x);
  auto mx = vmap([](Tensor t) { return max(t, 0); })(x);
  for (int64_t s = 0; s < 2; ++s) {
    CHECK(a[s].item<bool>() == x[s].all().item<bool>());
    CHECK(n[s].to_vector<bool>() == any(x[s], 1).to_vector<bool>());
    auto [v, i] = max(x[s], 0);
    CHECK(std::get<0>(mx)[s].to_vector<float>() == v.to_vector<float>());
    CHECK(std::get<1>(mx)[s].to_vector<int64_t>() == i.to_vector<int64_t>());
  }
  // by hand: set 0 [[0, 2], [3, 4]] has a zero; set 1 [[0, 0], [5, 1]] has a zero row
  CHECK(a.to_vector<bool>() == std::vector<bool>{false, false});
  CHECK(n.to_vector<bool>() == std::vector<bool>{true, true, false, true});
}

TEST_CASE("vmap of unflatten on a per-set 0-d tensor is an IndexError, as unbatched") {
  check_throws_mentioning<IndexError>(
      [] { vmap([](Tensor x) { return x.unflatten(0, {1}); })(ones({2})); },
      "[unflatten] dim 0 given but a tensor of shape [] has no dims");
}

// A batched tensor kept from one vmap is refused by a later one, even one of the same size and
// nesting depth (whose level it would otherwise be taken for), and on another thread.
TEST_CASE("vmap: a batched tensor that escaped its vmap is refused in a later one") {
  Tensor leaked;
  auto keep = vmap([&](Tensor a) {
    leaked = a;
    return a * 2.0;
  });
  keep(arange(12).reshape({3, 4}));
  auto add_leaked = [&](Tensor a) { return a + leaked; };
  CHECK_THROWS_WITH_AS(vmap(add_leaked)(zeros({3, 4})),
                       doctest::Contains("[add] got a tensor of shape [4] batched at vmap level"),
                       RuntimeError);
  CHECK_THROWS_WITH_AS(vmap(add_leaked, {.chunk_size = 1})(zeros({3, 4})),
                       doctest::Contains("escaped the vmap"), RuntimeError);
  CHECK_THROWS_AS(leaked + 1.0, RuntimeError);
  std::string error;
  std::thread other([&] {
    try {
      vmap(add_leaked)(zeros({3, 4}));
    } catch (const RuntimeError& e) {
      error = e.what();
    }
  });
  other.join();
  CHECK(error.find("escaped the vmap") != std::string::npos);
}

TEST_CASE("vmap: a function may return or take a std::pair, as a two-element tuple") {
  manual_seed(12);
  Tensor u = randn({4, 3});
  auto f = vmap([](Tensor a) { return std::make_pair(a * 2, a.sum()); });
  std::pair<Tensor, Tensor> out = f(u);
  REQUIRE(out.first.shape() == Shape{4, 3});
  REQUIRE(out.second.shape() == Shape{4});
  auto uv = u.to_vector<float>();
  for (int i = 0; i < 4; ++i) {
    CHECK(out.first[i][1].item<float>() == 2 * uv[i * 3 + 1]);
    CHECK(out.second[i].item<float>() ==
          doctest::Approx(uv[i * 3] + uv[i * 3 + 1] + uv[i * 3 + 2]).epsilon(1e-6));
  }
  auto g = vmap([](std::pair<Tensor, Tensor> p) { return p.first - p.second; });
  Tensor d = g(std::make_pair(u, u * 3));
  for (int i = 0; i < 12; ++i)
    CHECK(d.flatten()[i].item<float>() == doctest::Approx(-2 * uv[i]).epsilon(1e-6));
}
