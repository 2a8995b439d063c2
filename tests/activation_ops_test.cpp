// The activation ops and modules (SiLU ... GLU, PReLU) against PyTorch 1.13 (golden data of
// tests/golden/make_activation_golden.py): values on a range with -0, inf, NaN, large and tiny
// inputs, dtype rules, errors, printing, and functional_vmap with per-set PReLU weights.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/modules_golden.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {

// as check_close, NaN where torch has NaN and the same infinities
void check_values(const Tensor& got, const Tensor& want, const std::string& what, double rtol) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  CHECK(got.dtype() == want.dtype());
  auto g = got.to(kFloat64).to_vector<double>();
  auto w = want.to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    CAPTURE(i);
    CAPTURE(w[i]);
    CAPTURE(g[i]);
    if (std::isnan(w[i]) || std::isinf(w[i])) {
      CHECK((std::isnan(w[i]) ? std::isnan(g[i]) : g[i] == w[i]));
    } else {
      CHECK(std::abs(g[i] - w[i]) <= rtol * std::abs(w[i]) + 1e-6);
    }
  }
}

using Fn = std::function<Tensor(const Tensor&)>;

}  // namespace

TEST_CASE("activation ops: values against PyTorch, float32 and float64") {
  TensorDict g = golden("activation_ops");
  const std::vector<std::pair<std::string, Fn>> ops = {
      {"silu", [](const Tensor& x) { return silu(x); }},
      {"selu", [](const Tensor& x) { return selu(x); }},
      {"mish", [](const Tensor& x) { return mish(x); }},
      {"hardswish", [](const Tensor& x) { return hardswish(x); }},
      {"hardsigmoid", [](const Tensor& x) { return hardsigmoid(x); }},
      {"relu6", [](const Tensor& x) { return relu6(x); }},
      {"softsign", [](const Tensor& x) { return softsign(x); }},
      {"tanhshrink", [](const Tensor& x) { return tanhshrink(x); }},
      {"logsigmoid", [](const Tensor& x) { return logsigmoid(x); }},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); }},
      {"leaky_relu_0.2", [](const Tensor& x) { return leaky_relu(x, 0.2); }},
      {"elu", [](const Tensor& x) { return elu(x); }},
      {"elu_0.5", [](const Tensor& x) { return elu(x, 0.5); }},
      {"celu", [](const Tensor& x) { return celu(x); }},
      {"celu_2", [](const Tensor& x) { return celu(x, 2.0); }},
      {"softplus", [](const Tensor& x) { return softplus(x); }},
      {"softplus_2_10", [](const Tensor& x) { return softplus(x, 2, 10); }},
      {"softplus_0.5_5", [](const Tensor& x) { return softplus(x, 0.5, 5); }},
      {"hardtanh", [](const Tensor& x) { return hardtanh(x); }},
      {"hardtanh_-2_3", [](const Tensor& x) { return hardtanh(x, -2, 3); }},
  };
  for (const auto& [name, f] : ops) {
    check_values(f(g.get("input32")), g.get(name + ".f32"), name + " float32", 2e-6);
    check_values(f(g.get("input64")), g.get(name + ".f64"), name + " float64", 1e-12);
    // a strided input and a length off the vector width give the same values
    Tensor x = g.get("input32");
    Tensor strided = x.slice(0, 1, x.size(0), 2);
    check_values(f(strided), g.get(name + ".f32").slice(0, 1, x.size(0), 2), name + " strided",
                 2e-6);
  }
  check_values(glu(g.get("glu_input")), g.get("glu"), "glu", 1e-6);
  check_values(glu(g.get("glu_input"), 0), g.get("glu_0"), "glu dim 0", 1e-6);
}

