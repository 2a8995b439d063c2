// Dropout1d and Dropout2d (whole channels, under every functional_vmap randomness mode, the same
// draws batched, chunked and looped), Unflatten and ModuleDict.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "vmap/vmap.h"

using namespace td;

namespace {

// The value of every channel (dims 0 and 1 of a [N, C, ...] result, or 0 of [C, L]) where the
// channel is constant, NaN where it is not.
std::vector<double> channel_values(const Tensor& out, int64_t channel_dims) {
  const int64_t channels = channel_dims == 2 ? out.size(0) * out.size(1) : out.size(0);
  const std::vector<double> v = out.to(kFloat64).to_vector<double>();
  const size_t per = v.size() / static_cast<size_t>(channels);
  std::vector<double> result;
  for (size_t c = 0; c < static_cast<size_t>(channels); ++c) {
    double first = v[c * per];
    for (size_t k = 1; k < per; ++k)
      if (v[c * per + k] != first) first = std::nan("");
    result.push_back(first);
  }
  return result;
}

void check_channels(const Tensor& out, int64_t channel_dims, double keep_value) {
  std::set<double> seen;
  for (double c : channel_values(out, channel_dims)) {
    CAPTURE(c);
    CHECK((c == 0 || std::abs(c - keep_value) <= 1e-6 * keep_value));
    seen.insert(c);
  }
  CHECK(seen.size() == 2);  // some channels dropped, some kept
}

}  // namespace

TEST_CASE("Dropout1d and Dropout2d zero whole channels and scale the rest") {
  manual_seed(3);
  nn::Dropout1d d1(0.5);
  check_channels(d1.forward(ones({4, 8, 5})), 2, 2.0);
  check_channels(d1.forward(ones({16, 5})), 1, 2.0);  // unbatched (C, L): one draw per channel
  nn::Dropout2d d2(0.25);
  check_channels(d2.forward(ones({4, 8, 3, 3}, kFloat64)), 2, 1 / 0.75);
  check_channels(d2.forward(ones({4, 8, 3})), 2, 1 / 0.75);  // (N, C, L), as torch 1.13
  CHECK(d2.forward(ones({4, 8, 3})).dtype() == kFloat32);
  CHECK(nn::Dropout2d(1.0).forward(ones({2, 3, 2, 2})).sum().item<float>() == 0);
  CHECK(nn::Dropout2d(0.0).forward(ones({2, 3, 2, 2})).sum().item<float>() == 24);
  d1.eval();
  d2.eval();
  Tensor x = randn({2, 3, 4});
  CHECK(equal(d1.forward(x), x));
  CHECK(equal(d2.forward(x), x));
  // torch 1.13 refuses other ranks in Dropout1d; its Dropout2d only warns, td refuses
  d1.train();
  d2.train();
  CHECK_THROWS_AS(d1.forward(ones({2, 3, 4, 5})), ValueError);
  CHECK_THROWS_AS(d1.forward(ones({5})), ValueError);
  CHECK_THROWS_AS(d2.forward(ones({2, 3})), ValueError);
  CHECK_THROWS_AS(d2.forward(ones({1, 2, 3, 4, 5})), ValueError);
  CHECK_THROWS_AS(nn::Dropout1d(1.5), ValueError);
  CHECK_THROWS_AS(nn::Dropout2d(-0.1), ValueError);
  std::ostringstream os;
  os << nn::Dropout1d() << " " << nn::Dropout2d(0.2, true);
  CHECK(os.str() == "Dropout1d(p=0.5, inplace=False) Dropout2d(p=0.2, inplace=True)");
}

