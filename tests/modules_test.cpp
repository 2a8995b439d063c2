// The standard modules against PyTorch 1.13 (tests/golden/make_modules_golden.py writes the
// safetensors files in tests/data/modules/), plus initialisation, defaults and errors.
#include "modules/modules.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <string>

#include "engine/engine.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {

TensorDict golden(const std::string& name) {
  return TensorDict::load_safetensors(std::string(TD_TEST_DATA_DIR) + "/modules/" + name +
                                      ".safetensors");
}

// |got - want| <= 1e-5 * |want| + 1e-6 everywhere, with equal shapes.
void check_close(const Tensor& got, const Tensor& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  auto g = got.to(kFloat64).to_vector<double>();
  auto w = want.to(kFloat64).to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i)
    worst = std::max(worst, std::abs(g[i] - w[i]) - 1e-5 * std::abs(w[i]));
  CHECK(worst <= 1e-6);
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

TEST_CASE("golden: BatchNorm1d/2d in train (output and running stats) and eval") {
  check_batchnorm<nn::BatchNorm1d>("batchnorm1d");
  check_batchnorm<nn::BatchNorm1d>("batchnorm1d_3d");
  check_batchnorm<nn::BatchNorm2d>("batchnorm2d");
}

TEST_CASE("golden: Conv2d with stride, padding, groups, dilation") {
  TensorDict g = golden("conv2d");
  auto m =
      std::make_shared<nn::Conv2d>(4, 6, nn::Size2{3, 2}, nn::Size2{2, 1}, nn::Size2{1, 2}, 1, 2);
  auto guard = g.get_dict("module").to_module(*m);
  check_close(m->forward(g.get("input")), g.get("output"), "conv2d");
  TensorDict g2 = golden("conv2d_dilated");
  auto m2 = std::make_shared<nn::Conv2d>(3, 2, 3, 1, 1, nn::Size2{2, 1}, 1, false);
  auto guard2 = g2.get_dict("module").to_module(*m2);
  check_close(m2->forward(g2.get("input")), g2.get("output"), "conv2d dilated");
}

