#pragma once
// Parameter initialisation shared by td's modules.
#include "engine/ops.h"

namespace td::nn {

// U(-bound, bound) from the seeded generator (torch.nn.init.uniform_).
inline Tensor uniform_init(const Shape& shape, double bound) {
  return rand(shape) * (2 * bound) - bound;
}

}  // namespace td::nn
