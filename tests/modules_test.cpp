// The standard modules against PyTorch 1.13 (tests/golden/make_modules_golden.py writes the
// safetensors files in tests/data/modules/): Linear, MLP, activations, LayerNorm, BatchNorm,
// Embedding; plus initialisation, defaults, input checks and the fused Linear + ReLU.
#include "modules/modules.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "tests/modules_golden.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {
template <class BN>
void check_batchnorm(const std::string& name) {
  INFO(name);
  TensorDict g = golden(name);
  auto m = std::make_shared<BN>(4, 1e-5, 0.2);
  TensorDict state = g.get_dict("module").clone();
  auto guard = state.to_module(*m);
  m->train();
  check_close(m->forward(g.get("input")), g.get("output_train"), "train output");
  check_close(state.get("running_mean"), g.get("after.running_mean"), "running_mean");
  check_close(state.get("running_var"), g.get("after.running_var"), "running_var");
  CHECK(state.get("num_batches_tracked").item<int64_t>() ==
        g.get("after.num_batches_tracked").item<int64_t>());
  m->eval();
  check_close(m->forward(g.get("input_eval")), g.get("output_eval"), "eval output");
  CHECK(state.get("num_batches_tracked").item<int64_t>() == 4);  // eval does not count
}
}  // namespace

TEST_CASE("golden: Linear") {
  TensorDict g = golden("linear");
  auto m = std::make_shared<nn::Linear>(3, 4);
  auto guard = g.get_dict("module").to_module(*m);
  check_close(m->forward(g.get("input")), g.get("output"), "forward");
  check_close((*m)({g.get("input")}).tensor(), g.get("output"), "operator()");
  check_close((*m)({}, {{"input", g.get("input")}}).tensor(), g.get("output"), "kwargs");
}

TEST_CASE("golden: MLP (Sequential)") {
  TensorDict g = golden("mlp");
  auto m = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(3, 8), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(8, 8), std::make_shared<nn::Tanh>()});
  m->push_back(std::make_shared<nn::Linear>(8, 2));
  CHECK(m->size() == 5);
  auto guard = g.get_dict("module").to_module(*m);
  check_close((*m)({g.get("input")}).tensor(), g.get("output"), "mlp");
}

TEST_CASE("golden: activations, Flatten") {
  TensorDict g = golden("activations");
  Tensor x = g.get("input");
  check_close(nn::ReLU().forward(x), g.get("relu"), "relu");
  check_close(nn::GELU().forward(x), g.get("gelu"), "gelu");
  check_close(nn::GELU("tanh").forward(x), g.get("gelu_tanh"), "gelu tanh");
  check_close(nn::Tanh().forward(x), g.get("tanh"), "tanh");
  check_close(nn::Sigmoid().forward(x), g.get("sigmoid"), "sigmoid");
  check_close(nn::Softmax(1).forward(x), g.get("softmax1"), "softmax");
  check_close(nn::LogSoftmax(0).forward(x), g.get("log_softmax0"), "log_softmax");
  check_close(nn::Flatten(0, 1).forward(x.reshape({4, 2, 3})), g.get("flatten"), "flatten");
  CHECK(nn::Flatten().forward(zeros({2, 3, 4})).shape() == Shape{2, 12});
  CHECK_THROWS_AS(nn::Flatten().forward(scalar_tensor(1.0)), IndexError);  // start_dim 1, as torch
  CHECK_THROWS_AS(nn::GELU("fast"), ValueError);
}

TEST_CASE("golden: LayerNorm") {
  TensorDict g = golden("layernorm");
  auto m = std::make_shared<nn::LayerNorm>(Shape{3, 4}, 1e-4);
  auto guard = g.get_dict("module").to_module(*m);
  check_close(m->forward(g.get("input")), g.get("output"), "layernorm");
  auto plain = std::make_shared<nn::LayerNorm>(4, 1e-5, false);
  CHECK(plain->named_parameters().empty());
}

TEST_CASE("golden: BatchNorm1d/2d in train (output and running stats) and eval") {
  check_batchnorm<nn::BatchNorm1d>("batchnorm1d");
  check_batchnorm<nn::BatchNorm1d>("batchnorm1d_3d");
  check_batchnorm<nn::BatchNorm2d>("batchnorm2d");
}

