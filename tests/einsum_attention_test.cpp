// einsum and scaled_dot_product_attention against PyTorch (tests/data/einsum/, written by
// tests/golden/make_einsum_attention_golden.py) and hand values, their errors, and both under vmap
// and functional_vmap: the per-set loop's values (its bits where every operand is per set), without
// the fallback loop.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
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

TensorDict golden() {
  static const TensorDict g = TensorDict::load_safetensors(std::string(TD_TEST_DATA_DIR) +
                                                           "/einsum/einsum_attention.safetensors");
  return g;
}

// |got - want| <= rtol * |want| + atol with the same shape and dtype; NaN matches NaN.
void check_values(const Tensor& got, const Tensor& want, const std::string& what,
                  double rtol = 1e-5, double atol = 1e-5) {
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
      CHECK(std::abs(g[i] - w[i]) <= rtol * std::abs(w[i]) + atol);
  }
}

std::string text_of(const Tensor& codes) {
  std::string s;
  for (int64_t c : codes.to_vector<int64_t>()) s.push_back(static_cast<char>(c));
  return s;
}

// The fallback's runs over every built-in op, to show a vmapped call took none.
int64_t fallbacks() {
  int64_t n = 0;
  for (int op = 0; op < static_cast<int>(OpId::kNumBuiltin); ++op)
    n += fallback_count(static_cast<OpId>(op));
  return n;
}

// Runs f with the per-set fallback off (an op without a rule raises), and checks it ran no
// fallback either way.
template <class F>
auto without_fallback(F f) {
  const int64_t before = fallbacks();
  set_vmap_fallback_enabled(false);
  struct Restore {
    ~Restore() { set_vmap_fallback_enabled(true); }
  } restore;
  auto out = f();
  CHECK(fallbacks() == before);
  return out;
}

Tensor sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& m = {},
            double p = 0.0, bool causal = false, std::optional<double> scale = {}) {
  return scaled_dot_product_attention(q, k, v, m, p, causal, scale);
}

}  // namespace

TEST_CASE("einsum against torch.einsum") {
  const TensorDict g = golden();
  int checked = 0;
  for (const std::string& key : g.keys(true, true)) {
    const std::string tail = ".equation";
    if (key.rfind("einsum.", 0) != 0 || !key.ends_with(tail)) continue;
    const std::string p = key.substr(0, key.size() - tail.size());
    const std::string eq = text_of(g.get(key));
    std::vector<Tensor> ops;
    for (int i = 0; g.contains(p + ".in" + std::to_string(i)); ++i)
      ops.push_back(g.get(p + ".in" + std::to_string(i)));
    CAPTURE(eq);
    check_values(einsum(eq, ops), g.get(p + ".out"), p);
    ++checked;
  }
  CHECK(checked == 91);  // every case of make_einsum_attention_golden.py, 40 of them random
}

