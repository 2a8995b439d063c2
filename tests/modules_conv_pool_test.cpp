// The convolution, padding and pooling modules against PyTorch 1.13 (golden files in
// tests/data/modules/): Conv2d and conv2d with every padding and padding_mode, pad in every mode,
// MaxPool2d (ceil_mode, return_indices, printing), AvgPool2d, under vmap and functional_vmap too.
#include "modules/modules.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/kernels/kernels.h"
#include "tests/modules_golden.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

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

// The golden file's size is one the Winograd kernel takes at every level; its transforms round
// differently from the direct sum, so the bound scales with the outputs (about 0.6 here) rather
// than check_close's 1e-6: a wrong tap or transform would be off by about a term, 0.04.
TEST_CASE("golden: Conv2d(64, 64, 3, padding=1) through the Winograd kernel") {
  REQUIRE(kernels::winograd_pays(64, 64, 16, 16));
  TensorDict g = golden("conv2d_winograd");
  auto m = std::make_shared<nn::Conv2d>(64, 64, 3, 1, 1);
  auto guard = g.get_dict("module").to_module(*m);
  const std::vector<double> got = m->forward(g.get("input")).to_vector<double>();
  const std::vector<double> want = g.get("output").to_vector<double>();
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  CHECK(worst <= 1e-5);
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

TEST_CASE("Conv2d with a kernel whose fan_in overflows int64 is a ValueError") {
  const int64_t huge = int64_t{1} << 40;
  check_throws_naming_op<ValueError>([&] { nn::Conv2d(1, 1, nn::Size2{huge, huge}); }, "Conv2d");
}
