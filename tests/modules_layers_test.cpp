// Conv1d, MaxPool1d/AvgPool1d, the adaptive pools, GroupNorm and InstanceNorm1d/2d against
// PyTorch 1.13 (golden files made by tests/golden/make_layers_golden.py), alone, under vmap and
// as ensembles through functional_vmap (batched, chunked and looped alike).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <tuple>
#include <utility>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/modules_golden.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {

TensorDict layers_golden(const std::string& name) { return golden("layers_" + name); }

TensorDict layers_golden_fv(const std::string& name) {
  return TensorDict::load_safetensors(std::string(TD_TEST_DATA_DIR) + "/functional_vmap/layers_" +
                                      name + ".safetensors");
}

// A string PyTorch wrote as its UTF-8 bytes in an int64 tensor.
std::string golden_string(const Tensor& t) {
  std::string s;
  for (int64_t c : t.to_vector<int64_t>()) s.push_back(static_cast<char>(c));
  return s;
}

template <class M>
std::string repr_of(const M& m) {
  std::ostringstream os;
  os << m;
  return os.str();
}

}  // namespace

TEST_CASE("golden: Conv1d with every padding, padding_mode, stride, dilation and groups") {
  TensorDict g = layers_golden("conv1d");
  struct Case {
    std::string name;
    std::shared_ptr<nn::Conv1d> m;
  };
  std::vector<Case> cases = {
      {"plain", std::make_shared<nn::Conv1d>(4, 6, 3)},
      {"strided", std::make_shared<nn::Conv1d>(4, 6, 4, 2, 2, 2, 2)},
      {"same_even", std::make_shared<nn::Conv1d>(4, 3, 4, 1, "same", 1, 1, false)},
      {"valid", std::make_shared<nn::Conv1d>(4, 4, 2, 1, "valid", 1, 4)},
      {"reflect", std::make_shared<nn::Conv1d>(4, 6, 3, 2, 2, 1, 1, true, "reflect")},
      {"replicate", std::make_shared<nn::Conv1d>(4, 6, 4, 1, "same", 2, 1, true, "replicate")},
      {"circular", std::make_shared<nn::Conv1d>(4, 2, 3, 1, 3, 1, 1, true, "circular")},
  };
  const Tensor x = g.get("input");
  for (auto& c : cases) {
    CAPTURE(c.name);
    for (const auto& [k, t] : c.m->named_parameters())
      CHECK(t.shape() == g.get("module." + c.name + "." + k).shape());
    auto guard = g.get_dict("module").get_dict(c.name).to_module(*c.m);
    check_close(c.m->forward(x), g.get("output." + c.name), c.name);
    if (g.contains("unbatched." + c.name))
      check_close(c.m->forward(x.select(0, 1)), g.get("unbatched." + c.name), c.name);
    CHECK(repr_of(*c.m) == golden_string(g.get("repr." + c.name)));
    // vmap over the samples: each is an unbatched call
    Tensor ys = vmap([&](Tensor xi) { return c.m->forward(xi); })(x);
    check_close(ys, g.get("output." + c.name), c.name + " under vmap");
  }
}

TEST_CASE("Conv1d and conv1d: init, errors naming the op and shapes") {
  nn::Conv1d m(6, 4, 5, 1, 0, 1, 2);
  CHECK(m.weight.get().shape() == Shape{4, 3, 5});
  const double bound = 1.0 / std::sqrt(15.0);
  CHECK(amax(abs(m.weight.get())).item<double>() <= bound);
  CHECK(amax(abs(m.bias.get())).item<double>() <= bound);
  check_throws_mentioning<ValueError>([] { nn::Conv1d(3, 4, 3, 2, "same"); },
                                      "[Conv1d] padding='same' is not supported for strided");
  check_throws_mentioning<ValueError>([] { nn::Conv1d(3, 4, 3, 1, "full"); },
                                      "[Conv1d] invalid padding string 'full'");
  check_throws_mentioning<ValueError>([] { nn::Conv1d(3, 4, 3, 1, 0, 1, 1, true, "wrap"); },
                                      "[Conv1d] padding_mode must be");
  check_throws_mentioning<ValueError>([] { nn::Conv1d(3, 4, 3, 1, 0, 1, 2); },
                                      "[Conv1d] in_channels must be divisible by groups");
  check_throws_mentioning<ValueError>([&] { m.forward(ones({2, 5, 9})); }, "[2, 5, 9]");
  check_throws_mentioning<ValueError>([&] { m.forward(ones({2, 6, 3})); }, "[conv1d]");
  check_throws_mentioning<ValueError>([&] { m.forward(ones({2, 6, 3, 3})); },
                                      "[conv1d] expects a 2-D or 3-D input");
  check_throws_mentioning<ValueError>([] { conv1d(ones({1, 2, 5}), ones({3, 2, 3, 3})); },
                                      "[conv1d] weight must be 3-D");
  check_throws_mentioning<ValueError>([] { conv1d(ones({1, 2, 5}), ones({3, 2, 3}), {}, 2, "same"); },
                                      "[conv1d] padding='same' is not supported");
  check_throws_mentioning<ValueError>([] { conv1d(ones({1, 2, 5}), ones({3, 2, 3}), {}, {1, 1}); },
                                      "[conv1d] stride must have 1 value");
  CHECK(conv1d(ones({2, 5}), ones({3, 2, 2}), {}, 1, "same", 3).shape() == Shape{3, 5});
}

