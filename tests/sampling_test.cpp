// Sampling: randperm, randint, normal, uniform_/normal_, multinomial, categorical. Their
// distributions (frequencies against the probabilities, worked out here), their errors, and that
// a set draws the same numbers under vmap batched, chunked or looped.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/kernels/kernels.h"
#include "engine/random.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {

// counts of each value 0..k-1 in v
std::vector<double> frequencies(const std::vector<int64_t>& v, int64_t k) {
  std::vector<double> f(static_cast<size_t>(k), 0);
  for (int64_t x : v) {
    REQUIRE(x >= 0);
    REQUIRE(x < k);
    f[static_cast<size_t>(x)] += 1;
  }
  for (double& x : f) x /= static_cast<double>(v.size());
  return f;
}

// |f - p| within 5 standard errors of a frequency over n draws
void check_frequencies(const std::vector<double>& f, const std::vector<double>& p, int64_t n) {
  REQUIRE(f.size() == p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    INFO("category ", i, ": frequency ", f[i], ", probability ", p[i]);
    const double se = std::sqrt(p[i] * (1 - p[i]) / static_cast<double>(n));
    CHECK(std::abs(f[i] - p[i]) <= 5 * se + 1e-12);
  }
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("randperm: a permutation, the documented Fisher-Yates draws, uniform first place") {
  manual_seed(11);
  for (int64_t n : {0, 1, 2, 5, 1000}) {
    auto v = randperm(n).to_vector<int64_t>();
    std::vector<int64_t> sorted = v, want(static_cast<size_t>(n));
    std::sort(sorted.begin(), sorted.end());
    std::iota(want.begin(), want.end(), 0);
    CHECK(sorted == want);
  }
  // the kernel against Fisher-Yates on the scalar Philox: swap t takes words 2t, 2t + 1
  const int64_t n = 37;
  std::vector<int64_t> got(n), ref(n);
  kernels::philox_permutation(got.data(), n, 99, 4, 17);
  std::iota(ref.begin(), ref.end(), 0);
  for (int64_t t = 0; t + 1 < n; ++t) {
    const uint64_t u = (uint64_t{philox_word(99, 4, 17, 2 * t)} << 32) |
                       philox_word(99, 4, 17, 2 * t + 1);
    const int64_t i = n - 1 - t;
    const auto j = static_cast<int64_t>((static_cast<unsigned __int128>(u) * (i + 1)) >> 64);
    std::swap(ref[i], ref[j]);
  }
  CHECK(got == ref);
  // every element equally likely in front
  std::vector<int64_t> firsts;
  for (int k = 0; k < 8000; ++k) firsts.push_back(randperm(4).to_vector<int64_t>()[0]);
  check_frequencies(frequencies(firsts, 4), {0.25, 0.25, 0.25, 0.25}, 8000);
  CHECK(randperm(3, kFloat32).dtype() == kFloat32);
  CHECK(error_of([] { randperm(-1); }).find("[randperm]") != std::string::npos);
}

TEST_CASE("randint: [low, high), every value reached, the dtype asked for") {
  manual_seed(3);
  auto v = randint(-2, 3, {20000}).to_vector<int64_t>();
  for (int64_t& x : v) x += 2;
  check_frequencies(frequencies(v, 5), std::vector<double>(5, 0.2), 20000);
  CHECK(randint(7, {2, 3}).shape() == Shape{2, 3});
  CHECK(randint(7, {2}).dtype() == kInt64);
  Tensor f = randint(0, 4, {100}, kFloat32);
  CHECK(f.dtype() == kFloat32);
  for (float x : f.to_vector<float>()) CHECK(x == std::floor(x));
  // a range past float32's integers
  const int64_t big = int64_t{1} << 40;
  for (int64_t x : randint(big, big + 3, {50}).to_vector<int64_t>()) {
    CHECK(x >= big);
    CHECK(x < big + 3);
  }
  const std::string e = error_of([] { randint(3, 3, {2}); });
  CHECK(e.find("[randint]") != std::string::npos);
  CHECK(e.find("low=3") != std::string::npos);
}

TEST_CASE("normal with tensor mean and std: broadcast, moments, errors; uniform_ and normal_") {
  manual_seed(8);
  Tensor mean = tensor({-5.0f, 0.0f, 10.0f}, {3, 1});
  Tensor sd = tensor({0.5f, 2.0f}, {1, 2});
  Tensor draws = normal(mean.expand({3, 2}).unsqueeze(0).expand({20000, 3, 2}),
                        sd.expand({3, 2}));
  REQUIRE(draws.shape() == Shape{20000, 3, 2});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      auto v = draws.select(1, i).select(1, j).contiguous().to_vector<float>();
      double m = 0, s = 0;
      for (float x : v) m += x;
      m /= static_cast<double>(v.size());
      for (float x : v) s += (x - m) * (x - m);
      s = std::sqrt(s / static_cast<double>(v.size() - 1));
      const double want_m = std::vector<double>{-5, 0, 10}[i], want_s = j == 0 ? 0.5 : 2.0;
      CHECK(std::abs(m - want_m) < 5 * want_s / std::sqrt(20000.0));
      CHECK(std::abs(s - want_s) < 0.03 * want_s);
    }
  CHECK(normal(mean, sd).shape() == Shape{3, 2});
  CHECK(normal(1.0, 0.0, {4}).to_vector<float>() == std::vector<float>(4, 1.0f));
  CHECK(normal(zeros({3}, kFloat64), 1.0).dtype() == kFloat64);
  CHECK(error_of([&] { normal(mean, tensor({1.0f, -1.0f})); }).find("std of shape [2]") !=
        std::string::npos);
  CHECK(error_of([] { normal(0.0, -1.0, {2}); }).find("[normal]") != std::string::npos);
  CHECK(error_of([] { normal(zeros({2}, kInt64), 1.0); }).find("floating") != std::string::npos);

  Tensor u = zeros({10000});
  uniform_(u, -3.0, 1.0);
  auto uv = u.to_vector<float>();
  CHECK(*std::min_element(uv.begin(), uv.end()) >= -3.0f);
  CHECK(*std::max_element(uv.begin(), uv.end()) < 1.0f);
  CHECK(std::abs(std::accumulate(uv.begin(), uv.end(), 0.0) / 10000 + 1.0) < 0.05);
  Tensor g = zeros({10000}, kFloat64);
  CHECK(&normal_(g, 3.0, 0.5) == &g);
  auto gv = g.to_vector<double>();
  CHECK(std::abs(std::accumulate(gv.begin(), gv.end(), 0.0) / 10000 - 3.0) < 0.03);
  CHECK(error_of([&] { uniform_(u, 1.0, 0.0); }).find("[uniform_]") != std::string::npos);
  Tensor ints = zeros({2}, kInt64);
  CHECK(error_of([&] { normal_(ints); }).find("[normal_]") != std::string::npos);
}