TEST_CASE("golden: pad in every mode, cropping too") {
  TensorDict g = golden("pad");
  const Tensor x = g.get("input");
  check_close(pad(x, {1, 2, 0, 3}, "constant", 1.5), g.get("constant"), "constant");
  check_close(pad(x, {-1, 2, 1, -2, 1, 0}), g.get("constant_crop"), "constant, cropping");
  check_close(pad(x, {2, 1, 4, 3}, "reflect"), g.get("reflect"), "reflect");
  check_close(pad(x[0], {5, 0}, "reflect"), g.get("reflect_3d"), "reflect, one dim");
  check_close(pad(x, {0, 7, 2, 1}, "replicate"), g.get("replicate"), "replicate");
  check_close(pad(x[1], {-2, 3}, "replicate"), g.get("replicate_crop"), "replicate, cropping");
  check_close(pad(x, {6, 1, 2, 5}, "circular"), g.get("circular"), "circular");
  check_close(pad(x, {-1, 2, 3, -2}, "circular"), g.get("circular_crop"), "circular, cropping");
  // by hand, on [0, 1, 2, 3, 4]: circular wraps what cropping leaves, the others the whole dim
  const Tensor r = arange(5).to(kFloat32).view({1, 1, 5});
  auto row = [&](IntList p, const char* mode) { return pad(r, p, mode).to_vector<float>(); };
  CHECK(row({3, -2}, "circular") == std::vector<float>{0, 1, 2, 0, 1, 2});
  CHECK(row({-2, 3}, "circular") == std::vector<float>{2, 3, 4, 2, 3, 4});
  CHECK(row({-1, 2}, "reflect") == std::vector<float>{1, 2, 3, 4, 3, 2});
  CHECK(row({3, -2}, "replicate") == std::vector<float>{0, 0, 0, 0, 1, 2});
  // under vmap: a call per set (circular pads a per-set [C, H, W] in its last dim only)
  for (const char* mode : {"constant", "reflect", "replicate", "circular"}) {
    CAPTURE(mode);
    const IntList p = std::string(mode) == "circular" ? IntList{2, 1} : IntList{2, 1, 1, 3};
    const Tensor y = vmap([&](Tensor t) { return pad(t, p, mode, -1.0); })(x);
    for (int64_t i = 0; i < 2; ++i) CHECK(equal(y[i], pad(x[i], p, mode, -1.0)));
  }
  // torch's errors
  check_throws_mentioning<ValueError>([&] { pad(x, {1, 2, 3}); }, "[pad] padding length");
  check_throws_mentioning<ValueError>([&] { pad(x, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}); }, "too long");
  check_throws_mentioning<ValueError>([&] { pad(x, {1, 1}, "wrap"); }, "[pad] mode");
  check_throws_mentioning<ValueError>([&] { pad(x, {6, 0}, "reflect"); }, "[pad] reflect padding");
  check_throws_mentioning<ValueError>(
      [&] {
        pad(x, {1, 1}, "reflect");
      },
      "takes an input of 2 or 3 dims, got shape [2, 3, 5, 6]");
  check_throws_mentioning<ValueError>(
      [&] {
        pad(x[0], {1, 1, 1, 1}, "circular");
      },
      "takes an input of 4 dims");
  check_throws_mentioning<ValueError>([&] { pad(x, {0, 0, 0, 7}, "circular"); }, "more than once");
  check_throws_mentioning<ValueError>([&] { pad(x, {-4, -3}); }, "negative size");
  // sizes past int64 and crops past the dim are errors, not overflow
  const int64_t big = std::numeric_limits<int64_t>::max(),
                low = std::numeric_limits<int64_t>::min();
  check_throws_mentioning<ValueError>([&] { pad(x, {big, big}); }, "past int64");
  check_throws_mentioning<ValueError>([&] { pad(x, {low, big}); }, "[pad] padding");
  check_throws_mentioning<ValueError>([&] { pad(x, {-7, 5}); }, "[pad] padding");
  check_throws_mentioning<RuntimeError>(
      [&] {
        pad(x[0], {int64_t{1} << 60, 0}, "replicate");
      },
      "[pad] cannot allocate");
}

TEST_CASE("golden: Conv2d with padding 'same' or 'valid' and every padding_mode") {
  TensorDict g = golden("conv2d_padding");
  const Tensor x = g.get("input");
  struct Case {
    const char* name;
    std::shared_ptr<nn::Conv2d> m;
    const char* repr;
  };
  const Case cases[] = {
      {"same_odd", std::make_shared<nn::Conv2d>(3, 4, 3, 1, "same"),
       "Conv2d(3, 4, kernel_size=(3, 3), stride=(1, 1), padding=same)"},
      {"same_even_dilated",
       std::make_shared<nn::Conv2d>(3, 4, nn::Size2{2, 4}, 1, "same", nn::Size2{3, 1}),
       "Conv2d(3, 4, kernel_size=(2, 4), stride=(1, 1), padding=same, dilation=(3, 1))"},
      {"valid", std::make_shared<nn::Conv2d>(3, 2, 2, 1, "valid", 1, 1, false),
       "Conv2d(3, 2, kernel_size=(2, 2), stride=(1, 1), padding=valid, bias=False)"},
      {"reflect", std::make_shared<nn::Conv2d>(3, 4, 3, 2, nn::Size2{2, 1}, 1, 1, true, "reflect"),
       "Conv2d(3, 4, kernel_size=(3, 3), stride=(2, 2), padding=(2, 1), "
       "padding_mode=reflect)"},
      {"replicate_same",
       std::make_shared<nn::Conv2d>(3, 4, nn::Size2{4, 3}, 1, "same", 1, 1, true, "replicate"),
       "Conv2d(3, 4, kernel_size=(4, 3), stride=(1, 1), padding=same, padding_mode=replicate)"},
      {"circular",
       std::make_shared<nn::Conv2d>(3, 6, 3, 1, nn::Size2{1, 3}, 1, 3, true, "circular"),
       "Conv2d(3, 6, kernel_size=(3, 3), stride=(1, 1), padding=(1, 3), groups=3, "
       "padding_mode=circular)"},
  };
  for (const Case& c : cases) {
    auto guard = g.get_dict(c.name).to_module(*c.m);
    check_close(c.m->forward(x), g.get(std::string("output.") + c.name), c.name);
    std::ostringstream os;
    os << *c.m;
    CHECK(os.str() == c.repr);
  }
  check_throws_mentioning<ValueError>([] { nn::Conv2d(3, 4, 3, 2, "same"); },
                                      "[Conv2d] padding='same' is not supported for strided");
  check_throws_mentioning<ValueError>([] { nn::Conv2d(3, 4, 3, 1, "full"); },
                                      "[Conv2d] invalid padding string 'full'");
  check_throws_mentioning<ValueError>([] { nn::Conv2d(3, 4, 3, 1, 0, 1, 1, true, "wrap"); },
                                      "[Conv2d] padding_mode must be");
  check_throws_mentioning<ValueError>([] { nn::Conv2d(3, 4, 3, 1, "same", int64_t{1} << 62); },
                                      "[Conv2d] padding='same'");
}

