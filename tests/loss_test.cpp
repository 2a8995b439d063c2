// The loss functions, logsumexp and masked_fill against PyTorch's values
// (tests/data/losses/, written by tests/golden/make_loss_golden.py), their errors, and a loss
// under vmap and functional_vmap: one value per set, the loop's values and the same bits in
// every chunking.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
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

TensorDict loss_golden() {
  static const TensorDict g =
      TensorDict::load_safetensors(std::string(TD_TEST_DATA_DIR) + "/losses/losses.safetensors");
  return g;
}

// |got - want| <= rtol * |want| + atol, NaN matching NaN and an infinity the same infinity.
void check_values(const Tensor& got, const Tensor& want, const std::string& what,
                  double rtol = 2e-6, double atol = 1e-6) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  auto g = got.to(kFloat64).to_vector<double>();
  auto w = want.to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    CAPTURE(i);
    if (std::isnan(w[i]) || std::isinf(w[i])) {
      CHECK(std::isnan(w[i]) == std::isnan(g[i]));
      if (std::isinf(w[i])) CHECK(g[i] == w[i]);
    } else {
      CHECK(std::abs(g[i] - w[i]) <= rtol * std::abs(w[i]) + atol);
    }
  }
}

using LossFn = std::function<Tensor(const Tensor& in, const Tensor& tgt, const Tensor& w,
                                    const Tensor& pw, const std::string& red)>;

std::map<std::string, LossFn> golden_cases() {
  std::map<std::string, LossFn> c;
  const std::vector<std::string> reds = {"none", "mean", "sum"};
  using T = const Tensor&;
  using S = const std::string&;
  for (const std::string& r : reds) {
    c["mse_" + r] = [](T x, T y, T, T, S red) { return mse_loss(x, y, red); };
    c["l1_" + r] = [](T x, T y, T, T, S red) { return l1_loss(x, y, red); };
    c["smooth_l1_" + r] = [](T x, T y, T, T, S red) { return smooth_l1_loss(x, y, red); };
    c["huber_" + r] = [](T x, T y, T, T, S red) { return huber_loss(x, y, red); };
    c["ce_" + r] = [](T x, T y, T, T, S red) { return cross_entropy(x, y, {}, -100, red); };
    c["ce_w_ign_" + r] = [](T x, T y, T w, T, S red) { return cross_entropy(x, y, w, -100, red); };
    c["ce_ls_" + r] = [](T x, T y, T, T, S red) { return cross_entropy(x, y, {}, -100, red, 0.2); };
    c["ce_ls_w_" + r] = [](T x, T y, T w, T, S red) {
      return cross_entropy(x, y, w, -100, red, 0.3);
    };
    c["ce_prob_" + r] = [](T x, T y, T, T, S red) { return cross_entropy(x, y, {}, -100, red); };
    c["ce_prob_w_ls_" + r] = [](T x, T y, T w, T, S red) {
      return cross_entropy(x, y, w, -100, red, 0.25);
    };
    c["ce_kdim_" + r] = [](T x, T y, T w, T, S red) { return cross_entropy(x, y, w, -100, red); };
    c["ce_kdim_ls_" + r] = [](T x, T y, T, T, S red) {
      return cross_entropy(x, y, {}, -100, red, 0.1);
    };
    c["ce_kdim_prob_" + r] = [](T x, T y, T, T, S red) {
      return cross_entropy(x, y, {}, -100, red);
    };
    c["nll_" + r] = [](T x, T y, T, T, S red) { return nll_loss(x, y, {}, -100, red); };
    c["nll_w_ign_" + r] = [](T x, T y, T w, T, S red) { return nll_loss(x, y, w, 2, red); };
    c["nll_kdim_" + r] = [](T x, T y, T w, T, S red) { return nll_loss(x, y, w, -100, red); };
    c["bce_" + r] = [](T x, T y, T, T, S red) { return binary_cross_entropy(x, y, {}, red); };
    c["bce_w_" + r] = [](T x, T y, T w, T, S red) { return binary_cross_entropy(x, y, w, red); };
    c["bcel_" + r] = [](T x, T y, T, T, S red) {
      return binary_cross_entropy_with_logits(x, y, {}, red);
    };
    c["bcel_w_pw_" + r] = [](T x, T y, T w, T pw, S red) {
      return binary_cross_entropy_with_logits(x, y, w, red, pw);
    };
  }
  for (const std::string r : {"none", "mean", "sum", "batchmean"}) {
    c["kl_" + r] = [](T x, T y, T, T, S red) { return kl_div(x, y, red); };
    c["kl_log_" + r] = [](T x, T y, T, T, S red) { return kl_div(x, y, red, true); };
  }
  c["mse_broadcast"] = [](T x, T y, T, T, S) { return mse_loss(x, y); };
  c["smooth_l1_beta"] = [](T x, T y, T, T, S) { return smooth_l1_loss(x, y, "sum", 0.7); };
  c["smooth_l1_beta0"] = [](T x, T y, T, T, S) { return smooth_l1_loss(x, y, "sum", 0.0); };
  c["huber_delta"] = [](T x, T y, T, T, S) { return huber_loss(x, y, "none", 2.5); };
  c["ce_unbatched"] = [](T x, T y, T, T, S) { return cross_entropy(x, y); };
  c["ce_unbatched_prob"] = [](T x, T y, T, T, S) {
    return cross_entropy(x, y, {}, -100, "mean", 0.1);
  };
  c["ce_all_ignored"] = [](T x, T y, T, T, S) { return cross_entropy(x, y); };
  c["ce_all_ignored_w"] = [](T x, T y, T w, T, S) { return cross_entropy(x, y, w); };
  c["ce_ignore_custom"] = [](T x, T y, T, T, S) {
    return cross_entropy(x, y, {}, 2, "mean", 0.2);
  };
  c["ce_f64"] = [](T x, T y, T w, T, S) { return cross_entropy(x, y, w, -100, "mean", 0.2); };
  return c;
}