TEST_CASE("golden: Embedding") {
  TensorDict g = golden("embedding");
  auto m = std::make_shared<nn::Embedding>(10, 4);
  auto guard = g.get_dict("module").to_module(*m);
  check_close(m->forward(g.get("input")), g.get("output"), "embedding");
}

TEST_CASE("initialisation follows PyTorch and the seeded generator") {
  manual_seed(42);
  nn::Linear a(16, 8);
  manual_seed(42);
  nn::Linear b(16, 8);
  CHECK(equal(a.weight, b.weight));
  CHECK(equal(a.bias, b.bias));
  for (float v : a.weight->to_vector<float>()) CHECK(std::abs(v) <= 0.25f);
  for (float v : a.bias->to_vector<float>()) CHECK(std::abs(v) <= 0.25f);
  nn::Linear nb(3, 2, false);
  CHECK_FALSE(nb.bias.defined());
  CHECK(nb.named_parameters().size() == 1);
  CHECK(nb.forward(ones({1, 3})).shape() == Shape{1, 2});

  nn::Conv2d c(4, 6, 3, 1, 0, 1, 2);
  CHECK(c.weight->shape() == Shape{6, 2, 3, 3});
  double cb = 1.0 / std::sqrt(18.0);
  for (float v : c.weight->to_vector<float>()) CHECK(std::abs(v) <= cb);
  CHECK_THROWS_AS(nn::Conv2d(3, 6, 3, 1, 0, 1, 2), ValueError);
  CHECK_THROWS_AS(nn::Conv2d(4, 6, {3, 3, 3}), ValueError);
  CHECK_THROWS_AS(nn::Conv2d(4, 6, 0), ValueError);

  nn::Embedding e(200, 50);
  auto w = e.weight->to_vector<float>();
  double mean = 0, var = 0;
  for (float v : w) mean += v;
  mean /= w.size();
  for (float v : w) var += (v - mean) * (v - mean);
  var /= w.size();
  CHECK(std::abs(mean) < 0.05);
  CHECK(std::abs(var - 1.0) < 0.05);
  // padding_idx (negative from the end, as torch) starts as a zero row and is looked up as any
  nn::Embedding pe(5, 3, -2);
  REQUIRE(pe.padding_idx == 3);
  for (int64_t r = 0; r < 5; ++r) {
    CAPTURE(r);
    CHECK(equal(pe.weight.get()[r], zeros({3})) == (r == 3));
  }
  Tensor looked = pe.forward(tensor(std::vector<int64_t>{3, 0}, {2}));
  CHECK(equal(looked[0], zeros({3})));
  CHECK(equal(looked[1], pe.weight.get()[0]));
  std::ostringstream printed;
  printed << pe;
  CHECK(printed.str() == "Embedding(5, 3, padding_idx=3)");
  CHECK_FALSE(nn::Embedding(5, 3).padding_idx.has_value());
  check_throws_mentioning<ValueError>([] { nn::Embedding(5, 3, 5); }, "padding_idx");
  check_throws_mentioning<ValueError>([] { nn::Embedding(5, 3, -6); }, "padding_idx");

  nn::LayerNorm ln(Shape{2, 3});
  CHECK(ln.weight->to_vector<float>() == std::vector<float>(6, 1.f));
  CHECK(ln.bias->to_vector<float>() == std::vector<float>(6, 0.f));
  nn::BatchNorm2d bn(3);
  CHECK(bn.running_var->to_vector<float>() == std::vector<float>(3, 1.f));
  CHECK(bn.num_batches_tracked->dtype() == kInt64);
  CHECK(bn.momentum == 0.1);
  CHECK(bn.eps == 1e-5);
  nn::BatchNorm1d nostats(3, 1e-5, 0.1, false, false);
  CHECK(nostats.named_parameters().empty());
  CHECK(nostats.named_buffers().empty());
  nostats.eval();  // batch statistics even in eval
  Tensor y = nostats.forward(tensor({1.f, 2.f, 3.f, 3.f, 4.f, 5.f}, {2, 3}));
  CHECK(y.to_vector<float>()[0] == doctest::Approx(-1.0).epsilon(1e-3));
}