TEST_CASE("golden: conv2d (the function) with padding 'same' or 'valid', under vmap too") {
  TensorDict g = golden("conv2d_padding");
  const Tensor x = g.get("input");
  struct Case {
    const char* name;
    IntList dilation;
  };
  // same_even_dilated pads an odd total (3 rows, 3 columns): its extra element goes last
  for (const Case& c : {Case{"same_odd", {1, 1}}, Case{"same_even_dilated", {3, 1}}}) {
    const Tensor w = g.get(std::string(c.name) + ".weight");
    const Tensor b = g.get(std::string(c.name) + ".bias");
    const Tensor want = g.get(std::string("output.") + c.name);
    check_close(conv2d(x, w, b, 1, "same", c.dilation), want, c.name);
    const std::string mode = "same";  // a std::string is taken as well as a literal
    check_close(conv2d(x, w, b, {1, 1}, mode, c.dilation), want, c.name);
    // per-set weights and inputs: set i is the call on slice i
    const Tensor xs = stack({x, x * 2.0});
    const Tensor ws = stack({w, -w});
    const Tensor ys = vmap(
        [&](Tensor xi, Tensor wi) { return conv2d(xi, wi, b, 1, "same", c.dilation); })(xs, ws);
    for (int64_t i = 0; i < 2; ++i)
      check_close(ys[i], conv2d(xs[i], ws[i], b, 1, "same", c.dilation), c.name);
  }
  const Tensor wv = g.get("valid.weight");
  check_close(conv2d(x, wv, {}, 1, "valid"), g.get("output.valid"), "valid");
  // every kernel and dilation keeps the input's size
  const Tensor x1 = randn({1, 2, 5, 6});
  for (int64_t kh : {1, 2, 3, 4})
    for (int64_t d : {1, 2})
      CHECK(conv2d(x1, randn({3, 2, kh, 5 - kh}), {}, 1, "same", {d, 1}).shape() ==
            Shape{1, 3, 5, 6});
  CHECK(conv2d(x1, ones({3, 2, 1, 1}), {}, 1, 0).shape() == Shape{1, 3, 5, 6});
  check_throws_mentioning<ValueError>(
      [&] {
        conv2d(x1, ones({3, 2, 3, 3}), {}, 2, "same");
      },
      "[conv2d] padding='same' is not supported for strided");
  check_throws_mentioning<ValueError>(
      [&] {
        conv2d(x1, ones({3, 2, 3, 3}), {}, 1, "full");
      },
      "[conv2d] invalid padding string 'full'");
  check_throws_mentioning<ValueError>(
      [&] {
        conv2d(x1, ones({3, 2, 3, 3}), {}, 1, "same", int64_t{1} << 62);
      },
      "[conv2d] padding='same'");
  // what the op refuses keeps the op's message with the shapes
  check_throws_mentioning<ValueError>(
      [&] {
        conv2d(x1, ones({3, 2, 3}), {}, 1, "same");
      },
      "[conv2d]");
  CHECK_THROWS_AS(conv2d(x1, ones({3, 2, 3, 3}), {}, 1, "same", 0), ValueError);
  CHECK_THROWS_AS(conv2d(x1, ones({3, 2, 0, 3}), {}, 1, "same"), ValueError);  // empty kernel
  check_throws_mentioning<RuntimeError>([&] { conv2d(x1, Tensor(), {}, 1, "same"); },
                                        "[conv2d] got an undefined tensor");
}