// torch 1.13's relu is clamp_min(x, 0): relu(-0.0) is -0.0 and NaN stays NaN (checked by hand
// in torch 1.13: torch.relu(torch.tensor([-0.0])).signbit() is True). The GEMM's fused ReLU
// (max(0, v)) does the same, so relu(linear) and linear_relu agree to the bit.
TEST_CASE("relu keeps -0 and NaN as torch, fused or not") {
  const Tensor y = relu(tensor({-0.0f, NAN, -1.0f, 2.0f, 0.0f}));
  const std::vector<float> v = y.to_vector<float>();
  CHECK(std::signbit(v[0]));
  CHECK(v[0] == 0.0f);
  CHECK(std::isnan(v[1]));
  CHECK(!std::signbit(v[2]));
  CHECK(v[2] == 0.0f);
  CHECK(v[3] == 2.0f);
  CHECK(!std::signbit(v[4]));
  // zero inputs times negative weights plus a bias of -0: every output -0 before the ReLU
  const Tensor x = zeros({3, 4}), w = full({5, 4}, -1.5f), b = full({5}, -0.0f);
  const Tensor lin = linear(x, w, b);
  for (float e : lin.to_vector<float>()) REQUIRE(std::signbit(e));
  for (const Tensor& r :
       {relu(lin), linear_relu(x, w, b),
        batch_norm_relu(lin, zeros({5}), ones({5}), ones({5}), b, false, 0.1, 0.0)})
    for (float e : r.to_vector<float>()) CHECK((e == 0.0f && std::signbit(e)));
}

TEST_CASE("activation ops: integer and bool inputs as torch") {
  TensorDict g = golden("activation_ops");
  Tensor ints = g.get("ints");
  check_values(relu6(ints), g.get("relu6.int"), "relu6 int64 stays int64", 0);
  check_values(hardtanh(ints), g.get("hardtanh.int"), "hardtanh int64", 0);
  check_values(hardtanh(ints, -2, 3), g.get("hardtanh_-2_3.int"), "hardtanh int64 bounds", 0);
  check_values(softsign(ints), g.get("softsign.int"), "softsign int64 -> float32", 1e-6);
  check_values(tanhshrink(ints), g.get("tanhshrink.int"), "tanhshrink int64 -> float32", 1e-6);
  CHECK(hardtanh(tensor<int64_t>({-3, 0, 3}), -0.5, 2.5).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 0, 2});  // torch truncates the bounds
  const std::vector<std::pair<std::string, Fn>> floating_only = {
      {"silu", [](const Tensor& x) { return silu(x); }},
      {"selu", [](const Tensor& x) { return selu(x); }},
      {"mish", [](const Tensor& x) { return mish(x); }},
      {"hardswish", [](const Tensor& x) { return hardswish(x); }},
      {"hardsigmoid", [](const Tensor& x) { return hardsigmoid(x); }},
      {"logsigmoid", [](const Tensor& x) { return logsigmoid(x); }},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); }},
      {"elu", [](const Tensor& x) { return elu(x); }},
      {"celu", [](const Tensor& x) { return celu(x); }},
      {"softplus", [](const Tensor& x) { return softplus(x); }},
      {"glu", [](const Tensor& x) { return glu(x); }},
  };
  Tensor bools = tensor<bool>({true, false});
  for (const auto& [name, f] : floating_only) {
    INFO(name);
    for (const Tensor& x : {tensor<int64_t>({1, -2}), bools}) {
      try {
        f(x);
        FAIL("no error");
      } catch (const TypeError& e) {
        const std::string msg = e.what();
        CHECK(msg.find("[" + name + "]") != std::string::npos);
        CHECK(msg.find("[2]") != std::string::npos);
      }
    }
  }
  for (const Fn& f : std::vector<Fn>{[](const Tensor& x) { return relu6(x); },
                                     [](const Tensor& x) { return hardtanh(x); },
                                     [](const Tensor& x) { return softsign(x); },
                                     [](const Tensor& x) { return tanhshrink(x); }})
    CHECK_THROWS_AS(f(bools), TypeError);
}

