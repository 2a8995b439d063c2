// scatter, scatter_add and scatter_reduce against PyTorch's values (tests/data/scatter/, written
// by tests/golden/make_scatter_golden.py), by hand where td fixes what torch leaves open (a
// repeated position), their in-place forms, their errors, and under vmap and functional_vmap:
// the loop's bits.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "modules/tensordict.h"
#include "tests/functional_vmap_helpers.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {

TensorDict scatter_golden() {
  static const TensorDict g =
      TensorDict::load_safetensors(std::string(TD_TEST_DATA_DIR) + "/scatter/scatter.safetensors");
  return g;
}

// Same values (NaN matching NaN) within rtol; rtol 0: exactly.
void check_values(const Tensor& got, const Tensor& want, const std::string& what, double rtol = 0) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  CHECK(got.dtype() == want.dtype());
  auto g = got.to(kFloat64).to_vector<double>();
  auto w = want.to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    CAPTURE(i);
    if (std::isnan(w[i]))
      CHECK(std::isnan(g[i]));
    else
      CHECK(std::abs(g[i] - w[i]) <= rtol * std::abs(w[i]) + (rtol > 0 ? 1e-6 : 0));
  }
}

// A case of make_scatter_golden.py: its op, dim and options.
struct Golden {
  std::string op;  // scatter, scatter_add, scatter_reduce
  int64_t dim = 0;
  std::string reduce = "";
  bool include_self = true;
  std::optional<double> value = std::nullopt;  // scatter's value form
};

std::map<std::string, Golden> golden_cases() {
  std::map<std::string, Golden> c;
  c["scatter_dim0"] = {"scatter", 0};
  c["scatter_dim1"] = {"scatter", 1};
  c["scatter_3d_neg"] = {"scatter", -2};
  c["scatter_int64"] = {"scatter", 0};
  c["scatter_bool"] = {"scatter", 1};
  c["scatter_value"] = {"scatter", 1, "", true, 2.5};
  c["scatter_value_int"] = {"scatter", 0, "", true, -2.7};
  c["scatter_0d"] = {"scatter", 0};
  c["scatter_0d_index"] = {"scatter", 0};
  c["scatter_add_dup"] = {"scatter_add", 0};
  c["scatter_add_int64_neg"] = {"scatter_add", -1};
  c["scatter_add_3d"] = {"scatter_add", 2};
  c["scatter_add_0d"] = {"scatter_add", 0};
  c["scatter_add_bool"] = {"scatter_add", 0};
  for (std::string red : {"sum", "prod", "mean", "amax", "amin"})
    for (bool inc : {true, false})
      c["scatter_reduce_" + red + (inc ? "_self" : "_noself")] = {"scatter_reduce", 0, red, inc};
  c["scatter_reduce_mean_int"] = {"scatter_reduce", 1, "mean"};
  c["scatter_reduce_mean_int_neg_self"] = {"scatter_reduce", 0, "mean"};
  c["scatter_reduce_mean_int_neg_noself"] = {"scatter_reduce", 0, "mean", false};
  c["scatter_reduce_amax_nan"] = {"scatter_reduce", 0, "amax"};
  return c;
}

Tensor run_out(const Golden& g, const Tensor& x, const Tensor& i, const Tensor& s) {
  if (g.op == "scatter") return g.value ? scatter(x, g.dim, i, *g.value) : scatter(x, g.dim, i, s);
  if (g.op == "scatter_add") return scatter_add(x, g.dim, i, s);
  return scatter_reduce(x, g.dim, i, s, g.reduce, g.include_self);
}

// The in-place form on a copy of x: returns self, written.
Tensor run_in_place(const Golden& g, const Tensor& x, const Tensor& i, const Tensor& s) {
  Tensor self = x.clone();
  const Tensor* r = nullptr;
  if (g.op == "scatter")
    r = g.value ? &scatter_(self, g.dim, i, *g.value) : &scatter_(self, g.dim, i, s);
  else if (g.op == "scatter_add")
    r = &scatter_add_(self, g.dim, i, s);
  else
    r = &scatter_reduce_(self, g.dim, i, s, g.reduce, g.include_self);
  CHECK(r == &self);
  return self;
}