TEST_CASE("golden: MaxPool1d, AvgPool1d and the adaptive pools") {
  TensorDict g = layers_golden("pools");
  const Tensor x = g.get("input");
  struct MaxCase {
    std::string name;
    std::shared_ptr<nn::MaxPool1d> m;
  };
  std::vector<MaxCase> maxes = {{"k3", std::make_shared<nn::MaxPool1d>(3)},
                                {"k2s1p1", std::make_shared<nn::MaxPool1d>(2, 1, 1)},
                                {"k3s2d2ceil",
                                 std::make_shared<nn::MaxPool1d>(3, 2, 1, 2, false, true)}};
  for (auto& c : maxes) {
    check_close(c.m->forward(x), g.get("max." + c.name), c.name);
    auto [out, idx] = max_pool1d_with_indices(x, c.m->kernel_size, c.m->stride, c.m->padding,
                                              c.m->dilation, c.m->ceil_mode);
    CHECK(equal(idx, g.get("max_indices." + c.name)));
    check_close(vmap([&](Tensor xi) { return c.m->forward(xi); })(x), g.get("max." + c.name),
                c.name + " under vmap");
  }
  nn::MaxPool1d with_indices(3, std::nullopt, 0, 1, true);
  Value both = with_indices.call_method("forward", {Value(x)});
  CHECK(equal(both.list()[1].tensor(), g.get("max_indices.k3")));
  CHECK(repr_of(with_indices) ==
        "MaxPool1d(kernel_size=3, stride=3, padding=0, dilation=1, ceil_mode=False)");

  struct AvgCase {
    std::string name;
    std::shared_ptr<nn::AvgPool1d> m;
  };
  std::vector<AvgCase> avgs = {
      {"k3", std::make_shared<nn::AvgPool1d>(3)},
      {"k4s3p2", std::make_shared<nn::AvgPool1d>(4, 3, 2)},
      {"k4s3p2_ceil_nopad", std::make_shared<nn::AvgPool1d>(4, 3, 2, true, false)}};
  for (auto& c : avgs) {
    check_close(c.m->forward(x), g.get("avg." + c.name), c.name);
    check_close(c.m->forward(x.select(0, 1)), g.get("avg." + c.name).select(0, 1), c.name);
  }
  CHECK(repr_of(*avgs[1].m) == "AvgPool1d(kernel_size=(4,), stride=(3,), padding=(2,))");

  for (int64_t n : {1, 3, 4, 11, 5}) {
    nn::AdaptiveAvgPool1d m(n);
    const Tensor want = g.get("adaptive_avg1d." + std::to_string(n));
    check_close(m.forward(x), want, "adaptive_avg_pool1d");
    check_close(vmap([&](Tensor xi) { return m.forward(xi); })(x), want, "under vmap");
  }
  CHECK(repr_of(nn::AdaptiveAvgPool1d(4)) == "AdaptiveAvgPool1d(output_size=4)");

  const Tensor x2 = g.get("input2d");
  struct Case2 {
    std::string name;
    nn::AdaptiveSize2 size;
  };
  std::vector<Case2> sizes = {{"1", 1},         {"3x4", {3, 4}}, {"Nx5", {std::nullopt, 5}},
                              {"2xN", {2, std::nullopt}}, {"7x9", {7, 9}},  {"4x2", {4, 2}}};
  for (const auto& c : sizes) {
    nn::AdaptiveAvgPool2d avg(c.size);
    nn::AdaptiveMaxPool2d mx(c.size);
    check_close(avg.forward(x2), g.get("adaptive_avg2d." + c.name), "avg " + c.name);
    check_close(mx.forward(x2), g.get("adaptive_max2d." + c.name), "max " + c.name);
    check_close(mx.forward(x2.select(0, 0)), g.get("adaptive_max2d." + c.name).select(0, 0),
                "max unbatched " + c.name);
    check_close(vmap([&](Tensor xi) { return avg.forward(xi); })(x2),
                g.get("adaptive_avg2d." + c.name), "avg under vmap " + c.name);
  }
  CHECK(repr_of(nn::AdaptiveAvgPool2d({std::nullopt, 7})) ==
        "AdaptiveAvgPool2d(output_size=(None, 7))");
  CHECK(repr_of(nn::AdaptiveMaxPool2d(1)) == "AdaptiveMaxPool2d(output_size=1)");
}