std::string reduction_of(const std::string& name) {
  for (const std::string r : {"batchmean", "none", "mean", "sum"})
    if (name.size() > r.size() && name.compare(name.size() - r.size(), r.size(), r) == 0 &&
        name[name.size() - r.size() - 1] == '_')
      return r;
  return "mean";
}

}  // namespace

TEST_CASE("losses against PyTorch") {
  const TensorDict g = loss_golden();
  int checked = 0;
  for (const auto& [name, fn] : golden_cases()) {
    CAPTURE(name);
    REQUIRE(g.contains(name + ".out"));
    const Tensor w = g.contains(name + ".weight") ? g.get(name + ".weight") : Tensor();
    const Tensor pw = g.contains(name + ".pos_weight") ? g.get(name + ".pos_weight") : Tensor();
    const Tensor want = g.get(name + ".out");
    const Tensor got =
        fn(g.get(name + ".input"), g.get(name + ".target"), w, pw, reduction_of(name));
    CHECK(got.dtype() == want.dtype());
    check_values(got, want, name, want.dtype() == kFloat64 ? 1e-12 : 2e-6);
    ++checked;
  }
  CHECK(checked == 78);  // every case of make_loss_golden.py
}

TEST_CASE("logsumexp and masked_fill against PyTorch") {
  const TensorDict g = loss_golden();
  check_values(logsumexp(g.get("logsumexp.input"), 1), g.get("logsumexp.dim1"), "dim1");
  check_values(logsumexp(g.get("logsumexp.big"), {0, 2}, true),
               g.get("logsumexp.big_dims02_keepdim"), "dims02");
  const Tensor x = g.get("masked_fill.input");
  CHECK(equal(masked_fill(x, g.get("masked_fill.mask"), -1.5), g.get("masked_fill.out")));
  CHECK(equal(masked_fill(x, g.get("masked_fill.mask2"), scalar_tensor(7.0, kFloat64)),
              g.get("masked_fill.out2")));
}

