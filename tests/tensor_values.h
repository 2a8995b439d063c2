#pragma once
// Helpers shared by the test files that check values: deterministic inputs, an element of a
// tensor, a naive matrix product, and a tensor's values against reference values.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "engine/engine.h"

namespace td::test {

// Deterministic, non-trivial values (no RNG involved).
inline Tensor seq(const Shape& shape, DType dtype = kFloat64, double scale = 0.37) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(scale * static_cast<double>(i) + 0.1);
  return tensor<double>(v, shape).to(dtype);
}

// element (indices) of a contiguous copy
inline double at(const Tensor& t, std::initializer_list<int64_t> idx) {
  Tensor c = t.contiguous().to(kFloat64);
  auto v = c.to_vector<double>();
  int64_t off = 0, k = 0;
  for (int64_t i : idx) off = off * t.size(k++) + i;
  return v[off];
}

// C[M,N] = A[M,K] @ B[K,N] on row-major vectors.
inline std::vector<double> ref_mm(const std::vector<double>& a, const std::vector<double>& b,
                                  int64_t m, int64_t k, int64_t n) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) c[i * n + j] += a[i * k + p] * b[p * n + j];
  return c;
}

// t's values equal ref's within a relative tol (doctest's Approx, whose scale is 1 by default).
inline void check_close(const Tensor& t, const std::vector<double>& ref, double tol = 1e-5) {
  std::vector<double> got = t.to_vector<double>();
  REQUIRE(got.size() == ref.size());
  for (size_t i = 0; i < ref.size(); ++i)
    CHECK(got[i] == doctest::Approx(ref[i]).epsilon(tol).scale(1.0));
}

}  // namespace td::test