TEST_CASE("pools: errors naming the op and shapes") {
  check_throws_mentioning<ValueError>([] { max_pool1d(ones({2, 3, 4, 5}), 2); },
                                      "[max_pool1d] expects a 2-D or 3-D input");
  check_throws_mentioning<ValueError>([] { max_pool1d(ones({2, 3, 4}), 2, 1, 2); },
                                      "[max_pool1d] input of shape [2, 3, 4]");
  check_throws_mentioning<ValueError>([] { avg_pool1d(ones({2, 3, 2}), 3); },
                                      "[avg_pool1d] input of shape [2, 3, 2]");
  check_throws_mentioning<ValueError>([] { adaptive_avg_pool1d(ones({2, 3, 0}), 2); },
                                      "[adaptive_avg_pool1d]");
  check_throws_mentioning<ValueError>([] { adaptive_max_pool2d(ones({3, 4}), {2, 2}); },
                                      "[adaptive_max_pool2d] expects a 3-D or 4-D input");
  check_throws_mentioning<ValueError>([] { nn::AdaptiveMaxPool2d(2, true); },
                                      "[AdaptiveMaxPool2d] return_indices=True is not supported");
}

TEST_CASE("golden: GroupNorm and InstanceNorm1d/2d, with running stats in train and eval") {
  TensorDict g = layers_golden("norms");
  const Tensor x1 = g.get("input1d"), x2 = g.get("input2d");
  nn::GroupNorm gn(3, 6);
  auto guard = g.get_dict("module").get_dict("group3").to_module(gn);
  check_close(gn.forward(x1), g.get("group3"), "group_norm");
  check_close(vmap([&](Tensor xi) { return gn.forward(xi.unsqueeze(0)).squeeze(0); })(x1),
              g.get("group3"), "group_norm under vmap");
  nn::GroupNorm gn2(2, 4, 1e-3, false);
  CHECK(gn2.named_parameters().empty());
  check_close(gn2.forward(x2), g.get("group2_2d_noaffine"), "group_norm 2d");
  CHECK(repr_of(gn) == "GroupNorm(3, 6, eps=1e-05, affine=True)");

  nn::InstanceNorm1d in1(6, 1e-5, 0.1, true, true);
  nn::InstanceNorm2d in2(4, 1e-5, 0.3, true, true);
  for (auto [name, m, x] : {std::tuple<std::string, nn::InstanceNormBase*, Tensor>{"in1d", &in1, x1},
                            {"in2d", &in2, x2}}) {
    CAPTURE(name);
    auto guard = g.get_dict("module").get_dict(name).to_module(*m);
    m->train();
    check_close(m->forward(x), g.get(name + ".train"), "train");
    check_close(m->running_mean.get(), g.get(name + ".after_mean"), "running_mean");
    check_close(m->running_var.get(), g.get(name + ".after_var"), "running_var");
    m->eval();
    check_close(m->forward(x), g.get(name + ".eval"), "eval");
    check_close(m->forward(x.select(0, 0)), g.get(name + ".unbatched_eval"), "unbatched eval");
  }
  check_close(nn::InstanceNorm1d(6).forward(x1), g.get("in1d_plain"), "plain");
  check_close(nn::InstanceNorm2d(4).forward(x2.select(0, 1)), g.get("in2d_plain_unbatched"),
              "plain unbatched");
  CHECK(repr_of(in2) ==
        "InstanceNorm2d(4, eps=1e-05, momentum=0.3, affine=True, track_running_stats=True)");
  CHECK(nn::InstanceNorm1d(3).named_parameters().empty());
  check_throws_mentioning<ValueError>([] { nn::GroupNorm(4, 6); },
                                      "[GroupNorm] num_channels (6) must be divisible");
  check_throws_mentioning<ValueError>([&] { in1.forward(ones({2, 5, 3})); }, "[InstanceNorm1d]");
  check_throws_mentioning<ValueError>([&] { in2.forward(ones({4, 3})); },
                                      "[InstanceNorm2d] expected 3D or 4D input");
  check_throws_mentioning<ValueError>([] { group_norm(ones({2, 6, 3}), 4); },
                                      "[group_norm] 6 channels of input of shape [2, 6, 3]");
}