TEST_CASE("golden: MaxPool2d") {
  TensorDict g = golden("maxpool2d");
  Tensor x = g.get("input");
  check_close(nn::MaxPool2d(3, 2, 1).forward(x), g.get("output"), "maxpool");
  check_close(nn::MaxPool2d(2).forward(x), g.get("output_default_stride"), "default stride");
  check_close(nn::MaxPool2d(nn::Size2{2, 3}, 1, 0, nn::Size2{1, 2}).forward(x),
              g.get("output_dilated"), "dilated");
}

TEST_CASE("MaxPool2d: ceil_mode and printing like PyTorch") {
  nn::MaxPool2d m(2, 2, 0, 1, true);
  CHECK(m.ceil_mode);
  CHECK_FALSE(nn::MaxPool2d(2).ceil_mode);
  // nn.MaxPool2d(2, 2, ceil_mode=True)(torch.arange(25.).view(1, 1, 5, 5))
  Tensor y = m.forward(arange(25).to(kFloat32).reshape({1, 1, 5, 5}));
  CHECK(y.shape() == Shape{1, 1, 3, 3});
  CHECK(y.to_vector<float>() == std::vector<float>{6, 8, 9, 16, 18, 19, 21, 23, 24});
  std::ostringstream os;
  os << m;
  CHECK(os.str() == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=True)");
  std::ostringstream os2;
  os2 << nn::MaxPool2d(nn::Size2{2, 3});
  CHECK(os2.str() ==
        "MaxPool2d(kernel_size=(2, 3), stride=(2, 3), padding=0, dilation=1, ceil_mode=False)");
  // a square size given as a pair prints as a pair, as torch prints what it was given
  std::ostringstream os3;
  os3 << nn::MaxPool2d(nn::Size2{2, 2}, 1, nn::Size2{0, 0}) << " "
      << nn::AvgPool2d(3, nn::Size2{2, 2});
  CHECK(os3.str() ==
        "MaxPool2d(kernel_size=(2, 2), stride=1, padding=(0, 0), dilation=1, ceil_mode=False) "
        "AvgPool2d(kernel_size=3, stride=(2, 2), padding=0)");
}