TEST_CASE("einsum: hand values, overloads and views") {
  const Tensor a = arange(9).to(kFloat32).reshape({3, 3});  // 0..8
  CHECK(einsum("ii->", {a}).item<float>() == 12.f);         // 0 + 4 + 8
  CHECK(einsum("ii", a).item<float>() == 12.f);
  CHECK(einsum("ii->i", a).to_vector<float>() == std::vector<float>{0, 4, 8});
  CHECK(einsum("ij->", a).item<float>() == 36.f);
  CHECK(einsum("ij->j", a).to_vector<float>() == std::vector<float>{9, 12, 15});
  CHECK(einsum("ij->ji", a).to_vector<float>() == std::vector<float>{0, 3, 6, 1, 4, 7, 2, 5, 8});
  // a transpose is a view of the operand, as torch's
  CHECK(einsum("ij->ji", a).shares_storage(a));
  const Tensor x = tensor({1.f, 2.f, 3.f}), y = tensor({4.f, 5.f});
  CHECK(einsum("i,i->", x, x).item<float>() == 14.f);
  CHECK(einsum("i,j->ij", x, y).to_vector<float>() == std::vector<float>{4, 5, 8, 10, 12, 15});
  CHECK(einsum("i,j", x, y).shape() == Shape{3, 2});
  CHECK(einsum("j,i", y, x).shape() == Shape{3, 2});  // implicit output sorted: ij
  // [[1, 2], [3, 4]] @ [[5, 6], [7, 8]]
  const Tensor m = tensor({1.f, 2.f, 3.f, 4.f}, {2, 2}), n = tensor({5.f, 6.f, 7.f, 8.f}, {2, 2});
  CHECK(einsum("ij,jk->ik", m, n).to_vector<float>() == std::vector<float>{19, 22, 43, 50});
  CHECK(einsum("ij,jk->ki", m, n).to_vector<float>() == std::vector<float>{19, 43, 22, 50});
  CHECK(einsum("ij,ij->i", m, n).to_vector<float>() == std::vector<float>{17, 53});
  // a std::vector of operands, and a span
  const std::vector<Tensor> ops{m, n};
  CHECK(equal(einsum("ij,jk", ops), einsum("ij,jk->ik", m, n)));
  CHECK(equal(einsum("ij,jk", std::span<const Tensor>(ops)), einsum("ij,jk->ik", m, n)));
  // size-1 broadcasting of a letter: j of size 1 in the first operand
  const Tensor col = tensor({2.f, 3.f}, {2, 1});
  CHECK(einsum("ij,jk->ik", col, n).to_vector<float>() == std::vector<float>{24, 28, 36, 42});
  // three operands: x^T M y = [4, 6] . [1, 2]
  CHECK(einsum("i,ij,j->", tensor({1.f, 1.f}), m, tensor({1.f, 2.f})).item<float>() == 16.f);
  // integers stay integers
  const Tensor im = arange(4).reshape({2, 2});
  CHECK(einsum("ij,jk->ik", im, im).dtype() == kInt64);
  CHECK(einsum("ij,jk->ik", im, im).to_vector<int64_t>() == std::vector<int64_t>{2, 3, 6, 11});
  // float32 with float64 computes in float64
  CHECK(einsum("i,i->i", x, x.to(kFloat64)).dtype() == kFloat64);
  // empty inner dim: zeros
  CHECK(einsum("ij,jk->ik", zeros({2, 0}), zeros({0, 3})).to_vector<float>() ==
        std::vector<float>(6, 0.f));
  // 0-d operands
  CHECK(einsum(",->", scalar_tensor(3.0), scalar_tensor(4.0)).item<float>() == 12.f);
  CHECK(einsum("->", scalar_tensor(3.0)).item<float>() == 3.f);
}

TEST_CASE("einsum errors name einsum, the equation and the shapes") {
  const Tensor a = randn({2, 3}), b = randn({3, 4}), sq = randn({3, 3});
  auto msg = [](const std::function<void()>& f) { return message_of(f); };
  auto value_error = [&](const std::function<void()>& f, const std::string& part) {
    CHECK_THROWS_AS(f(), ValueError);
    const std::string m = msg(f);
    CHECK_MESSAGE(m.rfind("[einsum]", 0) == 0, m);
    CHECK_MESSAGE(has(m, part), m);
  };
  // operand count
  value_error([&] { einsum("ij,jk->ik", a); }, "'ij,jk->ik'");
  value_error([&] { einsum("ij,jk->ik", a); }, "[2, 3]");
  value_error([&] { einsum("ij->ij", a, b); }, "[3, 4]");
  value_error([&] { einsum("ij", std::span<const Tensor>()); }, "at least one operand");
  value_error([&] { einsum("ij", Tensor()); }, "undefined");
  // subscripts against dims
  value_error([&] { einsum("ijk", a); }, "number of subscripts");
  value_error([&] { einsum("i", a); }, "number of subscripts");
  value_error([&] { einsum("...ijk", a); }, "more than the number of dims");
  value_error([&] { einsum("->", a); }, "number of subscripts");
  // sizes
  value_error([&] { einsum("ij,jk", a, a); }, "subscript j has size");
  value_error([&] { einsum("ii", a); }, "repeated");
  value_error([&] { einsum("...i,...i", randn({2, 3}), randn({3, 3})); }, "'...'");
  // characters
  value_error([&] { einsum("i1", a); }, "invalid subscript '1'");
  value_error([&] { einsum("i-j", a); }, "invalid subscript '-'");
  value_error([&] { einsum("i>j", a); }, "invalid subscript '>'");
  value_error([&] { einsum("ij->i,j", a); }, "','");
  value_error([&] { einsum("ij->j->i", a); }, "'-'");
  value_error([&] { einsum(std::string("i\0j", 3), a); }, "invalid subscript");
  // the output
  value_error([&] { einsum("ij->k", a); }, "output subscript k does not appear");
  value_error([&] { einsum("ij->ii", a); }, "appears more than once");
  value_error([&] { einsum("ij->iji", a); }, "appears more than once");
  // ellipsis misuse
  value_error([&] { einsum("i..j", a); }, "not part of an ellipsis");
  value_error([&] { einsum("i.j", a); }, "not part of an ellipsis");
  value_error([&] { einsum("....i", a); }, "already");
  value_error([&] { einsum("...i...", a); }, "already");
  value_error([&] { einsum("...ij->......", a); }, "already");
  value_error([&] { einsum("ij->..", a); }, "not part of an ellipsis");
  // dtypes
  CHECK_THROWS_AS(einsum("ij->ji", ones({2, 2}, kBool)), TypeError);
  CHECK_THROWS_AS(einsum("ij,jk", a, ones({3, 2}, kInt64)), TypeError);
  CHECK(has(msg([&] { einsum("ij,jk", a, ones({3, 2}, kInt64)); }), "[einsum]"));
  CHECK(has(msg([&] { einsum("ij,jk", a, ones({3, 2}, kInt64)); }), "[3, 2]"));
  // under vmap the shapes are the per-set ones
  value_error(
      [&] {
        vmap([](Tensor x, Tensor y) { return einsum("ij,jk", x, y); })(randn({4, 2, 3}),
                                                                       randn({4, 2, 3}));
      },
      "[2, 3]");
}

