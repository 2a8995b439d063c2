// cumsum, cumprod, sort, argsort and topk against PyTorch's values (tests/data/sort/, written by
// tests/golden/make_sort_golden.py), their dtypes, 0-d and empty inputs, their errors, and the
// same bits batched (vmap, functional_vmap) as set by set and on any number of threads.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "modules/tensordict.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {

const TensorDict& golden() {
  static const TensorDict g =
      TensorDict::load_safetensors(std::string(TD_TEST_DATA_DIR) + "/sort/sort.safetensors");
  return g;
}

Tensor in(const std::string& name) { return golden().get("in." + name); }

// Same shape and dtype, every element equal (NaN matching NaN; -0 equal to 0).
void check_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  CHECK(got.dtype() == want.dtype());
  const auto g = got.to(kFloat64).to_vector<double>();
  const auto w = want.to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    CAPTURE(i);
    if (std::isnan(w[i]))
      CHECK(std::isnan(g[i]));
    else
      CHECK(g[i] == w[i]);
  }
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("cumsum and cumprod against PyTorch") {
  struct C {
    std::string name, input;
    int64_t dim;
    std::optional<DType> dtype;
  };
  const std::vector<C> cases = {
      {"cumsum.f32_dim0", "f32", 0, {}},         {"cumsum.f32_dim1", "f32", 1, {}},
      {"cumsum.f32_dimneg1", "f32", -1, {}},     {"cumsum.f64_dim1", "f64", 1, {}},
      {"cumsum.f64_dimneg3", "f64", -3, {}},     {"cumsum.i64_dim1", "i64", 1, {}},
      {"cumsum.i64_dim0", "i64", 0, {}},         {"cumsum.bool", "bool", 0, {}},
      {"cumsum.scalar", "scalar", 0, {}},        {"cumsum.scalar_i64", "scalar_i64", -1, {}},
      {"cumsum.long_rows", "long_rows", 1, {}},  {"cumsum.f32_to_f64", "f32", 1, kFloat64},
      {"cumsum.i64_to_f32", "i64", 0, kFloat32}, {"cumsum.f32_to_i64", "f32", 0, kInt64},
      {"cumsum.ties_nan", "ties", 1, {}},        {"cumprod.f32_dim1", "f32", 1, {}},
      {"cumprod.f64_dim2", "f64", 2, {}},        {"cumprod.i64_dim0", "i64", 0, {}},
      {"cumprod.bool", "bool", 0, {}},           {"cumprod.i64_to_f64", "i64", 1, kFloat64},
  };
  for (const C& c : cases) {
    const bool prod = c.name.rfind("cumprod", 0) == 0;
    const Tensor x = in(c.input);
    const Tensor got = prod ? cumprod(x, c.dim, c.dtype) : cumsum(x, c.dim, c.dtype);
    // float32 accumulates in float64 as torch's CPU kernel does: the same bits
    check_equal(got, golden().get(c.name + ".out"), c.name);
  }
}

TEST_CASE("sort and argsort against PyTorch: ties stable, NaN largest") {
  struct C {
    std::string name, input;
    int64_t dim;
    bool descending;
  };
  const std::vector<C> sorts = {
      {"sort.ties_asc", "ties", -1, false},     {"sort.ties_desc", "ties", -1, true},
      {"sort.ties_dim0_asc", "ties", 0, false}, {"sort.ties_dim0_desc", "ties", 0, true},
      {"sort.i64_asc", "ties_i64", 1, false},   {"sort.i64_desc", "ties_i64", 1, true},
      {"sort.bool_asc", "bool", 0, false},      {"sort.bool_desc", "bool", -1, true},
      {"sort.f64_3d_dim1", "f64_3d", 1, false}, {"sort.f64_3d_dim1_desc", "f64_3d", -2, true},
      {"sort.scalar", "scalar", 0, false},      {"sort.long_rows", "long_rows", -1, true},
  };
  for (const C& c : sorts) {
    // stable or not, td's order is the stable one
    for (bool stable : {false, true}) {
      const auto [v, i] = sort(in(c.input), c.dim, c.descending, stable);
      check_equal(v, golden().get(c.name + ".values"), c.name + " values");
      check_equal(i, golden().get(c.name + ".indices"), c.name + " indices");
    }
  }
  const std::vector<C> argsorts = {
      {"argsort.ties_asc", "ties", 1, false},
      {"argsort.ties_desc", "ties", 1, true},
      {"argsort.i64_dim0", "ties_i64", 0, false},
      {"argsort.f64_3d_dim2_desc", "f64_3d", 2, true},
  };
  for (const C& c : argsorts)
    check_equal(argsort(in(c.input), c.dim, c.descending), golden().get(c.name + ".indices"),
                c.name);
}

