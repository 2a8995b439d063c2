// The vmap transform's API: in/out dims, TensorDict/Value arguments, nested levels, chunking,
// empty batches, like-factories of a batched tensor, std::pair results and arguments.
#include "vmap/vmap.h"

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "modules/tensordict.h"
#include "modules/value.h"
#include "tests/tensor_values.h"
#include "tests/test_util.h"

using namespace td;
using namespace td::test;

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