TEST_CASE("scaled_dot_product_attention against PyTorch's math") {
  const TensorDict g = golden();
  int checked = 0;
  for (const std::string& key : g.keys(true, true)) {
    if (key.rfind("sdpa.", 0) != 0 || !key.ends_with(".out")) continue;
    const std::string p = key.substr(0, key.size() - 4);
    std::optional<Tensor> mask;
    if (g.contains(p + ".mask")) mask = g.get(p + ".mask");
    std::optional<double> scale;
    if (g.contains(p + ".scale")) scale = g.get(p + ".scale").item<double>();
    const bool causal = g.get(p + ".causal").item<bool>();
    const Tensor got =
        sdpa(g.get(p + ".q"), g.get(p + ".k"), g.get(p + ".v"), mask, 0.0, causal, scale);
    check_values(got, g.get(key), p, 1e-5, 1e-6);
    ++checked;
  }
  CHECK(checked == 14);  // every case of make_einsum_attention_golden.py
}

TEST_CASE("scaled_dot_product_attention: hand values, masks, NaN rows and dropout") {
  // one query, two keys with scores 0 and 2 (scale 1): weights 1 / (1 + e^2), e^2 / (1 + e^2)
  const Tensor q = tensor({1.f, 0.f}, {1, 2}), k = tensor({0.f, 1.f, 2.f, 0.f}, {2, 2});
  const Tensor v = tensor({10.f, 20.f}, {2, 1});
  const double e2 = std::exp(2.0), w1 = e2 / (1 + e2);
  CHECK(sdpa(q, k, v, {}, 0.0, false, 1.0).item<float>() ==
        doctest::Approx(10 * (1 - w1) + 20 * w1).epsilon(1e-6));
  // default scale 1 / sqrt(2)
  const double s = 2 / std::sqrt(2.0), ws = std::exp(s) / (1 + std::exp(s));
  CHECK(sdpa(q, k, v).item<float>() == doctest::Approx(10 * (1 - ws) + 20 * ws).epsilon(1e-6));
  // a bool mask keeps where true; a float mask is added
  CHECK(sdpa(q, k, v, tensor<bool>({true, false}, {1, 2})).item<float>() == 10.f);
  CHECK(sdpa(q, k, v, tensor<bool>({false, true})).item<float>() == 20.f);
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(sdpa(q, k, v, tensor({0.f, -inf})).item<float>() == 10.f);
  // scores -2 and 2, then equal scores
  const double w4 = std::exp(4.0) / (1 + std::exp(4.0));
  CHECK(sdpa(q, k, v, tensor({-2.f, 0.f}), 0.0, false, 1.0).item<float>() ==
        doctest::Approx(10 * (1 - w4) + 20 * w4).epsilon(1e-6));
  CHECK(sdpa(q, k, v, tensor({2.f, 0.f}), 0.0, false, 1.0).item<float>() ==
        doctest::Approx(15.f).epsilon(1e-6));
  // causal, top-left aligned: query 0 sees key 0 only, query 1 keys 0 and 1
  const Tensor vv = tensor({1.f, 2.f, 3.f}, {3, 1});
  const Tensor c = sdpa(zeros({2, 4}), zeros({3, 4}), vv, {}, 0.0, true);
  CHECK(c.to_vector<float>() == std::vector<float>{1.f, 1.5f});
  // a query with every key masked: NaN, as torch's math path
  const Tensor nan_row =
      sdpa(zeros({2, 4}), zeros({3, 4}), vv, tensor<bool>({1, 1, 0, 0, 0, 0}, {2, 3}));
  CHECK(nan_row.to_vector<float>()[0] == 1.5f);
  CHECK(std::isnan(nan_row.to_vector<float>()[1]));
  // an empty optional and an absent mask are the same
  const Tensor qq = randn({3, 4}), kk = randn({5, 4}), vq = randn({5, 2});
  CHECK(equal(sdpa(qq, kk, vq, std::nullopt), sdpa(qq, kk, vq)));

  // dropout: p = 0 draws nothing; p = 1 zeroes the weights; otherwise each weight is dropped or
  // scaled by 1 / (1 - p): with v the identity the output is the weights
  manual_seed(3);
  sdpa(qq, kk, vq);
  const Tensor after = rand({4});
  manual_seed(3);
  CHECK(equal(rand({4}), after));
  CHECK(sdpa(qq, kk, vq, {}, 1.0).to_vector<float>() == std::vector<float>(6, 0.f));
  const Tensor eye = where(eq(arange(5).unsqueeze(1), arange(5).unsqueeze(0)), 1.0, 0.0);
  const Tensor weights = sdpa(qq, kk, eye);
  manual_seed(21);
  const Tensor dropped = sdpa(qq, kk, eye, {}, 0.5);
  const auto wv = weights.to_vector<float>(), dv = dropped.to_vector<float>();
  int zeros_seen = 0;
  for (size_t i = 0; i < wv.size(); ++i) {
    CHECK((dv[i] == 0.f || dv[i] == doctest::Approx(2 * wv[i]).epsilon(1e-5)));
    zeros_seen += dv[i] == 0.f;
  }
  CHECK(zeros_seen > 0);
  CHECK(zeros_seen < 15);
  // the same draws as dropout on the weights
  manual_seed(21);
  const Tensor manual = matmul(dropout(weights, 0.5), eye);
  CHECK(allclose(dropped, manual, 1e-6, 1e-7));
  // float64 in, float64 out
  CHECK(sdpa(qq.to(kFloat64), kk.to(kFloat64), vq.to(kFloat64)).dtype() == kFloat64);
}