TEST_CASE("multinomial with replacement: frequencies match the weights, zeros never drawn") {
  manual_seed(21);
  Tensor w = tensor({1.0f, 2.0f, 0.0f, 7.0f});  // unnormalised
  Tensor s = multinomial(w, 20000, true);
  REQUIRE(s.shape() == Shape{20000});
  CHECK(s.dtype() == kInt64);
  check_frequencies(frequencies(s.to_vector<int64_t>(), 4), {0.1, 0.2, 0.0, 0.7}, 20000);
  // rows are independent distributions
  Tensor rows = tensor({0.0f, 0.0f, 1.0f, 0.5f, 0.5f, 0.0f}, {2, 3});
  Tensor r = multinomial(rows, 3000, true);
  REQUIRE(r.shape() == Shape{2, 3000});
  for (int64_t x : r.select(0, 0).to_vector<int64_t>()) CHECK(x == 2);
  check_frequencies(frequencies(r.select(0, 1).contiguous().to_vector<int64_t>(), 3),
                    {0.5, 0.5, 0.0}, 3000);
}

TEST_CASE("multinomial without replacement: distinct draws in the order of successive picks") {
  manual_seed(22);
  const std::vector<double> p = {0.5, 0.3, 0.2};
  Tensor probs = tensor({0.5f, 0.3f, 0.2f}).unsqueeze(0).expand({20000, 3});
  Tensor s = multinomial(probs, 2);
  REQUIRE(s.shape() == Shape{20000, 2});
  std::vector<int64_t> first, second;
  for (int64_t i = 0; i < 20000; ++i) {
    auto row = s.select(0, i).to_vector<int64_t>();
    CHECK(row[0] != row[1]);
    first.push_back(row[0]);
    second.push_back(row[1]);
  }
  // P(second = j) = sum over i != j of p_i p_j / (1 - p_i)
  std::vector<double> p2(3, 0);
  for (size_t i = 0; i < 3; ++i)
    for (size_t j = 0; j < 3; ++j)
      if (i != j) p2[j] += p[i] * p[j] / (1 - p[i]);
  check_frequencies(frequencies(first, 3), p, 20000);
  check_frequencies(frequencies(second, 3), p2, 20000);
  // all of the non-zero categories, never a zero one
  auto all = multinomial(tensor({0.0f, 3.0f, 0.0f, 1.0f}), 2).to_vector<int64_t>();
  std::sort(all.begin(), all.end());
  CHECK(all == std::vector<int64_t>{1, 3});
}