TEST_CASE("topk against PyTorch: values, and among equal values the lower index first") {
  struct C {
    std::string name, input;
    int64_t k, dim;
    bool largest;
    bool distinct;  // no ties: torch.topk's own indices are the only answer
  };
  const std::vector<C> cases = {
      {"topk.distinct_largest", "distinct", 3, -1, true, true},
      {"topk.distinct_smallest", "distinct", 3, -1, false, true},
      {"topk.distinct_dim0", "distinct", 2, 0, true, true},
      {"topk.distinct_nan_largest", "distinct_nan", 4, 1, true, true},
      {"topk.distinct_nan_smallest", "distinct_nan", 4, 1, false, true},
      {"topk.k0", "distinct", 0, 1, true, true},
      {"topk.k_all", "distinct", 10, 1, true, true},
      {"topk.k_all_smallest", "distinct_nan", 10, -1, false, true},
      {"topk.ties_largest", "ties", 4, 1, true, false},
      {"topk.ties_smallest", "ties", 5, 1, false, false},
      {"topk.i64_largest", "ties_i64", 3, 1, true, false},
      {"topk.f64_3d_dim1", "f64_3d", 2, 1, false, false},
      {"topk.long_rows", "long_rows", 7, 1, true, true},
  };
  for (const C& c : cases) {
    for (bool sorted : {true, false}) {  // td always gives them in order
      const auto [v, i] = topk(in(c.input), c.k, c.dim, c.largest, sorted);
      check_equal(v, golden().get(c.name + ".values"), c.name + " values");
      check_equal(i, golden().get(c.name + ".indices"), c.name + " indices");
      if (c.distinct)
        check_equal(i, golden().get(c.name + ".torch_indices"), c.name + " torch's indices");
    }
  }
}

TEST_CASE("scans: dtypes, 0-d, empty and the wrap-around of int64") {
  CHECK(cumsum(tensor<int64_t>({1, 2, 3}), 0).dtype() == kInt64);
  CHECK(cumsum(tensor<bool>({true, true, false}), 0).to_vector<int64_t>() ==
        std::vector<int64_t>{1, 2, 2});
  CHECK(cumprod(tensor<bool>({true, false, true}), 0).dtype() == kInt64);
  CHECK(cumsum(tensor({1.f, 2.f}), 0).dtype() == kFloat32);
  CHECK(cumsum(tensor({1.f, 2.f}), 0, kFloat64).dtype() == kFloat64);
  CHECK(cumsum(tensor<int64_t>({1, 2}), 0, kFloat32).to_vector<float>() ==
        std::vector<float>{1.f, 3.f});
  const Tensor s = cumsum(scalar_tensor(4.0), -1);
  CHECK(s.dim() == 0);
  CHECK(s.item<float>() == 4.f);
  CHECK(cumprod(scalar_tensor(3.0, kFloat64), 0).item<double>() == 3.0);
  const Tensor e = cumsum(zeros({2, 0, 3}), 1);
  CHECK(e.shape() == Shape{2, 0, 3});
  CHECK(cumprod(zeros({0}), 0).shape() == Shape{0});
  // a non-contiguous input scans its logical order
  const Tensor m = arange(6).reshape({2, 3});
  CHECK(cumsum(m.t(), 1).to_vector<int64_t>() == std::vector<int64_t>{0, 3, 1, 5, 2, 7});
  // int64 wraps around, as torch
  const int64_t big = std::numeric_limits<int64_t>::max();
  CHECK(cumsum(tensor<int64_t>({big, 1}), 0).to_vector<int64_t>()[1] ==
        std::numeric_limits<int64_t>::min());
  // inf and NaN propagate
  const auto v = cumsum(tensor<double>({1, kInf, -kInf, 2}), 0).to_vector<double>();
  CHECK(v[1] == kInf);
  CHECK(std::isnan(v[2]));
  CHECK(std::isnan(v[3]));
}