TEST_CASE("Dropout1d and Dropout2d under functional_vmap: randomness modes, batched = looped") {
  for (bool two_d : {false, true}) {
    CAPTURE(two_d);
    auto lin = std::make_shared<nn::Linear>(5, 5);
    std::shared_ptr<nn::Module> drop;
    if (two_d)
      drop = std::make_shared<nn::Dropout2d>(0.5);
    else
      drop = std::make_shared<nn::Dropout1d>(0.5);
    auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{lin, drop});
    std::vector<std::shared_ptr<nn::Module>> nets;
    for (int i = 0; i < 5; ++i) {
      auto l = std::make_shared<nn::Linear>(5, 5);
      nets.push_back(std::make_shared<nn::Sequential>(
          std::vector<std::shared_ptr<nn::Module>>{l, std::make_shared<nn::Dropout2d>(0.5)}));
    }
    TensorDict params = TensorDict::from_modules(nets);
    const Tensor x = two_d ? randn({3, 8, 2, 5}) : randn({3, 8, 5});
    auto run = [&](Randomness r, std::optional<int64_t> chunk, bool loop) {
      manual_seed(9);
      return nn::functional_vmap(*net, {.params = params,
                                        .args = {x},
                                        .randomness = r,
                                        .chunk_size = chunk,
                                        .loop = loop})
          .tensor();
    };
    CHECK_THROWS_AS(run(Randomness::Error, std::nullopt, false), RuntimeError);
    // which channels are zero, per set
    auto zero_channels = [&](const Tensor& out, int64_t set) {
      std::vector<bool> zero;
      for (double c : channel_values(eq(out.select(0, set), 0).to(kFloat32), 2))
        zero.push_back(c == 1);
      return zero;
    };
    Tensor same = run(Randomness::Same, std::nullopt, false);
    Tensor diff = run(Randomness::Different, std::nullopt, false);
    REQUIRE(diff.shape() == (two_d ? Shape{5, 3, 8, 2, 5} : Shape{5, 3, 8, 5}));
    bool any_differs = false;
    for (int64_t s = 1; s < 5; ++s) {
      CHECK(zero_channels(same, s) == zero_channels(same, 0));
      any_differs |= zero_channels(diff, s) != zero_channels(diff, 0);
    }
    CHECK(any_differs);
    // a set draws the same numbers batched, chunked and looped
    CHECK(equal(run(Randomness::Same, 2, false), same));
    CHECK(equal(run(Randomness::Different, 2, false), diff));
    CHECK(equal(run(Randomness::Different, std::nullopt, true), diff));
  }
}

TEST_CASE("Unflatten") {
  nn::Unflatten u(1, {2, 3});
  CHECK(u.forward(zeros({4, 6})).shape() == Shape{4, 2, 3});
  CHECK(nn::Unflatten(-1, {2, -1}).forward(zeros({4, 6})).shape() == Shape{4, 2, 3});
  CHECK_THROWS(u.forward(zeros({4, 5})));
  CHECK_THROWS_AS(nn::Unflatten(1, Shape{}), ValueError);
  std::ostringstream os;
  os << u << " " << nn::Unflatten(0, {4});
  CHECK(os.str() == "Unflatten(dim=1, unflattened_size=(2, 3)) Unflatten(dim=0, unflattened_size=(4,))");
}

TEST_CASE("ModuleDict: insertion order, lookup, parameter names as torch") {
  nn::ModuleDict d({{"enc", std::make_shared<nn::Linear>(3, 4)},
                    {"act", std::make_shared<nn::ReLU>()},
                    {"dec", std::make_shared<nn::Linear>(4, 2, false)}});
  CHECK(d.size() == 3);
  CHECK(d.keys() == std::vector<std::string>{"enc", "act", "dec"});
  CHECK(d.contains("act"));
  CHECK_FALSE(d.contains("nope"));
  CHECK(dynamic_cast<nn::ReLU*>(d["act"].get()) != nullptr);
  CHECK_THROWS_AS(d["nope"], KeyError);
  std::vector<std::string> names;
  for (const auto& [n, t] : d.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"enc.weight", "enc.bias", "dec.weight"});
  CHECK_THROWS_AS(d.insert("enc", std::make_shared<nn::ReLU>()), ValueError);
  CHECK_THROWS_AS(d.insert("a.b", std::make_shared<nn::ReLU>()), ValueError);
  d.insert("out", std::make_shared<nn::Tanh>());
  CHECK(d.keys().back() == "out");
  std::ostringstream os;
  os << d;
  CHECK(os.str() ==
        "ModuleDict(\n"
        "  (enc): Linear(in_features=3, out_features=4, bias=True)\n"
        "  (act): ReLU()\n"
        "  (dec): Linear(in_features=4, out_features=2, bias=False)\n"
        "  (out): Tanh()\n"
        ")");
}