TEST_CASE("logsumexp and masked_fill: dtypes, 0-d, empty and errors") {
  CHECK(logsumexp(tensor<int64_t>({1, 2, 3}), 0).dtype() == kFloat32);
  CHECK(logsumexp(tensor<int64_t>({1, 2, 3}), 0).item<float>() ==
        doctest::Approx(std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0))));
  CHECK(logsumexp(scalar_tensor(2.0), 0).item<float>() == 2.f);
  const Tensor e = logsumexp(zeros({2, 0}), 1);
  CHECK(e.shape() == Shape{2});
  CHECK(std::isinf(e.to_vector<float>()[0]));
  check_throws_naming_op<IndexError>([] { logsumexp(zeros({2, 3}), 2); }, "logsumexp");
  // masked_fill: the value is cast to the input's dtype; mask and input broadcast
  const Tensor m = tensor<bool>({true, false, true});
  CHECK(masked_fill(zeros({3}, kInt64), m, 1.7).to_vector<int64_t>() ==
        std::vector<int64_t>{1, 0, 1});
  CHECK(masked_fill(zeros({3}), m, scalar_tensor(2.0, kInt64)).dtype() == kFloat32);
  CHECK(masked_fill(zeros({3}), ones({2, 3}, kBool), 1).shape() == Shape{2, 3});
  check_throws_naming_op<TypeError>([&] { masked_fill(zeros({3}), ones({3}), 1); }, "masked_fill");
  check_throws_naming_op<ValueError>([&] { masked_fill(zeros({3}), ones({2}, kBool), 1); },
                                     "masked_fill");
  check_throws_naming_op<ValueError>([&] { masked_fill(zeros({3}), m, zeros({1})); },
                                     "masked_fill");
}

TEST_CASE("loss errors name the op and the shapes") {
  const Tensor x = randn({4, 3});
  const Tensor t = tensor<int64_t>({0, 1, 2, 1});
  auto msg = [](const std::function<void()>& f) { return message_of(f); };
  check_throws_naming_op<IndexError>([&] { cross_entropy(x, tensor<int64_t>({0, 3, 1, 1})); },
                                     "cross_entropy");
  check_throws_naming_op<IndexError>([&] { nll_loss(x, tensor<int64_t>({0, -1, 1, 1})); },
                                     "nll_loss");
  CHECK(has(msg([&] { cross_entropy(x, tensor<int64_t>({0, 1, 2})); }), "[4, 3]"));
  check_throws_naming_op<ValueError>([&] { cross_entropy(x, tensor<int64_t>({0, 1, 2})); },
                                     "cross_entropy");
  check_throws_naming_op<ValueError>([&] { cross_entropy(x, randn({4, 2})); }, "cross_entropy");
  check_throws_naming_op<TypeError>([&] { nll_loss(x, ones({4}, kInt64).to(kBool)); }, "nll_loss");
  check_throws_naming_op<ValueError>([&] { cross_entropy(x, t, ones({4})); }, "cross_entropy");
  check_throws_naming_op<ValueError>([&] { cross_entropy(x, t, {}, -100, "avg"); },
                                     "cross_entropy");
  check_throws_naming_op<ValueError>([&] { cross_entropy(x, t, {}, -100, "mean", 1.5); },
                                     "cross_entropy");
  check_throws_naming_op<ValueError>([&] { cross_entropy(scalar_tensor(1.0), t); },
                                     "cross_entropy");
  check_throws_naming_op<ValueError>([&] { mse_loss(x, randn({4, 2})); }, "mse_loss");
  check_throws_naming_op<ValueError>([&] { kl_div(x, x, "batchsum"); }, "kl_div");
  check_throws_naming_op<ValueError>([&] { binary_cross_entropy(x, x); }, "binary_cross_entropy");
  check_throws_naming_op<ValueError>([&] { binary_cross_entropy(rand({4}), rand({3})); },
                                     "binary_cross_entropy");
  check_throws_naming_op<ValueError>(
      [&] { binary_cross_entropy_with_logits(x, rand({4})); }, "binary_cross_entropy_with_logits");
  check_throws_naming_op<ValueError>([&] { huber_loss(x, x, "mean", 0.0); }, "huber_loss");
  check_throws_naming_op<ValueError>([&] { smooth_l1_loss(x, x, "mean", -1.0); },
                                     "smooth_l1_loss");
}

namespace {

// forward(input, target): the named loss of a small MLP's output
struct ScoredMlp : nn::Module {
  std::shared_ptr<nn::Module> net;
  std::function<Tensor(const Tensor&, const Tensor&)> loss;
  ScoredMlp(std::function<Tensor(const Tensor&, const Tensor&)> l, int64_t out)
      : net(mlp(6, 8, out)), loss(std::move(l)) {
    register_module("net", net);
    register_method("forward", &ScoredMlp::forward, {"input", "target"});
  }
  Tensor forward(const Tensor& input, const Tensor& target) {
    return loss((*net)({input}).tensor(), target);
  }
};

}  // namespace