TEST_CASE("golden: MaxPool2d with return_indices, under functional_vmap too") {
  TensorDict g = golden("maxpool2d_indices");
  const Tensor x = g.get("input");
  nn::MaxPool2d plain(3, 2, 1, 1, false, true);
  nn::MaxPool2d dilated(nn::Size2{2, 3}, 2, 1, nn::Size2{2, 1}, true, true);
  for (auto [name, m] : {std::pair{"plain", &plain}, std::pair{"dilated_ceil", &dilated}}) {
    CAPTURE(name);
    Value r = (*m)({x});
    check_close(r[0].tensor(), g.get(std::string("output.") + name), "output");
    CHECK(r[1].tensor().dtype() == kInt64);
    CHECK(equal(r[1].tensor(), g.get(std::string("indices.") + name)));
    CHECK(equal(m->forward(x), r[0].tensor()));  // the C++ forward(): the output alone
  }
  // torch's ties and specials: the first maximum, the last NaN, the first tap when all are -inf
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  auto indices = [](const Tensor& t, int64_t pad) {
    return std::get<1>(max_pool2d_with_indices(t, 2, {}, pad)).to_vector<int64_t>();
  };
  CHECK(indices(tensor({3.f, 1.f, 3.f, 2.f}, {1, 1, 2, 2}), 0) == std::vector<int64_t>{0});
  CHECK(indices(tensor({nan, 1.f, nan, 2.f}, {1, 1, 2, 2}), 0) == std::vector<int64_t>{2});
  CHECK(indices(tensor({nan, nan, 0.f, 2.f}, {1, 1, 2, 2}), 0) == std::vector<int64_t>{1});
  CHECK(indices(full({1, 1, 2, 2}, -inf), 1) == std::vector<int64_t>{0, 1, 2, 3});
  // under functional_vmap (no parameters), per-set input: each set's call
  const nn::FunctionalVmapOptions o{
      .params = TensorDict(Shape{2}), .kwargs = {{"input", x}}, .in_dims = {{"input", 0}}};
  Value v = nn::functional_vmap(plain, o);
  for (int64_t i = 0; i < 2; ++i) {
    Value one = plain({x[i]});
    CHECK(equal(v[0].tensor()[i], one[0].tensor()));
    CHECK(equal(v[1].tensor()[i], one[1].tensor()));
  }
}

TEST_CASE("golden: AvgPool2d with ceil_mode, count_include_pad and divisor_override") {
  TensorDict g = golden("avgpool2d");
  Tensor x = g.get("input");
  check_close(nn::AvgPool2d(3, 2, 1).forward(x), g.get("output"), "avgpool");
  check_close(nn::AvgPool2d(2).forward(x), g.get("output_default_stride"), "default stride");
  check_close(nn::AvgPool2d(3, 2, 1, true).forward(x), g.get("output_ceil"), "ceil_mode");
  check_close(nn::AvgPool2d(nn::Size2{3, 2}, nn::Size2{2, 3}, 1, true, false).forward(x),
              g.get("output_ceil_no_pad"), "ceil_mode without the padding");
  check_close(nn::AvgPool2d(3, 1, 1, false, false).forward(x), g.get("output_no_pad"),
              "without the padding");
  check_close(nn::AvgPool2d(2, 2, 1, true, true, 3).forward(x), g.get("output_divisor"),
              "divisor_override");
  check_close(nn::AvgPool2d(nn::Size2{2, 3}, std::nullopt, 0, false, true, -5).forward(x),
              g.get("output_divisor_neg"), "negative divisor_override");
  std::ostringstream os;
  os << nn::AvgPool2d(nn::Size2{2, 3}, 1, 1, true, false, 3);
  CHECK(os.str() == "AvgPool2d(kernel_size=(2, 3), stride=1, padding=1)");
  check_throws_mentioning<ValueError>([&] { nn::AvgPool2d(2, 2, 0, false, true, 0).forward(x); },
                                      "[avg_pool2d] divisor_override must be nonzero");
}

TEST_CASE("golden: Embedding") {
  TensorDict g = golden("embedding");
  auto m = std::make_shared<nn::Embedding>(10, 4);
  auto guard = g.get_dict("module").to_module(*m);
  check_close(m->forward(g.get("input")), g.get("output"), "embedding");
}

