// softmax and log_softmax against their formulas and hand values, on long and strided rows and
// rows holding NaN or -inf; errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/engine.h"
#include "tests/test_util.h"

using namespace td;
using namespace td::test;

TEST_CASE("softmax and log_softmax") {
  Tensor x = tensor({1.f, 2.f, 3.f, 0.f, 0.f, 0.f}, {2, 3});
  auto s = softmax(x, 1).to_vector<float>();
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  CHECK(s[0] == doctest::Approx(std::exp(1.0) / z));
  CHECK(s[2] == doctest::Approx(std::exp(3.0) / z));
  CHECK(s[4] == doctest::Approx(1.0 / 3));
  auto ls = log_softmax(x, -1).to_vector<float>();
  CHECK(ls[1] == doctest::Approx(2.0 - std::log(z)));
  auto s0 = softmax(x, 0).to_vector<float>();
  CHECK(s0[0] == doctest::Approx(std::exp(1.0) / (std::exp(1.0) + 1)));
  CHECK(s0[3] == doctest::Approx(1 / (std::exp(1.0) + 1)));
  // stable for huge inputs
  auto big = softmax(tensor({1000.f, 1000.f}), 0).to_vector<float>();
  CHECK(big[0] == doctest::Approx(0.5));
  auto lbig = log_softmax(tensor({1000.f, 0.f}), 0).to_vector<float>();
  CHECK(lbig[0] == doctest::Approx(0.0));
  CHECK(lbig[1] == doctest::Approx(-1000.0));
  // transposed input
  auto st = softmax(x.t(), 0).to_vector<float>();  // [3, 2], columns are x's rows
  CHECK(st[0] == doctest::Approx(std::exp(1.0) / z));
  CHECK(st[1] == doctest::Approx(1.0 / 3));
  CHECK(softmax(tensor<double>({0.0, 0.0}), 0).dtype() == kFloat64);
  CHECK(softmax(scalar_tensor(3.0), 0).item<float>() == 1.f);
  CHECK_THROWS_AS(softmax(tensor<int64_t>({1, 2}), 0), TypeError);
  check_throws_naming_op<TypeError>([] { log_softmax(tensor<int64_t>({1}), 0); }, "log_softmax");
  CHECK_THROWS_AS(softmax(x, 2), IndexError);
}

TEST_CASE("softmax and log_softmax on long rows, strided rows, NaN and -inf rows") {
  // Rows of 1, 16, 37 and 70 values reach the vector loops and the padded tail; dim 0 of the
  // [n, 3] input makes strided rows. Each row is checked against a loop in double.
  for (DType dt : {kFloat32, kFloat64}) {
    const double tol = dt == kFloat32 ? 1e-6 : 1e-13;
    for (int64_t n : {1, 16, 37, 70}) {
      CAPTURE(n);
      std::vector<double> v(n * 3);
      for (int64_t i = 0; i < n * 3; ++i) v[i] = std::sin(0.7 * i) * 20.0;
      Tensor x = tensor(v, {n, 3}).to(dt);
      for (bool log : {false, true})
        for (int64_t dim : {0, 1}) {
          CAPTURE(log);
          CAPTURE(dim);
          Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
          auto yv = y.to_vector<double>();
          const int64_t len = dim == 0 ? n : 3, rows = dim == 0 ? 3 : n;
          for (int64_t r = 0; r < rows; ++r) {
            auto at = [&](int64_t k) { return dim == 0 ? k * 3 + r : r * 3 + k; };
            double mx = -INFINITY, z = 0;
            for (int64_t k = 0; k < len; ++k) mx = std::max(mx, v[at(k)]);
            for (int64_t k = 0; k < len; ++k) z += std::exp(v[at(k)] - mx);
            for (int64_t k = 0; k < len; ++k) {
              const double want = log ? v[at(k)] - mx - std::log(z) : std::exp(v[at(k)] - mx) / z;
              CHECK(yv[at(k)] == doctest::Approx(want).epsilon(tol).scale(log ? 20 : 1));
            }
          }
        }
    }
  }
  // A NaN makes its whole row NaN; a row of -inf is NaN too (0 / 0), as torch's
  std::vector<float> v(2 * 37, 1.f);
  v[30] = std::nanf("");
  for (int64_t i = 37; i < 74; ++i) v[i] = -INFINITY;
  auto y = softmax(tensor(v, {2, 37}), 1).to_vector<float>();
  for (float f : y) CHECK(std::isnan(f));
}

// Contiguous rows run several at a time: a row's bits are those it has alone, or strided, and
// its values those of a double loop, for row counts that leave a partial group.
TEST_CASE("softmax: a row's bits do not depend on its neighbours or its layout") {
  for (DType dt : {kFloat32, kFloat64})
    for (int64_t n : {1, 3, 17, 33, 100})
      for (int64_t rows : {1, 5, 13, 20})
        for (bool log : {false, true}) {
          CAPTURE(n);
          CAPTURE(rows);
          CAPTURE(log);
          std::vector<double> v(static_cast<size_t>(rows * n));
          for (size_t i = 0; i < v.size(); ++i)
            v[i] = 4.0 * std::sin(0.37 * static_cast<double>(i));
          const Tensor x = tensor<double>(v, {rows, n}).to(dt);
          auto f = [&](const Tensor& t) { return log ? log_softmax(t, -1) : softmax(t, -1); };
          const Tensor all = f(x);
          const Tensor strided = f(x.t().contiguous().t());
          CHECK(equal(strided, all));
          const auto got = all.to(kFloat64).to_vector<double>();
          for (int64_t i = 0; i < rows; ++i) {
            CHECK(equal(f(x.slice(0, i, i + 1)), all.slice(0, i, i + 1)));
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < n; ++j) mx = std::max(mx, v[i * n + j]);
            for (int64_t j = 0; j < n; ++j) sum += std::exp(v[i * n + j] - mx);
            for (int64_t j = 0; j < n; ++j) {
              const double want =
                  log ? v[i * n + j] - mx - std::log(sum) : std::exp(v[i * n + j] - mx) / sum;
              CHECK(std::abs(got[i * n + j] - want) <= 1e-6 * (1.0 + std::abs(want)));
            }
          }
        }
}