TEST_CASE("scaled_dot_product_attention errors name the op and the shapes") {
  const Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 6});
  auto check = [](auto f, const std::string& part) {
    const std::string m = message_of(f);
    CHECK_MESSAGE(m.rfind("[scaled_dot_product_attention]", 0) == 0, m);
    CHECK_MESSAGE(has(m, part), m);
  };
  auto value_error = [&](const std::function<void()>& f, const std::string& part) {
    CHECK_THROWS_AS(f(), ValueError);
    check(f, part);
  };
  auto type_error = [&](const std::function<void()>& f, const std::string& part) {
    CHECK_THROWS_AS(f(), TypeError);
    check(f, part);
  };
  value_error([&] { sdpa(randn({4}), k, v); }, "[4]");
  value_error([&] { sdpa(q, randn({2, 5, 3}), v); }, "[2, 5, 3]");
  value_error([&] { sdpa(q, k, randn({2, 4, 6})); }, "[2, 4, 6]");
  value_error([&] { sdpa(randn({3, 3, 4}), k, v); }, "do not broadcast");
  value_error([&] { sdpa(q, k, v, tensor<bool>({1, 0, 1, 0, 1}), 0.0, true); }, "is_causal");
  value_error([&] { sdpa(q, k, v, ones({3, 4}, kBool)); }, "[3, 4]");
  value_error([&] { sdpa(q, k, v, ones({4, 2, 3, 5}, kBool)); }, "[4, 2, 3, 5]");
  value_error([&] { sdpa(q, k, v, Tensor()); }, "undefined");
  value_error([&] { sdpa(Tensor(), k, v); }, "undefined");
  value_error([&] { sdpa(q, k, v, {}, 1.5); }, "dropout_p");
  value_error([&] { sdpa(q, k, v, {}, -0.1); }, "dropout_p");
  value_error([&] { sdpa(q, k, v, {}, std::nan("")); }, "dropout_p");
  type_error([&] { sdpa(q.to(kInt64), k.to(kInt64), v.to(kInt64)); }, "int64");
  type_error([&] { sdpa(q, k.to(kFloat64), v); }, "float64");
  type_error([&] { sdpa(q, k, v, ones({3, 5}, kInt64)); }, "attn_mask");
}