TEST_CASE("golden: MultiheadAttention (batch_first and sequence first)") {
  TensorDict g = golden("mha");
  auto m = std::make_shared<nn::MultiheadAttention>(8, 2, 0.0, true, true);
  auto guard = g.get_dict("module").to_module(*m);
  m->eval();
  Value r = (*m)({g.get("query"), g.get("key"), g.get("value")});
  check_close(r[0].tensor(), g.get("output"), "output");
  check_close(r[1].tensor(), g.get("weights"), "weights");
  Value rm = m->call_method(
      "forward", {g.get("query"), g.get("key"), g.get("value")},
      {{"key_padding_mask", g.get("key_padding_mask")}, {"average_attn_weights", false}});
  check_close(rm[0].tensor(), g.get("output_masked"), "masked output");
  check_close(rm[1].tensor(), g.get("weights_heads"), "per-head weights");
  Value nw = (*m)({g.get("query"), g.get("key"), g.get("value")}, {{"need_weights", false}});
  CHECK(nw[1].is_none());
  check_close(nw[0].tensor(), g.get("output"), "need_weights=False output");

  TensorDict g2 = golden("mha_seq_first");
  auto m2 = std::make_shared<nn::MultiheadAttention>(4, 4);
  auto guard2 = g2.get_dict("module").to_module(*m2);
  Value r2 = (*m2)({g2.get("query"), g2.get("key"), g2.get("value")});
  check_close(r2[0].tensor(), g2.get("output"), "seq-first output");
  check_close(r2[1].tensor(), g2.get("weights"), "seq-first weights");
  // unbatched input [L, E] gives the batched result's first row
  Value u = (*m2)(
      {g2.get("query").select(1, 0), g2.get("key").select(1, 0), g2.get("value").select(1, 0)});
  check_close(u[0].tensor(), g2.get("output").select(1, 0), "unbatched output");
  check_close(u[1].tensor(), g2.get("weights")[0], "unbatched weights");
}

TEST_CASE("golden: MultiheadAttention with kdim, vdim, add_bias_kv and add_zero_attn") {
  TensorDict g = golden("mha_options");
  struct Case {
    const char* name;
    int64_t heads;
    bool bias_kv, zero_attn;
  };
  for (const Case& c : {Case{"kv_dims", 2, false, false}, Case{"bias_kv", 4, true, false},
                        Case{"zero_attn", 2, false, true}, Case{"both", 2, true, true}}) {
    CAPTURE(c.name);
    auto m = std::make_shared<nn::MultiheadAttention>(8, c.heads, 0.0, true, true, c.bias_kv,
                                                      c.zero_attn, 5, 3);
    auto guard = g.get_dict(c.name).to_module(*m);
    m->eval();
    Value r = m->call_method("forward", {g.get("query"), g.get("key"), g.get("value")},
                             {{"key_padding_mask", g.get("key_padding_mask")},
                              {"attn_mask", g.get("attn_mask")},
                              {"average_attn_weights", false}});
    check_close(r[0].tensor(), g.get(std::string("output.") + c.name), "output");
    check_close(r[1].tensor(), g.get(std::string("weights.") + c.name), "weights");
  }
  auto same = std::make_shared<nn::MultiheadAttention>(8, 2, 0.0, true, false, true, true);
  auto guard = g.get_dict("same").to_module(*same);
  const Tensor qs = g.get("query_same");
  Value r = (*same)({qs, qs, qs});
  check_close(r[0].tensor(), g.get("output.same"), "sequence first, embed_dim keys");
  check_close(r[1].tensor(), g.get("weights.same"), "sequence first weights");
  // torch's parameter names and shapes
  std::vector<std::string> names;
  for (auto& [n, p] :
       nn::MultiheadAttention(8, 2, 0.0, true, false, true, false, 5, 3).named_parameters())
    names.push_back(n);
  CHECK(names == std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight",
                                          "in_proj_bias", "bias_k", "bias_v", "out_proj.weight",
                                          "out_proj.bias"});
  // a key of the wrong width names all three widths
  check_throws_mentioning<ValueError>(
      [&] {
        nn::MultiheadAttention m(8, 2, 0.0, true, true, false, false, 5, 3);
        m({g.get("query"), g.get("value"), g.get("value")});
      },
      "expected last dims 8 (query), 5 (key) and 3 (value)");
}