Tensor i64(std::vector<int64_t> v, Shape s = {}) {
  if (s.empty()) s = {static_cast<int64_t>(v.size())};
  return tensor<int64_t>(v, s);
}

}  // namespace

TEST_CASE("scatter, scatter_add and scatter_reduce against PyTorch, out of and in place") {
  const TensorDict g = scatter_golden();
  int checked = 0;
  for (const auto& [name, c] : golden_cases()) {
    CAPTURE(name);
    REQUIRE(g.contains(name + ".out"));
    const Tensor src = g.contains(name + ".src") ? g.get(name + ".src") : Tensor();
    const Tensor x = g.get(name + ".x");
    const Tensor index = g.get(name + ".index");
    const Tensor want = g.get(name + ".out");
    // float sums in another order than torch's may round differently
    const bool sums = c.op != "scatter";
    const double rtol = !sums ? 0 : want.dtype() == kFloat32 ? 1e-6 : 1e-12;
    check_values(run_out(c, x, index, src), want, name, rtol);
    check_values(run_in_place(c, x, index, src), want, name + " in place", rtol);
    ++checked;
  }
  CHECK(checked == 28);  // every case of make_scatter_golden.py
}

TEST_CASE("scatter: hand values; a repeated position takes the last value in index order") {
  // torch's documented example: dim 0 writes src[i][j] to row index[i][j] of column j
  const Tensor src = arange(1, 11).reshape({2, 5});
  const Tensor idx = i64({0, 1, 2, 0}, {1, 4});
  CHECK(scatter(zeros({3, 5}, kInt64), 0, idx, src).to_vector<int64_t>() ==
        std::vector<int64_t>{1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0});
  // dim 1, index of two rows: row r writes src[r][j] to column index[r][j]
  const Tensor idx2 = i64({0, 1, 2, 0, 3, 1}, {2, 3});
  CHECK(scatter(zeros({2, 4}, kInt64), 1, idx2, src).to_vector<int64_t>() ==
        std::vector<int64_t>{1, 2, 3, 0, 6, 8, 0, 7});
  // repeats: the last in row-major order of index wins, the same every call
  CHECK(
      scatter(zeros({3}), 0, i64({0, 2, 0, 0}), tensor({1.f, 2.f, 3.f, 4.f})).to_vector<float>() ==
      std::vector<float>{4, 0, 2});
  CHECK(scatter(zeros({2, 2}), 0, i64({1, 1, 1, 0}, {2, 2}), tensor({1.f, 2.f, 3.f, 4.f}, {2, 2}))
            .to_vector<float>() == std::vector<float>{0, 4, 3, 2});
  // scatter_add sums the repeats; the value form writes one value
  CHECK(scatter_add(ones({3}), 0, i64({0, 0, 2, 0}), tensor({1.f, 2.f, 4.f, 8.f}))
            .to_vector<float>() == std::vector<float>{12, 1, 5});
  CHECK(scatter(zeros({2, 3}, kInt64), -1, i64({2, 2}, {2, 1}), 7).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 0, 7, 0, 0, 7});
  // a value cast to bool, and a float value truncated into int64, as torch
  CHECK(scatter(zeros({2}, kBool), 0, i64({1}), 2).to_vector<bool>() ==
        std::vector<bool>{false, true});
  CHECK(scatter(zeros({2}, kInt64), 0, i64({0}), 1.9).to_vector<int64_t>() ==
        std::vector<int64_t>{1, 0});
  // x is not touched
  const Tensor x = zeros({3});
  (void)scatter_add(x, 0, i64({1}), ones({1}));
  CHECK(x.to_vector<float>() == std::vector<float>{0, 0, 0});
}