TEST_CASE("sort and topk: 0-d, empty, bool and non-contiguous inputs") {
  const auto [v0, i0] = sort(scalar_tensor(2.0), 0);
  CHECK(v0.dim() == 0);
  CHECK(i0.dim() == 0);
  CHECK(i0.dtype() == kInt64);
  CHECK(i0.item<int64_t>() == 0);
  for (int64_t k : {0, 1}) {  // a 0-d input keeps its element for k 0 too, as torch
    const auto [v, i] = topk(scalar_tensor(5.0), k);
    CHECK(v.dim() == 0);
    CHECK(v.item<float>() == 5.f);
    CHECK(i.item<int64_t>() == 0);
  }
  CHECK(argsort(scalar_tensor(1.0)).dim() == 0);
  const auto [ve, ie] = sort(zeros({0, 3}), 0);
  CHECK(ve.shape() == Shape{0, 3});
  CHECK(ie.shape() == Shape{0, 3});
  CHECK(ie.dtype() == kInt64);
  const auto [vk, ik] = topk(zeros({2, 0}), 0);
  CHECK(vk.shape() == Shape{2, 0});
  CHECK(ik.shape() == Shape{2, 0});
  CHECK(topk(zeros({0, 4}), 2).first.shape() == Shape{0, 2});
  // bool, which torch 1.13's topk refuses: true is the larger
  const auto [vb, ib] = topk(tensor<bool>({false, true, false, true}), 3);
  CHECK(vb.dtype() == kBool);
  CHECK(vb.to_vector<bool>() == std::vector<bool>{true, true, false});
  CHECK(ib.to_vector<int64_t>() == std::vector<int64_t>{1, 3, 0});
  // a transposed input sorts its logical rows; the outputs are contiguous
  const Tensor m = tensor({3.f, 1.f, 2.f, 0.f, 5.f, 4.f}, {2, 3}).t();  // [[3, 0], [1, 5], [2, 4]]
  const auto [vm, im] = sort(m, 0, true);
  CHECK(vm.is_contiguous());
  CHECK(vm.to_vector<float>() == std::vector<float>{3.f, 5.f, 2.f, 4.f, 1.f, 0.f});
  CHECK(im.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 2, 1, 0});
  // all-NaN rows and mixed signs of zero keep their order
  const Tensor n = tensor<double>({kNaN, 0.0, kNaN, -0.0});
  CHECK(argsort(n).to_vector<int64_t>() == std::vector<int64_t>{1, 3, 0, 2});
  CHECK(argsort(n, 0, true).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 1, 3});
  CHECK(topk(n, 2).second.to_vector<int64_t>() == std::vector<int64_t>{0, 2});
  CHECK(topk(n, 2, 0, false).second.to_vector<int64_t>() == std::vector<int64_t>{1, 3});
}

TEST_CASE("scan and sort errors name the op and the shape") {
  const Tensor x = zeros({2, 3});
  check_throws_mentioning<IndexError>([&] { cumsum(x, 2); }, "[cumsum] dim 2");
  check_throws_mentioning<IndexError>([&] { cumsum(x, -3); }, "shape [2, 3]");
  check_throws_naming_op<IndexError>([&] { cumprod(x, 5); }, "cumprod");
  check_throws_naming_op<IndexError>([&] { cumsum(scalar_tensor(1.0), 1); }, "cumsum");
  CHECK_THROWS_AS(cumsum(x, 1, kBool), TypeError);
  check_throws_mentioning<TypeError>([&] { cumprod(x, 1, kBool); }, "[cumprod]");
  check_throws_mentioning<IndexError>([&] { sort(x, 2); }, "[sort] dim 2");
  check_throws_mentioning<IndexError>([&] { sort(x, -3); }, "shape [2, 3]");
  check_throws_naming_op<IndexError>([&] { argsort(x, 7); }, "argsort");
  check_throws_mentioning<IndexError>([&] { topk(x, 4, 1); },
                                      "[topk] k 4 is out of range for dim 1 of shape [2, 3]");
  check_throws_mentioning<IndexError>([&] { topk(x, -1); }, "[topk] k -1");
  check_throws_mentioning<IndexError>([&] { topk(x, 3, 0); }, "dim 0 of shape [2, 3]");
  check_throws_mentioning<IndexError>([&] { topk(x, 1, 2); }, "[topk] dim 2");
  check_throws_mentioning<IndexError>([&] { topk(scalar_tensor(1.0), 2); }, "shape []");
  CHECK_THROWS_AS(topk(zeros({0}), 1), IndexError);
  // an undefined input, and another op's attributes
  CHECK_THROWS_AS(sort(Tensor()), ValueError);
  CHECK_THROWS_AS(cumsum(Tensor(), 0), ValueError);
  CHECK_THROWS_AS(call_op(OpId::topk, std::vector<Tensor>{x}, DimAttrs{.dim = 0}), TypeError);
  CHECK_THROWS_AS(call_op(OpId::cumsum, std::vector<Tensor>{x}, SortAttrs{}), TypeError);
  CHECK_THROWS_AS(call_op(OpId::sort, std::vector<Tensor>{x, x}, SortAttrs{}), ValueError);
}

