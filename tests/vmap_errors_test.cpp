// vmap's errors: its inputs named with their shapes, view sizes and rule errors given per set as
// a call per set gives them, data access on a batched tensor, and a batched tensor that escaped
// its vmap.
#include <doctest/doctest.h>

#include <string>
#include <thread>

#include "engine/engine.h"
#include "modules/tensordict.h"
#include "modules/value.h"
#include "tests/tensor_values.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

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

TEST_CASE("vmap: embedding with stacked tables rejects out-of-range indices") {
  Tensor w = ones({2, 5, 3});
  auto f = vmap([](Tensor i, Tensor t) { return embedding(i, t); }, {.in_dims = {std::nullopt, 0}});
  Tensor idx = tensor<int64_t>({0, 4});
  CHECK(f(idx, w).shape() == Shape{2, 2, 3});
  CHECK_THROWS_AS(f(tensor<int64_t>({5}), w), IndexError);
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