TEST_CASE("einsum under vmap: the loop's values, batched natively") {
  struct Case {
    std::string eq;
    std::vector<Shape> shapes;
  };
  const std::vector<Case> cases = {
      {"ij,jk->ik", {{3, 4}, {4, 5}}},
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
      {"bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}},
      {"i,i->", {{6}, {6}}},
      {"bi,bi->b", {{3, 4}, {3, 4}}},
      {"i,j->ij", {{3}, {4}}},
      {"...ij,...jk->...ik", {{2, 3, 4}, {4, 2}}},
      {"ii->i", {{3, 3}}},
      {"ij->ji", {{3, 4}}},
      {"ij->", {{3, 4}}},
      {"iij,jk", {{3, 3, 2}, {2, 4}}},
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}},
  };
  constexpr int64_t B = 3;
  manual_seed(4);
  for (const Case& c : cases) {
    CAPTURE(c.eq);
    const size_t n = c.shapes.size();
    // each operand batched at dim 0 or shared, in every combination but all shared
    for (unsigned pattern = 1; pattern < (1u << n); ++pattern) {
      CAPTURE(pattern);
      std::vector<Tensor> args;
      DimsList in_dims;
      for (size_t i = 0; i < n; ++i) {
        const bool batched = (pattern >> i) & 1;
        Shape s = c.shapes[i];
        if (batched) s.insert(s.begin(), B);
        args.push_back(randn(s));
        in_dims.push_back(batched ? Dims(0) : Dims(std::nullopt));
      }
      std::vector<Tensor> loop;
      for (int64_t b = 0; b < B; ++b) {
        std::vector<Tensor> set;
        for (size_t i = 0; i < n; ++i) set.push_back(((pattern >> i) & 1) ? args[i][b] : args[i]);
        loop.push_back(einsum(c.eq, set));
      }
      const Tensor want = stack(loop);
      const Tensor got = without_fallback([&] {
        return vmap_call(
                   [&](const ValueList& l) {
                     std::vector<Tensor> ops;
                     for (const Value& x : l) ops.push_back(x.tensor());
                     return Value(einsum(c.eq, ops));
                   },
                   [&] {
                     ValueList l;
                     for (const Tensor& t : args) l.push_back(Value(t));
                     return l;
                   }(),
                   {.in_dims = in_dims})
            .tensor();
      });
      REQUIRE(got.shape() == want.shape());
      // per-set operands only: the loop's bits; a shared operand may be folded into the rows of
      // one product, whose last bits may differ (README)
      if (pattern + 1 == (1u << n))
        CHECK(same_bytes(got, want));
      else
        CHECK(allclose(got, want, 1e-6, 1e-6));
    }
  }
  // the sets at another dim, nested vmaps
  const Tensor a = randn({4, 5, 3}), w = randn({3, 2});
  const Tensor got = without_fallback([&] {
    return vmap([&](Tensor x) { return einsum("ij,jk->ik", x, w); }, {.in_dims = {1}})(a);
  });
  for (int64_t s = 0; s < 5; ++s)
    CHECK(allclose(got[s], einsum("ij,jk->ik", a.select(1, s), w), 1e-6, 1e-6));
  const Tensor xs = randn({2, 3, 4}), ys = randn({3, 4});
  const Tensor nested = without_fallback([&] {
    return vmap(
        [](Tensor x, Tensor y) {
          return vmap([](Tensor xi, Tensor yi) { return einsum("i,i->", xi, yi); })(x, y);
        },
        {.in_dims = {0, std::nullopt}})(xs, ys);
  });
  REQUIRE(nested.shape() == Shape{2, 3});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      CHECK(nested[i][j].item<float>() ==
            doctest::Approx(einsum("i,i->", xs[i][j], ys[j]).item<float>()).epsilon(1e-6));
}