TEST_CASE("glu and prelu: errors name the op and the shapes") {
  auto message = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "no error";
  };
  std::string m = message([] { glu(zeros({2, 3})); });
  CHECK(m.find("[glu]") != std::string::npos);
  CHECK(m.find("[2, 3]") != std::string::npos);
  CHECK_THROWS_AS(glu(scalar_tensor(1.0)), ValueError);
  CHECK_THROWS_AS(glu(zeros({2, 4}), 2), IndexError);
  m = message([] { prelu(zeros({2, 4, 3}), zeros({3})); });
  CHECK(m.find("[prelu]") != std::string::npos);
  CHECK(m.find("[2, 4, 3]") != std::string::npos);
  CHECK(m.find("[3]") != std::string::npos);
  CHECK_THROWS_AS(prelu(zeros({4}), zeros({4})), ValueError);  // torch 1.13: one channel
  CHECK_THROWS_AS(prelu(scalar_tensor(1.0), zeros({1})), ValueError);
  CHECK_THROWS_AS(prelu(zeros({2, 3}), zeros({3}, kFloat64)), TypeError);
  CHECK_THROWS_AS(prelu(zeros({2, 3}, kInt64), zeros({3}, kInt64)), TypeError);
  auto mod = std::make_shared<nn::PReLU>(3);
  CHECK_THROWS_AS(mod->forward(zeros({2, 4})), ValueError);
  // F.hardtanh takes max_val < min_val (max_val everywhere); nn.Hardtanh asserts
  CHECK(hardtanh(tensor({-3.0, 0.5, 2.0}), 1, -1).to_vector<float>() ==
        std::vector<float>{-1, -1, -1});
  CHECK(hardtanh(tensor<int64_t>({-3, 0, 2}), 1, -1).to_vector<int64_t>() ==
        std::vector<int64_t>{-1, -1, -1});
  CHECK_THROWS_AS(nn::Hardtanh(1, -1), ValueError);
  CHECK_THROWS_AS(celu(zeros({2}), 0), RuntimeError);
}

TEST_CASE("prelu against PyTorch") {
  TensorDict g = golden("activation_ops");
  Tensor x = g.get("prelu_input");
  check_values(prelu(x, g.get("prelu_weight")), g.get("prelu"), "per channel", 1e-6);
  check_values(prelu(x, full({1}, 0.3, kFloat32)), g.get("prelu_1"), "one weight", 1e-6);
  check_values(prelu(x.select(0, 0).select(0, 0), full({1}, 0.3, kFloat32)), g.get("prelu_1d"),
               "1-D", 1e-6);
  nn::PReLU m(3, 0.1);
  CHECK(m.weight->shape() == Shape{3});
  CHECK(m.weight->to_vector<float>() == std::vector<float>{0.1f, 0.1f, 0.1f});
  auto guard = TensorDict({{"weight", g.get("prelu_weight")}}).to_module(m);
  check_values(m.forward(x), g.get("prelu"), "module", 1e-6);
}