TEST_CASE("losses under functional_vmap: one value per set, as the loop, in every chunking") {
  const int64_t sets = 5, n = 7, c = 4;
  struct L {
    std::string name;
    std::function<Tensor(const Tensor&, const Tensor&)> fn;
    Tensor target;         // shared
    Tensor target_per_set;  // [sets, ...]
  };
  Tensor idx = tensor<int64_t>({0, 3, 1, -100, 2, 2, 1});
  Tensor idx_sets = remainder(arange(sets * n), c).reshape({sets, n});
  Tensor w = tensor({0.5f, 1.f, 2.f, 0.25f});
  std::vector<L> losses = {
      {"cross_entropy", [&](const Tensor& y, const Tensor& t) { return cross_entropy(y, t, w); },
       idx, idx_sets},
      {"cross_entropy_ls",
       [](const Tensor& y, const Tensor& t) { return cross_entropy(y, t, {}, -100, "sum", 0.1); },
       idx, idx_sets},
      {"cross_entropy_prob",
       [](const Tensor& y, const Tensor& t) { return cross_entropy(y, t); }, softmax(randn({n, c}), 1),
       softmax(randn({sets, n, c}), 2)},
      {"nll_none", [](const Tensor& y, const Tensor& t) { return nll_loss(log_softmax(y, 1), t, {}, -100, "none"); },
       idx, idx_sets},
      {"mse", [](const Tensor& y, const Tensor& t) { return mse_loss(y, t); }, randn({n, c}),
       randn({sets, n, c})},
      {"huber", [](const Tensor& y, const Tensor& t) { return huber_loss(y, t, "sum", 0.5); },
       randn({n, c}), randn({sets, n, c})},
      {"bce_logits",
       [](const Tensor& y, const Tensor& t) {
         return binary_cross_entropy_with_logits(y, t, {}, "mean", full({4}, 2.0));
       },
       rand({n, c}), rand({sets, n, c})},
      {"bce", [](const Tensor& y, const Tensor& t) { return binary_cross_entropy(sigmoid(y), t); },
       rand({n, c}), rand({sets, n, c})},
      {"kl_div", [](const Tensor& y, const Tensor& t) { return kl_div(log_softmax(y, 1), t, "batchmean"); },
       softmax(randn({n, c}), 1), softmax(randn({sets, n, c}), 2)},
  };
  const Tensor x = randn({n, 6});
  for (const L& l : losses) {
    CAPTURE(l.name);
    auto m = std::make_shared<ScoredMlp>(l.fn, c);
    auto members = ensemble(sets, [&] { return std::make_shared<ScoredMlp>(l.fn, c); });
    const TensorDict params = TensorDict::from_modules(members);
    const nn::FunctionalVmapOptions shared{
        .params = params, .kwargs = {{"input", x}, {"target", l.target}}};
    const nn::FunctionalVmapOptions per_set{
        .params = params,
        .kwargs = {{"input", x}, {"target", l.target_per_set}},
        .in_dims = {{"target", 0}}};
    for (const auto& o : {shared, per_set}) {
      const Tensor whole = nn::functional_vmap(*m, o).tensor();
      if (l.name != "nll_none") CHECK(whole.shape() == Shape{sets});
      CHECK(close(whole, loop_reference(*m, params, o.args, o.kwargs, o.in_dims)));
      check_same_bits_chunked_and_looped(*m, o, whole, {1, 2, 3});
    }
  }
}

TEST_CASE("losses under vmap: per-set predictions give the loop's bits") {
  const Tensor preds = randn({6, 5, 3});
  const Tensor t = tensor<int64_t>({0, 2, -100, 1, 1});
  auto f = [&](const Tensor& y) { return cross_entropy(y, t, {}, -100, "mean", 0.05); };
  std::vector<Tensor> loop;
  for (int64_t i = 0; i < 6; ++i) loop.push_back(f(preds[i]));
  const Tensor want = stack(loop);
  for (std::optional<int64_t> chunk : {std::optional<int64_t>(), std::optional<int64_t>(1),
                                       std::optional<int64_t>(4)}) {
    const Tensor got = vmap([&](Tensor y) { return f(y); }, {.chunk_size = chunk})(preds);
    CHECK(same_bytes(got, want));
  }
  // a per-set out-of-range target raises the loss's IndexError
  Tensor bad = tensor<int64_t>({0, 1, 2, 3, 0, 1}).reshape({2, 3});
  check_throws_naming_op<IndexError>(
      [&] {
        vmap([](Tensor y, Tensor tt) { return cross_entropy(y, tt); })(randn({2, 3, 3}), bad);
      },
      "cross_entropy");
}