TEST_CASE("MultiheadAttention parameters and errors") {
  auto m = std::make_shared<nn::MultiheadAttention>(6, 3);
  std::vector<std::string> names;
  for (auto& [n, p] : m->named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                          "out_proj.bias"});
  CHECK(m->in_proj_weight->shape() == Shape{18, 6});
  CHECK(m->in_proj_bias->to_vector<float>() == std::vector<float>(18, 0.f));
  CHECK(m->out_proj->bias->to_vector<float>() == std::vector<float>(6, 0.f));
  double bound = std::sqrt(6.0 / 24.0);
  for (float v : m->in_proj_weight->to_vector<float>()) CHECK(std::abs(v) <= bound);
  CHECK(m->method_arg_names("forward") ==
        std::vector<std::string>{"query", "key", "value", "key_padding_mask", "need_weights",
                                 "attn_mask", "average_attn_weights"});
  CHECK_THROWS_AS(nn::MultiheadAttention(6, 4), ValueError);
  CHECK_THROWS_AS(nn::MultiheadAttention(6, 3, 1.5), ValueError);
  Tensor q = zeros({2, 1, 6});
  CHECK_THROWS_AS((*m)({zeros({2, 1, 5}), zeros({2, 1, 5}), zeros({2, 1, 5})}), ValueError);
  CHECK_THROWS_AS((*m)({zeros({2, 1, 2, 6}), q, q}), ValueError);
  CHECK_THROWS_AS((*m)({q, zeros({2, 6}), q}), ValueError);
  // a mask that is neither a tensor nor None is named (it was Value's bare kind error)
  check_throws_mentioning<TypeError>(
      [&] {
        (*m)({q, q, q}, {{"attn_mask", 1.0}});
      },
      "[MultiheadAttention] attn_mask must be a Tensor or None, not float");
  check_throws_mentioning<TypeError>(
      [&] {
        (*m)({q, q, q}, {{"key_padding_mask", "x"}});
      },
      "key_padding_mask must be a Tensor or None, not str");
  CHECK_THROWS_AS((*m)({q, q, q}, {{"attn_mask", zeros({3, 3})}}), ValueError);
  CHECK_THROWS_AS((*m)({q, q, q}, {{"key_padding_mask", zeros({1, 3})}}), ValueError);
  CHECK(has(message_of([&] {
              (*m)({q, q, q}, {{"attn_mask", zeros({3, 3})}});
            }),
            "MultiheadAttention"));
  // an attention mask that blocks key 1 leaves all weight on key 0
  Tensor mask = gt(tensor({0.f, 1.f, 0.f, 1.f}, {2, 2}), 0.5);
  Value r = (*m)({randn({2, 1, 6}), randn({2, 1, 6}), randn({2, 1, 6})}, {{"attn_mask", mask}});
  CHECK(r[1].tensor().to_vector<float>() == std::vector<float>{1, 0, 1, 0});
  // a float64 mask is taken in the query's dtype, as torch does: a float32 result
  Tensor q2 = randn({2, 1, 6});
  Value plain = (*m)({q2, q2, q2});
  Value with64 = (*m)({q2, q2, q2}, {{"attn_mask", zeros({2, 2}, kFloat64)}});
  CHECK(with64[0].tensor().dtype() == kFloat32);
  CHECK(with64[1].tensor().dtype() == kFloat32);
  CHECK(allclose(with64[0].tensor(), plain[0].tensor()));
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

TEST_CASE("Conv2d with a kernel whose fan_in overflows int64 is a ValueError") {
  const int64_t huge = int64_t{1} << 40;
  check_throws_naming_op<ValueError>([&] { nn::Conv2d(1, 1, nn::Size2{huge, huge}); }, "Conv2d");
}