TEST_CASE("activation modules print as torch") {
  auto repr = [](const nn::Module& m) {
    std::ostringstream os;
    os << m;
    return os.str();
  };
  CHECK(repr(nn::SiLU()) == "SiLU()");
  CHECK(repr(nn::SiLU(true)) == "SiLU(inplace=True)");
  CHECK(repr(nn::Mish(true)) == "Mish(inplace=True)");
  CHECK(repr(nn::SELU()) == "SELU()");
  CHECK(repr(nn::Hardswish(true)) == "Hardswish()");
  CHECK(repr(nn::Hardsigmoid()) == "Hardsigmoid()");
  CHECK(repr(nn::LeakyReLU()) == "LeakyReLU(negative_slope=0.01)");
  CHECK(repr(nn::LeakyReLU(0.2, true)) == "LeakyReLU(negative_slope=0.2, inplace=True)");
  CHECK(repr(nn::ELU()) == "ELU(alpha=1.0)");
  CHECK(repr(nn::ELU(1.0, true)) == "ELU(alpha=1.0, inplace=True)");
  CHECK(repr(nn::CELU()) == "CELU(alpha=1.0)");
  CHECK(repr(nn::Softplus()) == "Softplus(beta=1, threshold=20)");
  CHECK(repr(nn::Softplus(2.5, 10)) == "Softplus(beta=2.5, threshold=10)");
  CHECK(repr(nn::Hardtanh()) == "Hardtanh(min_val=-1.0, max_val=1.0)");
  CHECK(repr(nn::Hardtanh(-2, 2, true)) == "Hardtanh(min_val=-2.0, max_val=2.0, inplace=True)");
  CHECK(repr(nn::ReLU6()) == "ReLU6()");
  CHECK(repr(nn::ReLU6(true)) == "ReLU6(inplace=True)");
  CHECK(repr(nn::Softsign()) == "Softsign()");
  CHECK(repr(nn::Tanhshrink()) == "Tanhshrink()");
  CHECK(repr(nn::LogSigmoid()) == "LogSigmoid()");
  CHECK(repr(nn::GLU()) == "GLU(dim=-1)");
  CHECK(repr(nn::PReLU()) == "PReLU(num_parameters=1)");
  CHECK(repr(nn::PReLU(3, 0.1)) == "PReLU(num_parameters=3)");
  auto names = nn::PReLU(4).named_parameters();
  REQUIRE(names.size() == 1);
  CHECK(names[0].first == "weight");
}

namespace {

void check_functional_vmap(nn::Module& m, const std::string& name, bool per_set_input) {
  TensorDict file = TensorDict::load_safetensors(std::string(TD_TEST_DATA_DIR) +
                                                 "/functional_vmap/" + name + ".safetensors");
  TensorDict params = file.get_dict("params").clone();
  params.set_batch_size({params.leaves().front().second.size(0)});
  ValueDict kwargs;
  kwargs.set("input", file.get("input.input"));
  std::map<std::string, int64_t> in_dims;
  if (per_set_input) in_dims["input"] = 0;
  for (std::optional<int64_t> chunk : {std::optional<int64_t>{}, std::optional<int64_t>{2}})
    for (bool loop : {false, true}) {
      CAPTURE(name);
      CAPTURE(loop);
      Value out = nn::functional_vmap(m, {.params = params,
                                          .kwargs = kwargs,
                                          .in_dims = in_dims,
                                          .chunk_size = chunk,
                                          .loop = loop});
      check_close(out.tensor(), file.get("output"), name);
    }
}

}  // namespace

TEST_CASE("golden functional_vmap: activations and PReLU with per-set weights") {
  auto mlp = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::PReLU>(6),
      std::make_shared<nn::Linear>(6, 8), std::make_shared<nn::SiLU>(),
      std::make_shared<nn::LeakyReLU>(0.2), std::make_shared<nn::ELU>(0.7),
      std::make_shared<nn::Softplus>(2, 3), std::make_shared<nn::Hardswish>(),
      std::make_shared<nn::GLU>(), std::make_shared<nn::Linear>(4, 3),
      std::make_shared<nn::PReLU>()});
  mlp->eval();
  check_functional_vmap(*mlp, "activation_mlp", false);

  auto conv = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(2, 3, 1), std::make_shared<nn::PReLU>(3),
      std::make_shared<nn::Mish>(), std::make_shared<nn::Hardtanh>(-0.5, 0.7),
      std::make_shared<nn::CELU>(1.5), std::make_shared<nn::SELU>(), std::make_shared<nn::ReLU6>(),
      std::make_shared<nn::Hardsigmoid>(), std::make_shared<nn::Softsign>(),
      std::make_shared<nn::Tanhshrink>(), std::make_shared<nn::LogSigmoid>()});
  conv->eval();
  check_functional_vmap(*conv, "prelu_channels", true);
}