TEST_CASE("scaled_dot_product_attention under vmap: the loop's values, batched natively") {
  constexpr int64_t B = 3, H = 2, L = 4, S = 5, E = 8, Ev = 3;
  manual_seed(6);
  const Tensor q = randn({H, L, E}), k = randn({H, S, E}), v = randn({H, S, Ev});
  const Tensor qs = randn({B, H, L, E}), ks = randn({B, H, S, E}), vs = randn({B, H, S, Ev});
  const Tensor mask = gt(rand({L, S}), 0.3), masks = gt(rand({B, H, L, S}), 0.3);
  const Tensor fmask = randn({L, S}), fmasks = randn({B, 1, L, S});
  struct Case {
    std::string name;
    Tensor q, k, v;
    std::optional<Tensor> m;
    bool causal;
  };
  const std::vector<Case> cases = {
      {"q batched", qs, k, v, std::nullopt, false},
      {"k and v batched", q, ks, vs, std::nullopt, false},
      {"all batched", qs, ks, vs, std::nullopt, false},
      {"all batched, causal", qs, ks, vs, std::nullopt, true},
      {"q batched, causal", qs, k, v, std::nullopt, true},
      {"shared bool mask", qs, ks, vs, mask, false},
      {"batched bool mask", q, k, v, masks, false},
      {"batched bool mask, q batched", qs, k, v, masks, false},
      {"shared float mask", q, ks, vs, fmask, false},
      {"batched float mask", qs, ks, vs, fmasks, false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    auto dim = [](const Tensor& t, int64_t per_set_dims) {
      return t.dim() > per_set_dims ? Dims(0) : Dims(std::nullopt);
    };
    const bool mask_batched = c.m && c.m->dim() == 4;
    std::vector<Tensor> loop;
    for (int64_t b = 0; b < B; ++b) {
      auto pick = [&](const Tensor& t, int64_t per_set_dims) {
        return t.dim() > per_set_dims ? t[b] : t;
      };
      std::optional<Tensor> m = c.m;
      if (mask_batched) m = (*c.m)[b];
      loop.push_back(sdpa(pick(c.q, 3), pick(c.k, 3), pick(c.v, 3), m, 0.0, c.causal));
    }
    const Tensor want = stack(loop);
    const Tensor mask_arg = c.m ? *c.m : zeros({});
    const Tensor got = without_fallback([&] {
      return vmap(
          [&](Tensor qq, Tensor kk, Tensor vv, Tensor mm) {
            return sdpa(qq, kk, vv, c.m ? std::optional<Tensor>(mm) : std::nullopt, 0.0, c.causal);
          },
          {.in_dims = {dim(c.q, 3), dim(c.k, 3), dim(c.v, 3),
                       mask_batched ? Dims(0) : Dims(std::nullopt)}})(c.q, c.k, c.v, mask_arg);
    });
    REQUIRE(got.shape() == want.shape());
    if (c.q.dim() == 4 && c.k.dim() == 4 && c.v.dim() == 4)
      CHECK(same_bytes(got, want));
    else
      CHECK(allclose(got, want, 1e-6, 1e-6));
  }
  // dropout: the randomness modes apply (Error raises, Different draws per set, the same with
  // any chunk size)
  auto drop = [&](Randomness r, std::optional<int64_t> chunk) {
    return vmap([](Tensor qq, Tensor kk, Tensor vv) { return sdpa(qq, kk, vv, {}, 0.5); },
                {.randomness = r, .chunk_size = chunk})(qs, ks, vs);
  };
  CHECK_THROWS_AS(drop(Randomness::Error, std::nullopt), RuntimeError);
  manual_seed(2);
  const Tensor d1 = without_fallback([&] { return drop(Randomness::Different, std::nullopt); });
  manual_seed(2);
  const Tensor d2 = drop(Randomness::Different, 1);
  CHECK(equal(d1, d2));
  manual_seed(2);
  const Tensor same = drop(Randomness::Same, std::nullopt);
  CHECK_FALSE(equal(same, d1));
}

namespace {

// Self-attention of a sequence through per-set projections written as einsums.
struct EinsumAttention : nn::Module {
  nn::Param wq, wk, wv;
  double p;
  bool causal;
  EinsumAttention(int64_t e, double drop, bool is_causal) : p(drop), causal(is_causal) {
    wq = register_parameter("wq", randn({e, e}));
    wk = register_parameter("wk", randn({e, e}));
    wv = register_parameter("wv", randn({e, e}));
    register_method("forward", &EinsumAttention::forward, {"input"});
  }
  Tensor forward(const Tensor& x) {  // [L, E]
    const Tensor q = einsum("le,fe->lf", x, wq.get());
    const Tensor k = einsum("le,fe->lf", x, wk.get());
    const Tensor v = einsum("...le,fe->...lf", x, wv.get());
    return scaled_dot_product_attention(q, k, v, {}, p, causal);
  }
};

}  // namespace

TEST_CASE("einsum and scaled_dot_product_attention under functional_vmap") {
  manual_seed(10);
  constexpr int sets = 4;
  const Tensor x = randn({5, 6}), xs = randn({sets, 5, 6});
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    EinsumAttention m(6, 0.0, causal);
    const TensorDict params = TensorDict::from_modules(
        ensemble(sets, [&] { return std::make_shared<EinsumAttention>(6, 0.0, causal); }));
    without_fallback([&] {
      check_shared_and_per_set(m, params, x, xs, 0, {1, 3});
      return 0;
    });
  }
  // with dropout: each set draws its own mask, the same chunked or looped
  EinsumAttention m(6, 0.3, false);
  const TensorDict params = TensorDict::from_modules(
      ensemble(sets, [] { return std::make_shared<EinsumAttention>(6, 0.3, false); }));
  auto run = [&](std::optional<int64_t> chunk, bool loop) {
    manual_seed(8);
    return nn::functional_vmap(m, {.params = params,
                                   .args = {x},
                                   .randomness = Randomness::Different,
                                   .chunk_size = chunk,
                                   .loop = loop})
        .tensor();
  };
  const Tensor whole = without_fallback([&] { return run(std::nullopt, false); });
  CHECK(whole.shape() == Shape{sets, 5, 6});
  for (int64_t c : {1, 3}) CHECK(equal(run(c, false), whole));
  CHECK(equal(run(std::nullopt, true), whole));
  // and differs from the output without dropout
  EinsumAttention plain(6, 0.0, false);
  CHECK_FALSE(
      allclose(nn::functional_vmap(plain, {.params = params, .args = {x}}).tensor(), whole));
}