namespace {

Value run_ensemble(nn::Module& m, TensorDict& params, const Tensor& x, bool per_set,
                   std::optional<int64_t> chunk, bool loop) {
  ValueDict kwargs;
  kwargs.set("input", x);
  std::map<std::string, int64_t> in_dims;
  if (per_set) in_dims["input"] = 0;
  return nn::functional_vmap(m, {.params = params, .kwargs = kwargs, .in_dims = in_dims,
                                 .chunk_size = chunk, .loop = loop});
}

TensorDict stacked_params(const TensorDict& file) {
  TensorDict p = file.get_dict("params").clone();
  p.set_batch_size({p.leaves().front().second.size(0)});
  return p;
}

std::shared_ptr<nn::Sequential> cnn1d() {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv1d>(4, 6, 3, 1, 1), std::make_shared<nn::GroupNorm>(2, 6),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool1d>(2),
      std::make_shared<nn::Conv1d>(6, 6, 3, 1, "same", 1, 1, true, "reflect"),
      std::make_shared<nn::InstanceNorm1d>(6, 1e-5, 0.1, true),
      std::make_shared<nn::AvgPool1d>(2, 1), std::make_shared<nn::AdaptiveAvgPool1d>(3),
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(18, 2)});
}

std::shared_ptr<nn::Sequential> cnn2d() {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(2, 4, 3), std::make_shared<nn::GroupNorm>(4, 4),
      std::make_shared<nn::AdaptiveMaxPool2d>(nn::AdaptiveSize2{3, std::nullopt}),
      std::make_shared<nn::InstanceNorm2d>(4, 1e-5, 0.1, true, true),
      std::make_shared<nn::AdaptiveAvgPool2d>(1), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(4, 2)});
}

}  // namespace

TEST_CASE("golden: functional_vmap over ensembles of the new layers, batched, chunked, looped") {
  for (auto [name, per_set] : {std::pair<std::string, bool>{"cnn1d_shared", false},
                               {"cnn1d_per_set", true}}) {
    TensorDict file = layers_golden_fv(name);
    auto m = cnn1d();
    m->eval();
    std::optional<Tensor> first;
    for (std::optional<int64_t> chunk : {std::optional<int64_t>{}, std::optional<int64_t>{2}})
      for (bool loop : {false, true}) {
        CAPTURE(name);
        CAPTURE(loop);
        TensorDict params = stacked_params(file);
        Tensor out = run_ensemble(*m, params, file.get("input.input"), per_set, chunk, loop).tensor();
        check_close(out, file.get("output"), name);
        if (!loop) {
          if (first) CHECK(same_bytes(out, *first));  // chunking changes no bit
          first = out;
        }
      }
  }
  TensorDict eval_file = layers_golden_fv("cnn2d_eval");
  auto m = cnn2d();
  m->eval();
  for (bool loop : {false, true}) {
    TensorDict params = stacked_params(eval_file);
    check_close(run_ensemble(*m, params, eval_file.get("input.input"), false, {}, loop).tensor(),
                eval_file.get("output"), "cnn2d eval");
  }
  // training: each set's InstanceNorm2d updates its own running stats
  TensorDict train_file = layers_golden_fv("cnn2d_train");
  m->train();
  for (std::optional<int64_t> chunk : {std::optional<int64_t>{}, std::optional<int64_t>{2}})
    for (bool loop : {false, true}) {
      CAPTURE(loop);
      TensorDict params = stacked_params(train_file);
      check_close(run_ensemble(*m, params, train_file.get("input.input"), true, chunk, loop).tensor(),
                  train_file.get("output"), "cnn2d train");
      for (const char* b : {"3.running_mean", "3.running_var"})
        check_close(params.get(b), train_file.get(std::string("after.") + b), b);
    }
}