TEST_CASE("scatter: strided operands give the contiguous result; an empty index writes nothing") {
  const Tensor x = arange(12.0).reshape({3, 4});
  const Tensor idx = i64({0, 2, 1, 1, 0, 2}, {2, 3});  // read transposed: [3, 2]
  const Tensor src = arange(100.0, 112.0).reshape({4, 3});
  const Tensor xt = x.t(), it = idx.t(), st = src.t();
  CHECK_FALSE(xt.is_contiguous());
  using Op = Tensor (*)(const Tensor&, int64_t, const Tensor&, const Tensor&);
  for (Op f : {static_cast<Op>(scatter), static_cast<Op>(scatter_add)}) {
    for (int64_t d : {0, 1}) {
      const Tensor got = f(xt, d, it, st);
      const Tensor want = f(xt.contiguous(), d, it.contiguous(), st.contiguous());
      CHECK(same_bytes(got, want));
    }
  }
  // an expanded src reads one value everywhere
  CHECK(
      equal(scatter_add(zeros({2, 3}), 1, i64({0, 0, 1, 1}, {2, 2}), full({}, 2.0).expand({2, 2})),
            tensor({4.f, 0.f, 0.f, 0.f, 4.f, 0.f}, {2, 3})));
  // empty index: x's values, and as torch no shape check
  const Tensor e = scatter(x, 1, zeros({0}, kInt64), zeros({2, 2}));
  CHECK(equal(e, x));
  CHECK_FALSE(e.shares_storage(x));
  CHECK(equal(scatter_add(x, 0, zeros({0, 9}, kInt64), zeros({1, 1})), x));
  // empty x with an empty index
  CHECK(scatter(zeros({0, 3}), 0, zeros({0, 3}, kInt64), zeros({0, 3})).shape() == Shape{0, 3});
}

TEST_CASE("scatter_, scatter_add_, scatter_reduce_ write self, through views, and return it") {
  Tensor x = zeros({2, 3});
  Tensor& r = scatter_(x, 1, i64({2, 0}, {2, 1}), tensor({5.f, 6.f}, {2, 1}));
  CHECK(&r == &x);
  CHECK(x.to_vector<float>() == std::vector<float>{0, 0, 5, 6, 0, 0});
  Tensor& r2 = scatter_add_(x, 0, i64({1, 1, 1}, {1, 3}), ones({1, 3}));
  CHECK(&r2 == &x);
  CHECK(x.to_vector<float>() == std::vector<float>{0, 0, 5, 7, 1, 1});
  Tensor& r3 = scatter_(x, 0, i64({0}, {1, 1}), 9.0);
  CHECK(&r3 == &x);
  CHECK(x.to_vector<float>() == std::vector<float>{9, 0, 5, 7, 1, 1});
  Tensor& r4 = scatter_reduce_(x, 1, i64({0, 0}, {1, 2}), tensor({2.f, 3.f}, {1, 2}), "prod");
  CHECK(&r4 == &x);
  CHECK(x.to_vector<float>() == std::vector<float>{54, 0, 5, 7, 1, 1});
  // the const overload returns the same handle
  const Tensor& c = x;
  CHECK(&scatter_add_(c, 0, i64({0}, {1, 1}), ones({1, 1})) == &c);
  CHECK(x.to_vector<float>()[0] == 55);
  // a strided view: the base sees the writes, at the view's positions
  Tensor base = zeros({3, 4});
  Tensor view = base.t();  // [4, 3]
  scatter_(view, 0, i64({3, 1, 0}, {1, 3}), tensor({1.f, 2.f, 3.f}, {1, 3}));
  CHECK(base.to_vector<float>() == std::vector<float>{0, 0, 0, 1, 0, 2, 0, 0, 3, 0, 0, 0});
  Tensor row = base.select(0, 2);
  scatter_add_(row, 0, i64({1}), tensor({4.f}));
  CHECK(base.to_vector<float>()[9] == 4);
  // a 0-d self
  Tensor s = scalar_tensor(1.0);
  scatter_(s, 0, i64({0, 0}), tensor({2.0, 3.0}));
  CHECK(s.item<float>() == 3.f);
  // include_self false: a written element starts from its first value
  Tensor m = full({3}, 100.0);
  scatter_reduce_(m, 0, i64({0, 0, 2}), tensor({2.0, 4.0, 8.0}), "mean", false);
  CHECK(m.to_vector<float>() == std::vector<float>{3, 100, 8});
}