TEST_CASE("Dropout, Identity, Sequential, BatchNorm input checks") {
  CHECK_THROWS_AS(nn::Dropout(1.5), ValueError);
  CHECK_THROWS_AS(nn::Dropout(-0.1), ValueError);
  nn::Dropout d(0.5);
  CHECK(d.p == 0.5);
  CHECK(nn::Dropout().p == 0.5);
  Tensor x = ones({1000});
  d.eval();
  CHECK(equal(d.forward(x), x));
  d.train();
  manual_seed(5);
  auto v = d.forward(x).to_vector<float>();
  int zeros_seen = 0;
  for (float f : v) {
    CHECK((f == 0.f || f == 2.f));
    zeros_seen += f == 0.f;
  }
  CHECK(zeros_seen > 400);
  CHECK(zeros_seen < 600);

  nn::Identity id;
  Value anything = ValueList{1, "x"};
  CHECK(id({anything})[1].str() == "x");

  nn::Sequential empty;
  CHECK(empty({x}).tensor().is_same(x));
  CHECK_THROWS_AS(empty[0], IndexError);

  nn::BatchNorm1d b1(3);
  CHECK_THROWS_AS(b1.forward(zeros({2, 3, 4, 5})), ValueError);
  CHECK_THROWS_AS(b1.forward(zeros({2, 4})), ValueError);
  CHECK(has(message_of([&] { b1.forward(zeros({2, 4})); }), "[2, 4]"));
  nn::BatchNorm2d b2(3);
  CHECK_THROWS_AS(b2.forward(zeros({2, 3})), ValueError);
  CHECK(has(message_of([&] { b2.forward(zeros({2, 3})); }), "BatchNorm2d"));
}

TEST_CASE("Sequential runs a Linear followed by a ReLU as one fused GEMM, with the same values") {
  manual_seed(9);
  auto lin1 = std::make_shared<nn::Linear>(6, 8);
  auto lin2 = std::make_shared<nn::Linear>(8, 3);
  nn::Sequential net{lin1, std::make_shared<nn::ReLU>(), lin2, std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::Tanh>()};
  Tensor x = randn({5, 6}) * 3.0;
  Tensor h = linear(x, lin1->weight, lin1->bias);
  CHECK(amin(h).item<float>() < 0.0f);  // the ReLU has work to do
  Tensor want = tanh(relu(linear(relu(h), lin2->weight, lin2->bias)));
  reset_kernel_counts();
  Tensor got = net({x}).tensor();
  CHECK(kernel_count(KernelKind::Gemm) == 2);
  CHECK(kernel_count(KernelKind::Elementwise) == 1);  // the Tanh only
  CHECK(allclose(got, want, 1e-6, 1e-6));
  // a ReLU first or a Linear last is left alone
  nn::Sequential tail{std::make_shared<nn::ReLU>(), lin1};
  CHECK(allclose(tail({x}).tensor(), linear(relu(x), lin1->weight, lin1->bias), 1e-6, 1e-6));
}

TEST_CASE("Sequential runs a Conv2d followed by a ReLU as one conv2d_relu, with the same bits") {
  manual_seed(10);
  for (const char* mode : {"zeros", "reflect"}) {
    CAPTURE(mode);
    auto conv = std::make_shared<nn::Conv2d>(3, 8, 3, 1, 1, 1, 1, true, mode);
    nn::Sequential net{conv, std::make_shared<nn::ReLU>(), std::make_shared<nn::Tanh>()};
    Tensor x = randn({2, 3, 10, 10});
    Tensor h = conv->forward(x);
    CHECK(amin(h).item<float>() < 0.0f);  // the ReLU has work to do
    reset_kernel_counts();
    Tensor got = net({x}).tensor();
    CHECK(kernel_count(KernelKind::Conv) == 1);
    CHECK(kernel_count(KernelKind::Elementwise) == 1);  // the Tanh only
    CHECK(equal(got, tanh(relu(h))));
  }
}