TEST_CASE("multinomial and categorical refuse bad distributions, naming the shapes") {
  auto msg = [](auto f) { return error_of(f); };
  CHECK(msg([] { multinomial(tensor({1.0f, -1.0f}), 1); }).find("value < 0") != std::string::npos);
  CHECK(msg([] { multinomial(tensor({1.0f, NAN}), 1); }).find("NaN") != std::string::npos);
  CHECK(msg([] { multinomial(zeros({2, 3}), 1); }).find("sums to 0") != std::string::npos);
  CHECK(msg([] { multinomial(ones({3}), 4); }).find("without replacement") != std::string::npos);
  CHECK(msg([] { multinomial(tensor({1.0f, 0.0f, 1.0f}), 3); }).find("fewer than 3") !=
        std::string::npos);
  CHECK(msg([] { multinomial(ones({2, 2, 2}), 1); }).find("shape [2, 2, 2]") != std::string::npos);
  CHECK(msg([] { multinomial(ones({3}), 0); }).find("num_samples") != std::string::npos);
  CHECK(msg([] { multinomial(ones({3}, kInt64), 1); }).find("floating") != std::string::npos);
  CHECK(msg([] { multinomial(ones({3}), 5, true); }).empty());
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(msg([&] { categorical(tensor({-inf, -inf})); }).find("all -inf") != std::string::npos);
  CHECK(msg([] { categorical(tensor({0.0f, NAN})); }).find("[categorical]") != std::string::npos);
  CHECK(msg([] { categorical(scalar_tensor(1.0)); }).find("[categorical]") != std::string::npos);
}

TEST_CASE("categorical: frequencies are softmax(logits), -inf never drawn") {
  manual_seed(5);
  const float inf = std::numeric_limits<float>::infinity();
  Tensor logits = tensor({0.0f, std::log(3.0f), -inf, std::log(6.0f)});
  Tensor s = categorical(logits.unsqueeze(0).expand({20000, 4}));
  REQUIRE(s.shape() == Shape{20000});
  check_frequencies(frequencies(s.to_vector<int64_t>(), 4), {0.1, 0.3, 0.0, 0.6}, 20000);
  CHECK(categorical(logits).dim() == 0);
}

TEST_CASE("sampling under vmap: each set draws the same numbers batched, chunked or looped") {
  const int64_t sets = 5;
  // per-set weights, so that the sets' distributions differ too
  Tensor probs = add(rand_like(zeros({sets, 6})), 0.05);
  auto per_set = [](const Tensor& p) {
    return std::vector<Tensor>{multinomial(p, 3), multinomial(p, 4, true), categorical(p),
                               randperm(7), randint(0, 9, {3}), normal(p, 1.0)};
  };
  auto run = [&](std::optional<int64_t> chunk, Randomness r) {
    manual_seed(77);
    return vmap([&](Tensor p) { return per_set(p); }, {.randomness = r, .chunk_size = chunk})(
        probs);
  };
  std::vector<Tensor> ref = run(std::nullopt, Randomness::Different);
  for (std::optional<int64_t> c : {std::optional<int64_t>(1), std::optional<int64_t>(2)}) {
    std::vector<Tensor> got = run(c, Randomness::Different);
    for (size_t k = 0; k < 6; ++k) CHECK(same_bytes(got[k], ref[k]));
  }
  // the loop: set i with its key, on the same streams
  for (int64_t i = 0; i < sets; ++i) {
    set_rng_state({.seed = 77, .stream = 0, .set_key = combine_set_key(0, uint64_t(i))});
    auto one = per_set(probs.select(0, i));
    for (size_t k = 0; k < 6; ++k) {
      INFO("set ", i, ", draw ", k);
      CHECK(same_bytes(one[k], ref[k].select(0, i).contiguous()));
    }
  }
  // Same: every set the draws of the unbatched call (randperm and randint do not depend on p)
  std::vector<Tensor> same = run(std::nullopt, Randomness::Same);
  for (size_t k : {size_t{3}, size_t{4}})
    for (int64_t i = 1; i < sets; ++i)
      CHECK(same_bytes(same[k].select(0, i), same[k].select(0, 0)));
  CHECK(error_of([&] { run(std::nullopt, Randomness::Error); }).find("randomness='error'") !=
        std::string::npos);
}