TEST_CASE("scatter errors name the op, the shapes and the dim") {
  const Tensor x = zeros({3, 4});
  const Tensor idx = i64({0, 1}, {1, 2});
  const Tensor src = ones({2, 3});
  // index dtype, src dtype
  CHECK_THROWS_AS(scatter(x, 0, idx.to(kFloat32), src), TypeError);
  check_throws_naming_op<TypeError>([&] { scatter_add(x, 0, idx.to(kBool), src); }, "scatter_add");
  CHECK_THROWS_AS(scatter(x, 0, idx, src.to(kFloat64)), TypeError);
  check_throws_naming_op<TypeError>([&] { scatter_add(x, 0, idx, src.to(kInt64)); }, "scatter_add");
  // dim out of range
  CHECK_THROWS_AS(scatter(x, 2, idx, src), IndexError);
  check_throws_naming_op<IndexError>([&] { scatter_add(x, -3, idx, src); }, "scatter_add");
  // ranks
  CHECK_THROWS_AS(scatter(x, 0, i64({0}), src), ValueError);
  check_throws_mentioning<ValueError>(
      [&] { scatter(x, 0, idx, ones({6})); },
      "[scatter] index of shape [1, 2] must have as many dims as src");
  check_throws_mentioning<ValueError>(
      [&] {
        scatter(zeros({3}), 0, i64({0}, {1, 1}), ones({1, 1}));
      },
      "as many dims as the input");
  // sizes: index larger than src (any dim), than x (but at dim)
  check_throws_mentioning<ValueError>(
      [&] {
        scatter_add(x, 1, zeros({2, 5}, kInt64), ones({2, 3}));
      },
      "[scatter_add] index of shape [2, 5] is larger than src of shape [2, 3] at dim 1");
  check_throws_mentioning<ValueError>(
      [&] {
        scatter(x, 1, zeros({4, 1}, kInt64), ones({4, 1}));
      },
      "[scatter] index of shape [4, 1] is larger than the input of shape [3, 4] at dim 0");
  CHECK(scatter(x, 1, zeros({3, 6}, kInt64), ones({3, 6})).shape() == Shape{3, 4});  // dim may
  // index values: negative and too large
  check_throws_mentioning<IndexError>(
      [&] {
        scatter(x, 0, i64({-1, 0}, {1, 2}), src);
      },
      "[scatter] index -1 is out of bounds for dim 0 with size 3");
  check_throws_naming_op<IndexError>(
      [&] {
        scatter_add(x, 1, i64({4, 0}, {1, 2}), src);
      },
      "scatter_add");
  check_throws_naming_op<IndexError>(
      [&] {
        scatter_reduce(x, 1, i64({0, 9}, {1, 2}), src, "sum");
      },
      "scatter_reduce");
  // an in-place call that fails on an index writes nothing
  Tensor y = zeros({3});
  CHECK_THROWS_AS(scatter_(y, 0, i64({0, 1, 3}), ones({3})), IndexError);
  CHECK(y.to_vector<float>() == std::vector<float>{0, 0, 0});
  // the value form: a value that does not fit x's dtype
  CHECK_THROWS_AS(scatter(zeros({2}, kInt64), 0, i64({0}), std::nan("")), RuntimeError);
  check_throws_naming_op<RuntimeError>([&] { scatter(zeros({2}), 0, i64({0}), 1e300); }, "scatter");
  // scatter_reduce: the reduction's name, mean of bools
  check_throws_mentioning<ValueError>([&] { scatter_reduce(x, 0, idx, src, "max"); },
                                      "[scatter_reduce] reduce must be");
  check_throws_naming_op<ValueError>([&] { scatter_reduce_(y, 0, i64({0}), ones({1}), "add"); },
                                     "scatter_reduce_");
  check_throws_naming_op<TypeError>(
      [&] { scatter_reduce(zeros({2}, kBool), 0, i64({0}), ones({1}, kBool), "mean"); },
      "scatter_reduce");
  // in place: an expanded self, src or index sharing self's memory (even self itself)
  Tensor ex = zeros({3}).expand({2, 3});
  CHECK_THROWS_AS(scatter_(ex, 1, i64({0}, {1, 1}), ones({1, 1})), ExpandedWriteError);
  Tensor z = zeros({4});
  check_throws_naming_op<RuntimeError>(
      [&] {
        scatter_(z, 0, i64({0, 1}), z.narrow(0, 1, 2));
      },
      "scatter_");
  CHECK_THROWS_AS(scatter_add_(z, 0, i64({0, 1, 2, 3}), z), RuntimeError);
  // interleaved views (not dense) pass, as in torch, and read src as it was
  Tensor w = arange(6.0).reshape({3, 2});
  scatter_(w.select(1, 0), 0, i64({1, 2}), w.select(1, 1).narrow(0, 0, 2));
  CHECK(w.to_vector<float>() == std::vector<float>{0, 1, 1, 3, 3, 5});
  // an index sharing the memory of a non-dense self passes too, and is read before the
  // writes: [2, 1] into self [2, 0, 1] (the first write changes the index's second value)
  Tensor q = tensor<int64_t>({2, 9, 0, 2, 1, 9}, {6});
  scatter_(q.slice(0, 0, 6, 2), 0, q.narrow(0, 3, 2), tensor<int64_t>({0, 7}));
  CHECK(q.to_vector<int64_t>() == std::vector<int64_t>{2, 9, 7, 2, 0, 9});
  Tensor zi = zeros({4}, kInt64);
  CHECK_THROWS_AS(scatter_(zi, 0, zi, ones({4}, kInt64)), RuntimeError);
  // undefined operands
  CHECK_THROWS_AS(scatter(Tensor(), 0, idx, src), RuntimeError);
  CHECK_THROWS_AS(scatter_add(x, 0, Tensor(), src), RuntimeError);
}