TEST_CASE("scan and sort errors under vmap name the per-set shape") {
  const Tensor x = randn({4, 2, 3});
  check_throws_mentioning<IndexError>(
      [&] { vmap([](Tensor t) { return topk(t, 4, 1).first; })(x); },
      "[topk] k 4 is out of range for dim 1 of per-set shape [2, 3]");
  // dim 2 exists in the stacked [4, 2, 3] but not per set
  check_throws_mentioning<IndexError>([&] { vmap([](Tensor t) { return cumsum(t, 2); })(x); },
                                      "per-set shape [2, 3]");
  check_throws_mentioning<IndexError>([&] { vmap([](Tensor t) { return argsort(t, -3); })(x); },
                                      "[argsort]");
  check_throws_mentioning<IndexError>([&] { vmap([](Tensor t) { return sort(t, 2).first; })(x); },
                                      "[sort]");
  CHECK_THROWS_AS(vmap([](Tensor t) { return cumprod(t, 0, kBool); })(x), TypeError);
}

namespace {

// x [sets, ...] (the sets at dim 0): f of each set, stacked.
Tensor loop(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  std::vector<Tensor> outs;
  for (int64_t i = 0; i < x.size(0); ++i) outs.push_back(f(x[i]));
  return stack(outs, 0);
}

// NaN, infinities and ties in every set, so the order rules are exercised batched
Tensor tricky(const Shape& shape, int64_t levels) {
  Tensor r = floor(mul(rand(shape), static_cast<double>(levels)));
  r = masked_fill(r, lt(rand(shape), 0.1), kNaN);
  return masked_fill(r, lt(rand(shape), 0.05), -kInf);
}

}  // namespace

TEST_CASE("vmap: every op batched gives the per-set loop's bits, at any batch dim") {
  manual_seed(7);
  using F = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<std::string, F>> fns = {
      {"cumsum_dim0", [](const Tensor& t) { return cumsum(t, 0); }},
      {"cumsum_dimneg1", [](const Tensor& t) { return cumsum(t, -1); }},
      {"cumsum_f64", [](const Tensor& t) { return cumsum(t, 1, kFloat64); }},
      {"cumprod_dim1", [](const Tensor& t) { return cumprod(t, 1); }},
      {"cumsum_int",
       [](const Tensor& t) {
         return cumsum(masked_fill(t, logical_not(isfinite(t)), 0).to(kInt64), 0);
       }},
      {"sort_values", [](const Tensor& t) { return sort(t, 1).first; }},
      {"sort_indices_desc", [](const Tensor& t) { return sort(t, 0, true).second; }},
      {"argsort_neg", [](const Tensor& t) { return argsort(t, -2, true); }},
      {"topk_values", [](const Tensor& t) { return topk(t, 3, 1).first; }},
      {"topk_indices_smallest", [](const Tensor& t) { return topk(t, 2, 0, false).second; }},
      {"topk_all", [](const Tensor& t) { return topk(t, 6, -1).second; }},
  };
  const Tensor xs = tricky({5, 4, 6}, 4);  // 5 sets of [4, 6]
  for (const auto& [name, f] : fns) {
    CAPTURE(name);
    const Tensor want = loop(f, xs);
    CHECK(same_bytes(vmap(f)(xs), want));
    // the sets at the last dim
    const Tensor last = xs.permute({1, 2, 0}).contiguous();
    CHECK(same_bytes(vmap(f, {.in_dims = {-1}})(last), want));
    for (std::optional<int64_t> chunk : {std::optional<int64_t>(1), std::optional<int64_t>(2)})
      CHECK(same_bytes(vmap(f, {.chunk_size = chunk})(xs), want));
  }
  // 0-d sets: [5] of scalars
  const Tensor s = tricky({5}, 3);
  CHECK(same_bytes(vmap([](Tensor t) { return cumsum(t, 0); })(s), s));
  CHECK(same_bytes(vmap([](Tensor t) { return topk(t, 1).first; })(s), s));
  CHECK(same_bytes(vmap([](Tensor t) { return topk(t, 0).second; })(s), zeros({5}, kInt64)));
  CHECK(same_bytes(vmap([](Tensor t) { return argsort(t); })(s), zeros({5}, kInt64)));
}

