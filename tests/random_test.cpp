// Random ops outside vmap: determinism, streams, moments, bernoulli and dropout.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/kernels/kernels.h"
#include "modules/modules.h"
#include "vmap/vmap.h"

using namespace td;

namespace {
double mean_of(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s / static_cast<double>(v.size());
}
double std_of(const std::vector<float>& v) {
  double m = mean_of(v), s = 0;
  for (float x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}
}  // namespace

TEST_CASE("manual_seed makes draws reproducible; successive calls differ") {
  manual_seed(123);
  auto a = rand({50}).to_vector<float>();
  auto b = rand({50}).to_vector<float>();
  manual_seed(123);
  auto a2 = rand({50}).to_vector<float>();
  auto b2 = rand({50}).to_vector<float>();
  CHECK(a == a2);
  CHECK(b == b2);
  CHECK(a != b);
  manual_seed(124);
  CHECK(rand({50}).to_vector<float>() != a);
  manual_seed(123);
  auto n1 = randn({20}).to_vector<float>();
  manual_seed(123);
  CHECK(randn({20}).to_vector<float>() == n1);
}

TEST_CASE("each random call takes one stream") {
  manual_seed(5);
  uint64_t s0 = rng_state().stream;
  rand({3});
  CHECK(rng_state().stream == s0 + 1);
  randn({3}, kFloat64);
  CHECK(rng_state().stream == s0 + 2);
}

TEST_CASE("uniform and normal moments over 10000 draws") {
  manual_seed(7);
  auto u = rand({10000}).to_vector<float>();
  for (float x : u) {
    CHECK(x >= 0.f);
    CHECK(x < 1.f);
  }
  CHECK(mean_of(u) == doctest::Approx(0.5).epsilon(0.03));
  CHECK(std_of(u) == doctest::Approx(std::sqrt(1.0 / 12)).epsilon(0.03));
  auto n = randn({100, 100}).to_vector<float>();
  CHECK(std::abs(mean_of(n)) < 0.05);
  CHECK(std_of(n) == doctest::Approx(1.0).epsilon(0.03));
  Tensor d = rand({4}, kFloat64);
  CHECK(d.dtype() == kFloat64);
  CHECK(rand_like(zeros({2, 3})).shape() == Shape{2, 3});
  CHECK(randn_like(zeros({2}, kFloat64)).dtype() == kFloat64);
  CHECK(rand({0, 3}).numel() == 0);
}

TEST_CASE("random dtype and size errors") {
  CHECK_THROWS_AS(rand({2}, kInt64), TypeError);
  CHECK_THROWS_AS(randn({2}, kBool), TypeError);
  CHECK_THROWS_AS(rand({-1}), ValueError);
  CHECK_THROWS_AS(bernoulli(tensor<int64_t>({1})), TypeError);
}

TEST_CASE("bernoulli") {
  manual_seed(3);
  Tensor p = full({10000}, 0.3);
  Tensor b = bernoulli(p);
  CHECK(b.dtype() == kFloat32);
  auto v = b.to_vector<float>();
  for (float x : v) CHECK((x == 0.f || x == 1.f));
  CHECK(mean_of(v) == doctest::Approx(0.3).epsilon(0.05));
  auto ones_ = bernoulli(ones({10})).to_vector<float>();
  for (float x : ones_) CHECK(x == 1.f);
  auto zs = bernoulli(zeros({10})).to_vector<float>();
  for (float x : zs) CHECK(x == 0.f);
}

TEST_CASE("dropout") {
  manual_seed(11);
  Tensor x = full({10000}, 2.0);
  Tensor y = dropout(x, 0.25, true);
  auto v = y.to_vector<float>();
  int kept = 0;
  for (float e : v) {
    CHECK((e == 0.f || e == doctest::Approx(2.0 / 0.75)));
    kept += e != 0.f;
  }
  CHECK(kept / 10000.0 == doctest::Approx(0.75).epsilon(0.03));
  // eval mode and p = 0 return the input itself and draw nothing
  uint64_t s = rng_state().stream;
  CHECK(dropout(x, 0.5, false).is_same(x));
  CHECK(dropout(x, 0.0, true).is_same(x));
  CHECK(rng_state().stream == s);
  auto z = dropout(x, 1.0, true).to_vector<float>();
  for (float e : z) CHECK(e == 0.f);
  // a dropped inf or NaN is NaN, as torch's x * mask (p = 1 is x * 0 there)
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const Tensor odd = tensor<float>({inf, -inf, nan, 3.0f});
  for (double q : {0.5, 1.0}) {
    CAPTURE(q);
    const auto d = dropout(full({4000}, inf), q, true).to_vector<float>();
    int dropped = 0;
    for (float e : d) {
      CHECK((std::isnan(e) || e == static_cast<float>(inf / (1 - q))));
      dropped += std::isnan(e);
    }
    CHECK(dropped > 0);
  }
  const auto all = dropout(odd, 1.0, true).to_vector<float>();
  CHECK(std::isnan(all[0]));
  CHECK(std::isnan(all[1]));
  CHECK(std::isnan(all[2]));
  CHECK(all[3] == 0.0f);
  CHECK_THROWS_AS(dropout(x, 1.5), ValueError);
  CHECK_THROWS_AS(dropout(x, -0.1, false), ValueError);
  // a NaN p is no probability (it passed p < 0 || p > 1 and reached the draws)
  CHECK_THROWS_AS(dropout(x, std::nan(""), true), ValueError);
  CHECK_THROWS_AS(dropout(x, std::nan(""), false), ValueError);
  CHECK_THROWS_AS(vmap([](Tensor t) { return dropout(t, std::nan("")); },
                       {.randomness = Randomness::Different})(ones({2, 3})),
                  ValueError);
  CHECK_THROWS_AS(dropout(tensor<int64_t>({1}), 0.5), TypeError);
  manual_seed(11);
  CHECK(dropout(x, 0.25, true).to_vector<float>() == v);
}

TEST_CASE("Philox 4x32-10 matches the Random123 known-answer vectors") {
  using W = std::array<uint32_t, 4>;
  CHECK(philox4x32_10({0, 0, 0, 0}, {0, 0}) == W{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                      {0xffffffff, 0xffffffff}) ==
        W{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                      {0xa4093822, 0x299f31d0}) ==
        W{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("the vectorised fill equals the scalar Philox word by word, from any offset") {
  // the last start crosses block 2^32, where word 2 of the counter changes
  for (uint64_t elem0 : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{61}, uint64_t{1021},
                         4 * ((uint64_t{1} << 32) - 7) + 1}) {
    std::vector<float> f(700);
    kernels::philox_uniform(f.data(), 700, 99, 5, 1234567, elem0);
    for (int64_t i = 0; i < 700; ++i)
      CHECK(f[i] == float(philox_word(99, 5, 1234567, elem0 + i) >> 8) * (1.0f / 16777216.0f));
  }
}

// The one-pass dropout kernel against the formula it replaces, draw for draw: x * keep / (1 - p)
// with keep = dropout_mask (float32) or rand >= p (float64).
TEST_CASE("dropout equals x * keep / (1 - p) with the same draws, bit for bit") {
  for (DType dt : {kFloat32, kFloat64})
    for (double p : {0.1, 1.0 / 3.0, 0.37, 0.5, 0.9}) {
      Tensor x = randn({7, 33}, dt).transpose(0, 1);  // non-contiguous input
      manual_seed(3);
      Tensor got = dropout(x, p, true);
      manual_seed(3);
      Tensor keep = dt == kFloat32 ? dropout_mask({33, 7}, p) : ge(rand({33, 7}, dt), p).to(dt);
      Tensor want = mul(mul(x, keep), 1.0 / (1.0 - p));
      CHECK(got.dtype() == dt);
      CHECK(got.to_vector<double>() == want.to_vector<double>());
      CHECK(sum(eq(got, 0.0)).item<int64_t>() > 0);
    }
}

TEST_CASE("bernoulli rejects probabilities outside [0, 1]") {
  CHECK_THROWS_AS(bernoulli(tensor({0.5f, 1.5f})), ValueError);
  std::string m;
  try {
    bernoulli(tensor({-0.25f}));
  } catch (const ValueError& e) {
    m = e.what();
  }
  CHECK(m.find("[bernoulli]") != std::string::npos);
  CHECK_THROWS_AS(bernoulli(tensor({NAN})), ValueError);
  CHECK_THROWS_AS(bernoulli(full({2, 2}, 2.0, kFloat64)), ValueError);
  // the bounds themselves are fine: p = 0 gives 0, p = 1 gives 1
  CHECK(bernoulli(tensor({0.f, 1.f})).to_vector<float>() == std::vector<float>{0, 1});
}

TEST_CASE("bernoulli under vmap checks every set's probabilities") {
  auto f = vmap([](Tensor p) { return bernoulli(p); }, {.randomness = Randomness::Different});
  CHECK(f(tensor({0.f, 1.f}, {2, 1})).to_vector<float>() == std::vector<float>{0, 1});
  CHECK_THROWS_AS(f(tensor({0.5f, 1.5f}, {2, 1})), ValueError);
  CHECK_THROWS_AS(f(tensor({NAN, 0.5f})), ValueError);
}

// float32 dropout's byte draws against the scalar Philox, element by element, ties (a byte equal
// to the threshold's top byte, which then takes a refinement word) counted in order; p near 0
// and 1 put the threshold's top byte at 0 and 255, and p = 1 - 1e-9 rounds to a float 1: none
// kept, as rand >= p.
TEST_CASE("dropout_mask follows its byte draws, refinements included") {
  const int64_t n = 70000;  // several runs of 4096, a partial last one, ~270 ties
  for (double p : {0.1, 0.37, 0.5, 1e-9, 1.0 - 1.0 / 16777216.0, 1.0 - 1e-9}) {
    CAPTURE(p);
    manual_seed(17);
    const uint64_t stream = rng_state().stream;
    const auto got = dropout_mask({n}, p).to_vector<float>();
    const float pf = static_cast<float>(p);
    const auto t = static_cast<uint32_t>(std::ceil(double(pf) * 16777216.0));
    uint64_t ties = 0;
    int64_t kept = 0, tie_kept = 0, mismatches = 0;
    for (int64_t e = 0; e < n; ++e) {
      const auto ue = static_cast<uint64_t>(e);
      const uint32_t byte = (philox_word(17, stream, 0, ue / 4) >> (8 * (ue % 4))) & 0xFF;
      bool want = byte > (t >> 16);
      if (byte == t >> 16) {
        want = (philox_word(17, stream, 0, (uint64_t{1} << 62) + ties) >> 16) >= (t & 0xFFFF);
        CHECK(want == philox_keep_reference(17, stream, 0, p, ue, ties));
        tie_kept += want;
        ++ties;
      }
      kept += want;
      mismatches += got[static_cast<size_t>(e)] != (want ? 1.0f : 0.0f);
    }
    CHECK(mismatches == 0);
    if (t < (uint32_t{1} << 24)) {
      // 1 - T / 2^24 kept, within 5 standard deviations
      const double q = 1.0 - t / 16777216.0;
      CHECK(std::abs(kept - q * n) <= 5 * std::sqrt(n * q * (1 - q)) + 1);
    } else {
      CHECK(kept == 0);
    }
    if (p == 0.1 || p == 0.37) {  // T's low 16 bits are not 0: both refinement outcomes met
      CHECK(ties > 100);
      CHECK(tie_kept > 0);
      CHECK(tie_kept < static_cast<int64_t>(ties));
    }
  }
}

// philox_dropout may write over its input: each element must be read before it is written, ties
// included (a tie's value is needed after its run is masked).
TEST_CASE("philox_dropout in place gives what it gives into another buffer") {
  const int64_t n = 70000;  // ~270 ties over several runs of 4096
  for (double p : {0.1, 0.37, 1.0 - 1.0 / 16777216.0}) {
    CAPTURE(p);
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = 1.0f + static_cast<float>(i % 97);
    x[5] = std::numeric_limits<float>::infinity();
    std::vector<float> out(x.size()), in_place = x;
    kernels::philox_dropout(x.data(), out.data(), n, p, 17, 3, 9);
    kernels::philox_dropout(in_place.data(), in_place.data(), n, p, 17, 3, 9);
    CHECK(std::memcmp(out.data(), in_place.data(), out.size() * sizeof(float)) == 0);
    // and what the mask says, element by element
    std::vector<float> keep(x.size());
    kernels::philox_keep_mask(keep.data(), n, p, 17, 3, 9);
    const float scale = static_cast<float>(1.0 / (1.0 - p));
    int64_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = (x[i] * keep[i]) * scale;
      bad += !(want == out[i] || (std::isnan(want) && std::isnan(out[i])));
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("threads not seeded explicitly do not repeat each other's draws") {
  // every new thread's stream started at the same place: 8 threads drew the same numbers
  const int threads = 8, calls = 50;
  std::vector<std::vector<float>> draws(threads * calls);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int c = 0; c < calls; ++c) draws[t * calls + c] = rand({4}).to_vector<float>();
    });
  for (auto& th : pool) th.join();
  CHECK(std::set<std::vector<float>>(draws.begin(), draws.end()).size() == draws.size());

  // a dropout ensemble sampled from many threads: every call gets its own mask
  auto lin = std::make_shared<nn::Linear>(4, 16);
  auto net = std::make_shared<nn::Sequential>(
      std::vector<std::shared_ptr<nn::Module>>{lin, std::make_shared<nn::Dropout>(0.5)});
  TensorDict params = TensorDict::from_modules({net, net, net});
  const Tensor x = ones({2, 4});
  std::vector<std::vector<float>> outs(threads * 25);
  pool.clear();
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int c = 0; c < 25; ++c)
        outs[t * 25 + c] =
            nn::functional_vmap(
                *net, {.params = params, .args = {x}, .randomness = Randomness::Different})
                .tensor()
                .to_vector<float>();
    });
  for (auto& th : pool) th.join();
  CHECK(std::set<std::vector<float>>(outs.begin(), outs.end()).size() == outs.size());
}

TEST_CASE("a thread that calls manual_seed draws reproducibly, whatever other threads do") {
  std::vector<std::vector<float>> seeded(4), other(4);
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t)
    pool.emplace_back([&, t] {
      manual_seed(2024);
      for (int c = 0; c < 3; ++c) {
        auto v = rand({3}).to_vector<float>();
        seeded[t].insert(seeded[t].end(), v.begin(), v.end());
      }
    });
  for (auto& th : pool) th.join();
  for (int t = 1; t < 4; ++t) CHECK(seeded[t] == seeded[0]);
  // the same seed in this thread gives the same draws
  const RngState saved = rng_state();
  manual_seed(2024);
  std::vector<float> here;
  for (int c = 0; c < 3; ++c) {
    auto v = rand({3}).to_vector<float>();
    here.insert(here.end(), v.begin(), v.end());
  }
  set_rng_state(saved);
  CHECK(here == seeded[0]);
}