namespace {

Tensor stack_loop(int64_t n, const std::function<Tensor(int64_t)>& f) {
  std::vector<Tensor> out;
  for (int64_t b = 0; b < n; ++b) out.push_back(f(b));
  return stack(out, 0);
}

using Fn3 = std::function<Tensor(Tensor, Tensor, Tensor)>;

// vmap(f) over x, index, src with the given in_dims (nullopt: shared, the set-0 slice) gives
// the loop's bits.
void check_vmap(const std::string& what, const Fn3& f, const Tensor& xs, const Tensor& is,
                const Tensor& ss, std::vector<std::optional<int64_t>> dims) {
  CAPTURE(what);
  const int64_t n = xs.size(0);
  const Tensor args[] = {xs, is, ss};
  Tensor in[3];
  for (int k = 0; k < 3; ++k) in[k] = dims[k] ? args[k] : args[k].select(0, 0);
  for (std::optional<int64_t> chunk : {std::optional<int64_t>(), std::optional<int64_t>(3)}) {
    const Tensor got =
        vmap([&](Tensor a, Tensor b, Tensor c) { return f(a, b, c); },
             {.in_dims = {dims[0], dims[1], dims[2]}, .chunk_size = chunk})(in[0], in[1], in[2]);
    const Tensor want = stack_loop(n, [&](int64_t b) {
      return f(dims[0] ? xs.select(0, b) : in[0], dims[1] ? is.select(0, b) : in[1],
               dims[2] ? ss.select(0, b) : in[2]);
    });
    CHECK(same_bytes(got, want));
  }
}

}  // namespace