// Conv2d then BatchNorm2d in eval mode (then ReLU) runs as one conv2d_batch_norm: the bits of
// the modules one by one, alone and in functional_vmap; anything else is left to the modules.
TEST_CASE("Sequential runs Conv2d, eval-mode BatchNorm2d and ReLU as one op, with the same bits") {
  auto make = [](const char* mode, bool relu) {
    manual_seed(15);
    auto conv = std::make_shared<nn::Conv2d>(3, 8, 3, 2, 1, 1, 1, true, mode);
    auto bn = std::make_shared<nn::BatchNorm2d>(8);
    for (auto& [key, t] : bn->named_parameters()) copy_(t, randn(t.shape()));
    for (auto& [key, t] : bn->named_buffers())
      if (t.dtype() == kFloat32) copy_(t, abs(randn(t.shape())) + 0.5);
    std::vector<std::shared_ptr<nn::Module>> mods{conv, bn};
    if (relu) mods.push_back(std::make_shared<nn::ReLU>());
    mods.push_back(std::make_shared<nn::Tanh>());
    auto net = std::make_shared<nn::Sequential>(mods);
    net->eval();
    return std::tuple{net, conv, bn};
  };
  auto unfused = [](nn::Conv2d& conv, nn::BatchNorm2d& bn, const Tensor& x, bool relu) {
    Tensor y = bn.forward(conv.forward(x));
    return tanh(relu ? td::relu(y) : y);
  };
  for (const char* mode : {"zeros", "reflect"})
    for (bool relu : {false, true}) {
      CAPTURE(mode);
      CAPTURE(relu);
      auto [net, conv, bn] = make(mode, relu);
      Tensor x = randn({2, 3, 10, 10});
      Tensor want = unfused(*conv, *bn, x, relu);
      reset_kernel_counts();
      conv->forward(x);
      const int64_t padding = kernel_count(KernelKind::Other);  // reflect's
      reset_kernel_counts();
      Tensor got = (*net)({x}).tensor();
      CHECK(kernel_count(KernelKind::Conv) == 1);
      CHECK(kernel_count(KernelKind::Other) == padding);  // no BatchNorm pass of its own
      CHECK(equal(got, want));
      CHECK_FALSE(allclose(got, tanh(conv->forward(x)), 1e-3, 1e-3));
      // a per-set ensemble in functional_vmap, on a shared and on a per-set input
      std::vector<std::shared_ptr<nn::Module>> nets;
      std::vector<std::tuple<std::shared_ptr<nn::Conv2d>, std::shared_ptr<nn::BatchNorm2d>>> parts;
      for (int i = 0; i < 3; ++i) {
        manual_seed(20 + i);
        auto [n, c, b] = make(mode, relu);
        for (auto& [key, t] : n->named_parameters()) copy_(t, randn(t.shape()));
        for (auto& [key, t] : b->named_buffers())
          if (t.dtype() == kFloat32) copy_(t, abs(randn(t.shape())) + 0.5);
        nets.push_back(n);
        parts.emplace_back(c, b);
      }
      const TensorDict params = TensorDict::from_modules(nets);
      Tensor xs = randn({3, 2, 3, 10, 10});
      std::vector<Tensor> shared_want, per_set_want;
      for (auto& [c, b] : parts) {
        shared_want.push_back(unfused(*c, *b, x, relu));
        per_set_want.push_back(
            unfused(*c, *b, xs[static_cast<int64_t>(shared_want.size()) - 1], relu));
      }
      CHECK(equal(nn::functional_vmap(*nets[0], {.params = params, .args = {x}}).tensor(),
                  stack(shared_want)));
      CHECK(equal(
          nn::functional_vmap(
              *nets[0], {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}})
              .tensor(),
          stack(per_set_want)));
    }
  // left to the modules: training mode (batch statistics), and an unbatched input, which
  // BatchNorm2d refuses as it does alone
  auto [net, conv, bn] = make("zeros", true);
  Tensor x = randn({2, 3, 10, 10});
  net->train();
  reset_kernel_counts();
  Tensor trained = (*net)({x}).tensor();
  CHECK(kernel_count(KernelKind::Other) == 1);
  CHECK(trained.shape() == Shape{2, 8, 5, 5});
  net->eval();
  CHECK_THROWS_AS((*net)({x[0]}), ValueError);
  CHECK_THROWS_AS(bn->forward(conv->forward(x[0])), ValueError);
}