namespace {

// forward(input): the input scaled by the set's weight, then its largest values per row, their
// indices and running sums, and its sorted columns.
struct RankHead : nn::Module {
  nn::Param weight;
  RankHead() {
    weight = register_parameter("weight", randn({6}));
    register_method("forward", &RankHead::forward, {"input"});
  }
  Tensor forward(const Tensor& input) {
    const Tensor y = input * weight.get();
    const auto [v, i] = topk(y, 2, -1);
    return cat({v, i.to(kFloat32), cumsum(y, 1), sort(y, 0, true).first, cumprod(v, -1)}, 1);
  }
};

}  // namespace

TEST_CASE("functional_vmap: stacked weights give each set's own bits, on any thread count") {
  manual_seed(11);
  std::vector<std::shared_ptr<RankHead>> members;
  for (int i = 0; i < 6; ++i) members.push_back(std::make_shared<RankHead>());
  const TensorDict params = TensorDict::from_modules(members);
  const Tensor x = tricky({5, 6}, 3);
  std::vector<Tensor> per;
  for (const auto& m : members) per.push_back(m->forward(x));
  const Tensor want = stack(per, 0);
  const int before = configured_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (std::optional<int64_t> chunk :
         {std::optional<int64_t>(), std::optional<int64_t>(1), std::optional<int64_t>(4)}) {
      const nn::FunctionalVmapOptions o{.params = params, .args = {x}, .chunk_size = chunk};
      CHECK(same_bytes(nn::functional_vmap(*members[0], o).tensor(), want));
    }
  }
  set_num_threads(before);
}

TEST_CASE("large inputs: the rows split across threads give one thread's bits") {
  manual_seed(3);
  const Tensor x = tricky({300, 257}, 50);
  const Tensor xi = randint(-1000, 1000, {64, 129, 5});
  const int before = configured_threads();
  auto all = [&] {
    return std::vector<Tensor>{cumsum(x, 1),
                               cumsum(x, 0),
                               cumprod(x, 1),
                               sort(x, 1).first,
                               sort(x, 0, true).second,
                               argsort(xi, 1),
                               topk(x, 5, 1).second,
                               topk(x, 200, 0, false).first,
                               cumsum(xi, 1)};
  };
  set_num_threads(1);
  const std::vector<Tensor> one = all();
  set_num_threads(2);
  const std::vector<Tensor> two = all();
  set_num_threads(before);
  for (size_t k = 0; k < one.size(); ++k) {
    CAPTURE(k);
    CHECK(same_bytes(one[k], two[k]));
  }
  // and they are right: each row of sort(x, 1) ascends, NaNs last
  const auto sv = one[3].to_vector<float>();
  int64_t out_of_order = 0;
  for (int64_t r = 0; r < 300; ++r)
    for (int64_t j = 1; j < 257; ++j) {
      const float a = sv[r * 257 + j - 1], b = sv[r * 257 + j];
      out_of_order += std::isnan(b) ? 0 : (std::isnan(a) || a > b);
    }
  CHECK(out_of_order == 0);
}

TEST_CASE("vmap runs each op once over all the sets, not once per set") {
  const Tensor xs = randn({7, 3, 4});
  using F = std::function<Tensor(const Tensor&)>;
  for (const F& f : std::vector<F>{[](const Tensor& t) { return cumsum(t, 0); },
                                   [](const Tensor& t) { return cumprod(t, -1); },
                                   [](const Tensor& t) { return sort(t, 1).second; },
                                   [](const Tensor& t) { return argsort(t, 0); },
                                   [](const Tensor& t) { return topk(t, 2).first; }}) {
    reset_kernel_counts();
    (void)vmap(f)(xs);
    CHECK(kernel_count(KernelKind::Other) == 1);
  }
}