TEST_CASE(
    "MultiheadAttention without weights runs scaled_dot_product_attention: the weights "
    "path's bits") {
  manual_seed(12);  // no sample with every key padded
  // with added keys (bias_kv, zero_attn) on a cross-attention, and the fused self-attention
  auto extra = std::make_shared<nn::MultiheadAttention>(8, 2, 0.25, true, true, true, true);
  auto plain = std::make_shared<nn::MultiheadAttention>(8, 2, 0.25, true, true);
  const Tensor x = randn({3, 5, 8}), kv = randn({3, 4, 8});
  struct Case {
    std::shared_ptr<nn::MultiheadAttention> m;
    Tensor key;
  };
  for (const Case& c : {Case{extra, kv}, Case{plain, x}}) {
    const int64_t S = c.key.size(1);
    auto run = [&](const ValueDict& kw, bool need) {
      ValueDict all = kw;
      all.set("need_weights", need);
      manual_seed(5);
      return (*c.m)({x, c.key, c.key}, all)[0].tensor();
    };
    const Tensor padding = gt(rand({3, S}), 0.7);
    for (bool training : {false, true}) {
      CAPTURE(training);
      c.m->train(training);
      for (const ValueDict& kw :
           {ValueDict{}, ValueDict{{"attn_mask", gt(rand({5, S}), 0.3)}},
            ValueDict{{"key_padding_mask", padding}}, ValueDict{{"attn_mask", randn({5, S})}}})
        CHECK(same_bytes(run(kw, false), run(kw, true)));
      // two masks are added together before the scores: float rounding only
      const ValueDict both{{"attn_mask", randn({5, S})}, {"key_padding_mask", padding}};
      CHECK(allclose(run(both, false), run(both, true), 1e-6, 1e-6));
    }
  }
}