TEST_CASE("scatter under vmap: each side batched or shared, every form, the loop's bits") {
  constexpr int64_t B = 5;
  const Tensor xs = randn({B, 3, 4});
  const Tensor is = randint(0, 3, {B, 3, 4});  // repeats: order matters
  const Tensor ss = randn({B, 7, 5});
  const std::vector<std::vector<std::optional<int64_t>>> placements = {
      {0, std::nullopt, std::nullopt},
      {std::nullopt, 0, std::nullopt},
      {std::nullopt, std::nullopt, 0},
      {0, 0, 0},
      {0, 0, std::nullopt}};
  const std::map<std::string, Fn3> fns = {
      {"scatter", [](Tensor x, Tensor i, Tensor s) { return scatter(x, 0, i, s); }},
      {"scatter_neg", [](Tensor x, Tensor i, Tensor s) { return scatter(x, -1, i, s); }},
      {"scatter_value", [](Tensor x, Tensor i, Tensor) { return scatter(x, 0, i, -3.5); }},
      {"scatter_add", [](Tensor x, Tensor i, Tensor s) { return scatter_add(x, -2, i, s); }},
      {"scatter_reduce_mean",
       [](Tensor x, Tensor i, Tensor s) { return scatter_reduce(x, 0, i, s, "mean", false); }},
      {"scatter_reduce_amax",
       [](Tensor x, Tensor i, Tensor s) { return scatter_reduce(x, 0, i, s, "amax"); }},
      // dim 1 of a transposed view: index [4, 3] along x's [4, 3]
      {"scatter_add_t",
       [](Tensor x, Tensor i, Tensor s) { return scatter_add(x.t(), 1, i.t(), s.t()); }},
  };
  for (const auto& [name, f] : fns)
    for (const auto& p : placements)
      if (name != "scatter_value" || p[0] || p[1]) check_vmap(name, f, xs, is, ss, p);
  // in place: self batched (a batched x's copy), index or src batched or shared
  const std::map<std::string, Fn3> in_place = {
      {"scatter_",
       [](Tensor x, Tensor i, Tensor s) {
         Tensor y = mul(x, 2.0);
         CHECK(&scatter_(y, 0, i, s) == &y);
         return y;
       }},
      {"scatter_value_",
       [](Tensor x, Tensor i, Tensor) {
         Tensor y = mul(x, 2.0);
         scatter_(y, -2, i, 7.0);
         return y;
       }},
      {"scatter_add_",
       [](Tensor x, Tensor i, Tensor s) {
         Tensor y = x.t().clone().t();  // self strided, batch dim not first physically
         scatter_add_(y, 0, i, s);
         return y;
       }},
      {"scatter_reduce_",
       [](Tensor x, Tensor i, Tensor s) {
         Tensor y = x.clone();
         scatter_reduce_(y, 0, i, s, "prod", false);
         return y;
       }},
  };
  for (const auto& [name, f] : in_place)
    for (const auto& p : placements)
      if (p[0]) check_vmap(name, f, xs, is, ss, p);
  // an unbatched self cannot take batched values
  check_throws_naming_op<RuntimeError>(
      [&] {
        vmap([](Tensor i, Tensor s) {
          Tensor y = zeros({3, 4});
          return scatter_add_(y, 0, i, s);
        })(is, ss);
      },
      "scatter_add_");
  // per-set 0-d sides, as 1-D of size 1
  const Tensor x0 = randn({B});
  const Tensor i1 = zeros({B, 2}, kInt64);
  const Tensor s1 = randn({B, 2});
  const Fn3 f0 = [](Tensor x, Tensor i, Tensor s) { return scatter_add(x, 0, i, s); };
  check_vmap("0-d x", f0, x0, i1, s1, {0, 0, 0});
  check_vmap("0-d x shared index", f0, x0, i1, s1, {0, std::nullopt, 0});
  const Tensor i0 = remainder(arange(B), 3);
  check_vmap("0-d index and src", f0, randn({B, 3}), i0, randn({B}), {0, 0, 0});
  check_vmap("0-d index, shared x", f0, randn({B, 3}), i0, randn({B}), {std::nullopt, 0, 0});
  const Fn3 f0_ = [](Tensor x, Tensor i, Tensor s) {
    Tensor y = x.clone();
    scatter_(y, 0, i, s);
    return y;
  };
  check_vmap("0-d self in place", f0_, x0, i1, s1, {0, 0, std::nullopt});
  // an empty per-set index writes nothing and checks no shape, as a call per set
  check_vmap("empty index", [](Tensor x, Tensor i, Tensor s) { return scatter(x, 1, i, s); }, xs,
             zeros({B, 0}, kInt64), randn({B, 2}), {0, 0, 0});
}

