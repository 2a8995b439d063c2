#pragma once
// Helpers shared by the module tests against PyTorch: a golden file of tests/data/modules/ (written
// by tests/golden/make_modules_golden.py) and the closeness a module's output is checked to.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "modules/tensordict.h"

namespace td::test {

inline TensorDict golden(const std::string& name) {
  return TensorDict::load_safetensors(std::string(TD_TEST_DATA_DIR) + "/modules/" + name +
                                      ".safetensors");
}

// |got - want| <= 1e-5 * |want| + 1e-6 everywhere, with equal shapes.
inline void check_close(const Tensor& got, const Tensor& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  auto g = got.to(kFloat64).to_vector<double>();
  auto w = want.to(kFloat64).to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i)
    worst = std::max(worst, std::abs(g[i] - w[i]) - 1e-5 * std::abs(w[i]));
  CHECK(worst <= 1e-6);
}

}  // namespace td::test