// The fused pass must give relu(batch_norm)'s bits (the ReLU of the stored value, NaN kept) in
// every mode, and leave the running stats as the unfused module does.
TEST_CASE("Sequential runs a BatchNorm followed by a ReLU as one pass, with the same bits") {
  struct Case {
    const char* name;
    bool training, two_d;
    std::optional<double> momentum;
  };
  for (const Case& c : {Case{"eval 2d", false, true, 0.1}, Case{"train 2d", true, true, 0.1},
                        Case{"train momentum None", true, true, std::nullopt},
                        Case{"eval 1d", false, false, 0.1}, Case{"train 1d", true, false, 0.3}}) {
    CAPTURE(c.name);
    auto make = [&]() -> std::shared_ptr<nn::BatchNormBase> {
      if (c.two_d) return std::make_shared<nn::BatchNorm2d>(5, 1e-5, c.momentum);
      return std::make_shared<nn::BatchNorm1d>(5, 1e-5, c.momentum);
    };
    auto fused = make(), plain = make();
    // running stats and affine parameters away from their defaults, the same in both
    for (auto* m : {fused.get(), plain.get()}) {
      manual_seed(12);
      for (auto& [key, t] : m->named_parameters()) copy_(t, randn(t.shape()));
      for (auto& [key, t] : m->named_buffers())
        if (t.dtype() == kFloat32) copy_(t, abs(randn(t.shape())) + 0.5);
      m->train(c.training);
    }
    nn::Sequential net{fused, std::make_shared<nn::ReLU>()};
    Tensor x = c.two_d ? randn({3, 5, 4, 4}) : randn({6, 5});
    if (!c.training) {  // NaN and infinities pass as relu(batch_norm) passes them
      Tensor flat = x.reshape({-1});
      flat.select(0, 1).fill_(NAN);
      flat.select(0, 2).fill_(INFINITY);
      flat.select(0, 3).fill_(-INFINITY);
    }
    reset_kernel_counts();
    Tensor normed = plain->forward(x);
    const int64_t passes = kernel_count(KernelKind::Elementwise);  // training's counter update
    Tensor want = relu(normed);
    reset_kernel_counts();
    Tensor got = net({x}).tensor();
    CHECK(kernel_count(KernelKind::Elementwise) == passes);  // no separate ReLU pass
    const std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
    CHECK(std::count(w.begin(), w.end(), 0.0f) > 0);  // the ReLU had work to do
    CHECK(got.shape() == want.shape());
    CHECK(std::memcmp(g.data(), w.data(), g.size() * sizeof(float)) == 0);  // NaN too
    const auto fb = fused->named_buffers(), pb = plain->named_buffers();
    REQUIRE(fb.size() == pb.size());
    for (size_t i = 0; i < fb.size(); ++i) CHECK(equal(fb[i].second, pb[i].second));
  }
  // the functional form, in double: relu(batch_norm)'s bits in eval and in training
  manual_seed(13);
  Tensor x = randn({4, 3, 5}).to(kFloat64), w = randn({3}).to(kFloat64),
         b = randn({3}).to(kFloat64);
  for (bool training : {false, true}) {
    CAPTURE(training);
    Tensor rm1 = randn({3}).to(kFloat64), rv1 = abs(randn({3})).to(kFloat64) + 0.5;
    Tensor rm2 = rm1.clone(), rv2 = rv1.clone();
    Tensor got = batch_norm_relu(x, rm1, rv1, w, b, training, 0.2, 1e-3);
    Tensor want = relu(batch_norm(x, rm2, rv2, w, b, training, 0.2, 1e-3));
    CHECK(got.dtype() == kFloat64);
    CHECK(equal(got, want));
    CHECK(equal(rm1, rm2));
    CHECK(equal(rv1, rv2));
  }
}
