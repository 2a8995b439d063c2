#pragma once
// Kernel entries of the built-in ops, one per line of op_list.h.
#include <span>
#include <vector>

#include "engine/dispatch.h"
#include "engine/ops/checks.h"

namespace td::impl {
#define TD_X(name, family, ...) \
  std::vector<Tensor> name##_impl(std::span<const Tensor> in, const OpAttrs& attrs);
TD_OPS(TD_X)
#undef TD_X

}  // namespace td::impl