TEST_CASE("scatter under vmap: a set's bad argument raises its own error") {
  const Tensor xs = zeros({3, 4});
  Tensor is = zeros({3, 2}, kInt64);
  fill_(is.select(0, 2), 4);  // set 2 points past its 4 elements
  check_throws_mentioning<IndexError>(
      [&] { vmap([](Tensor x, Tensor i) { return scatter(x, 0, i, 1.0); })(xs, is); },
      "[scatter] index 4 is out of bounds for dim 0 with size 4");
  Tensor self = zeros({3, 4});
  check_throws_mentioning<IndexError>(
      [&] { vmap([](Tensor x, Tensor i) { return scatter_add_(x, 0, i, ones({2})); })(self, is); },
      "[scatter_add_] index 4 is out of bounds for dim 0 with size 4");
  CHECK(equal(self, zeros({3, 4})));  // no set written
  check_throws_mentioning<ValueError>(
      [&] {
        vmap([](Tensor x, Tensor i) { return scatter_add(x, 0, i, ones({1})); })(
            xs, zeros({3, 2}, kInt64));
      },
      "[scatter_add] index of per-set shape [2] is larger than src of per-set shape [1] at dim 0");
  check_throws_mentioning<ValueError>(
      [&] {
        vmap([](Tensor x, Tensor i) { return scatter_(x, 0, i, ones({1})); })(
            xs, zeros({3, 2}, kInt64));
      },
      "[scatter_] index of per-set shape [2] is larger than src of per-set shape [1] at dim 0");
}

namespace {

// forward(input, index): a small Linear's output summed into three rows by index, then some of
// its columns overwritten in place
struct ScatterNet : nn::Module {
  std::shared_ptr<nn::Linear> net;
  ScatterNet() : net(std::make_shared<nn::Linear>(5, 6)) {
    register_module("net", net);
    register_method("forward", &ScatterNet::forward, {"input", "index"});
  }
  Tensor forward(const Tensor& input, const Tensor& index) {
    const Tensor h = (*net)({input}).tensor();  // [n, 6]
    Tensor y = scatter_add(zeros({3, 6}), 0, index, h);
    scatter_(y, 1, index.narrow(0, 0, 3), -1.0);
    return scatter_reduce(y, 0, index, h, "amax");
  }
};

}  // namespace

TEST_CASE("scatter under functional_vmap: the loop's values, the same bits in every chunking") {
  const int64_t sets = 4, n = 7;
  const Tensor x = randn({n, 5});
  const Tensor idx = remainder(arange(n * 6), 3).reshape({n, 6});
  const Tensor idx_sets = randint(0, 3, {sets, n, 6});
  auto m = std::make_shared<ScatterNet>();
  auto members = ensemble(sets, [] { return std::make_shared<ScatterNet>(); });
  const TensorDict params = TensorDict::from_modules(members);
  const nn::FunctionalVmapOptions shared{.params = params,
                                         .kwargs = {{"input", x}, {"index", idx}}};
  const nn::FunctionalVmapOptions per_set{
      .params = params, .kwargs = {{"input", x}, {"index", idx_sets}}, .in_dims = {{"index", 0}}};
  for (const auto& o : {shared, per_set}) {
    const Tensor whole = nn::functional_vmap(*m, o).tensor();
    CHECK(whole.shape() == Shape{sets, 3, 6});
    CHECK(close(whole, loop_reference(*m, params, o.args, o.kwargs, o.in_dims)));
    check_same_bits_chunked_and_looped(*m, o, whole, {1, 3});
  }
}