TEST_CASE("golden: BatchNorm1d momentum=None keeps the cumulative average, as torch") {
  TensorDict g = layers_golden("options");
  nn::BatchNorm1d bn(4, 1e-5, std::nullopt);
  CHECK(repr_of(bn) ==
        "BatchNorm1d(4, eps=1e-05, momentum=None, affine=True, track_running_stats=True)");
  auto guard = g.get_dict("module").get_dict("bn").clone().to_module(bn);
  bn.train();
  for (int i = 0; i < 3; ++i) {
    const std::string s = std::to_string(i);
    check_close(bn.forward(g.get("bn.input" + s)), g.get("bn.output" + s), "output " + s);
    check_close(bn.running_mean.get(), g.get("bn.after_mean" + s), "running_mean " + s);
    check_close(bn.running_var.get(), g.get("bn.after_var" + s), "running_var " + s);
  }
  CHECK(bn.num_batches_tracked.get().item<int64_t>() == 3);
  bn.eval();
  check_close(bn.forward(g.get("bn.input0")), g.get("bn.eval"), "eval");
}

TEST_CASE("golden: Embedding max_norm renormalises the looked-up rows of the weight in place") {
  TensorDict g = layers_golden("options");
  const Tensor idx = g.get("indices");
  struct Case {
    std::string name;
    std::shared_ptr<nn::Embedding> m;
  };
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<Case> cases = {
      {"emb2", std::make_shared<nn::Embedding>(10, 4, std::nullopt, 1.5)},
      {"emb1", std::make_shared<nn::Embedding>(10, 4, std::nullopt, 2.0, 1.0)},
      {"embinf", std::make_shared<nn::Embedding>(10, 4, std::nullopt, 0.8, inf)}};
  for (auto& c : cases) {
    CAPTURE(c.name);
    TensorDict state = g.get_dict("module").get_dict(c.name).clone();
    auto guard = state.to_module(*c.m);
    const Tensor before = c.m->weight.get().clone();
    check_close(c.m->forward(idx), g.get(c.name + ".output"), "output");
    check_close(c.m->weight.get(), g.get(c.name + ".after"), "weight after");
    CHECK_FALSE(equal(c.m->weight.get(), before));  // it did change
    CHECK(repr_of(*c.m) == golden_string(g.get(c.name + ".repr")));
  }
}

TEST_CASE("golden: functional_vmap with BatchNorm momentum=None and Embedding max_norm per set") {
  TensorDict bn_file = layers_golden_fv("bn_cumulative");
  auto bn = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::BatchNorm1d>(4, 1e-5, std::nullopt)});
  bn->train();
  TensorDict emb_file = layers_golden_fv("embedding_max_norm");
  auto emb = std::make_shared<nn::Embedding>(8, 3, std::nullopt, 1.2);
  for (std::optional<int64_t> chunk : {std::optional<int64_t>{}, std::optional<int64_t>{2}})
    for (bool loop : {false, true}) {
      CAPTURE(loop);
      TensorDict params = stacked_params(bn_file);
      check_close(run_ensemble(*bn, params, bn_file.get("input.input"), true, chunk, loop).tensor(),
                  bn_file.get("output"), "bn output");
      for (const char* b : {"1.running_mean", "1.running_var"})
        check_close(params.get(b), bn_file.get(std::string("after.") + b), b);
      CHECK(equal(params.get("1.num_batches_tracked"), bn_file.get("after.1.num_batches_tracked")));
      TensorDict ep = stacked_params(emb_file);
      check_close(run_ensemble(*emb, ep, emb_file.get("input.input"), true, chunk, loop).tensor(),
                  emb_file.get("output"), "embedding output");
      check_close(ep.get("weight"), emb_file.get("after.weight"), "each set's weight renormalised");
    }
}