TEST_CASE("loss modules: torch's defaults, printing, weight buffers, as their functions") {
  const Tensor x = randn({4, 3});
  const Tensor t = tensor<int64_t>({0, 2, 1, 2});
  const Tensor w = tensor({0.5f, 1.f, 2.f});
  auto printed = [](const nn::Module& m) {
    std::ostringstream os;
    os << m;
    return os.str();
  };
  nn::CrossEntropyLoss ce(w, 1, "sum", 0.1);
  CHECK(printed(ce) == "CrossEntropyLoss()");
  CHECK(ce.named_buffers().size() == 1);
  CHECK(same_bytes(ce({x, t}).tensor(), cross_entropy(x, t, w, 1, "sum", 0.1)));
  nn::CrossEntropyLoss plain;
  CHECK(plain.named_buffers().empty());
  CHECK(plain.ignore_index == -100);
  CHECK(plain.reduction == "mean");
  CHECK(same_bytes(plain({x, t}).tensor(), cross_entropy(x, t)));
  const Tensor lp = log_softmax(x, 1);
  CHECK(same_bytes(nn::NLLLoss(w)({lp, t}).tensor(), nll_loss(lp, t, w)));
  const Tensor y = randn({4, 3});
  CHECK(same_bytes(nn::MSELoss("sum")({x, y}).tensor(), mse_loss(x, y, "sum")));
  CHECK(same_bytes(nn::L1Loss()({x, y}).tensor(), l1_loss(x, y)));
  CHECK(same_bytes(nn::SmoothL1Loss("none", 0.5)({x, y}).tensor(), smooth_l1_loss(x, y, "none", 0.5)));
  CHECK(same_bytes(nn::HuberLoss("mean", 2.0)({x, y}).tensor(), huber_loss(x, y, "mean", 2.0)));
  const Tensor p = sigmoid(x), q = rand({4, 3});
  CHECK(same_bytes(nn::BCELoss(w)({p, q}).tensor(), binary_cross_entropy(p, q, w)));
  nn::BCEWithLogitsLoss bcel({}, "sum", w);
  CHECK(bcel.named_buffers().size() == 1);
  CHECK(same_bytes(bcel({x, q}).tensor(), binary_cross_entropy_with_logits(x, q, {}, "sum", w)));
  CHECK(same_bytes(nn::KLDivLoss("batchmean", true)({lp, lp}).tensor(),
                   kl_div(lp, lp, "batchmean", true)));
  check_throws_naming_op<ValueError>([&] { nn::MSELoss("avg")({x, y}); }, "mse_loss");
}

TEST_CASE("a loss module under functional_vmap: per-set class weights and predictions") {
  const int64_t sets = 4;
  std::vector<std::shared_ptr<nn::Module>> members;
  for (int64_t i = 0; i < sets; ++i)
    members.push_back(std::make_shared<nn::CrossEntropyLoss>(rand({3}) + 0.5, -100, "mean", 0.2));
  const TensorDict params = TensorDict::from_modules(members);
  const Tensor preds = randn({sets, 6, 3});
  const Tensor t = tensor<int64_t>({0, 2, 1, 2, -100, 1});
  const nn::FunctionalVmapOptions o{.params = params,
                                    .kwargs = {{"input", preds}, {"target", t}},
                                    .in_dims = {{"input", 0}}};
  const Tensor whole = nn::functional_vmap(*members[0], o).tensor();
  REQUIRE(whole.shape() == Shape{sets});
  for (int64_t i = 0; i < sets; ++i)
    CHECK(whole[i].item<float>() ==
          doctest::Approx(cross_entropy(preds[i], t, params[i].get("weight"), -100, "mean", 0.2)
                              .item<float>()));
  check_same_bits_chunked_and_looped(*members[0], o, whole, {1, 3});
}
