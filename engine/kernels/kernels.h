#pragma once
// The kernels: the loops under the ops, listed in kernels.def. Every file of engine/kernels/ but
// isa.cpp is compiled once per instruction-set level, and the entry points declared here call
// the level chosen for this CPU at start-up (isa.h). Eigen is included only in gemm.cpp, xtensor
// only in copy.cpp; small_gemm.cpp is our own register-blocked GEMM for small float matrices.
#include <array>
#include <cstdint>
#include <string_view>

#include "engine/op_list.h"
#include "engine/tensor.h"

namespace td::kernels {

// The kernels' argument types live apart from the entry points, so that a call inside a level's
// variant finds by argument-dependent lookup no entry point to be ambiguous with.
namespace types {

// The kinds of the element-wise ops of engine/op_list.h (BitNot, Bit*: bool and int64 only;
// Remainder: the divisor's sign, as Python's %; Fmod: the dividend's, as C's fmod; an integer
// divisor is checked for 0 by the op).
enum class UnaryKind {
#define TD_X(name, family, kind, rule) kind,
  TD_UNARY_OPS(TD_X)
#undef TD_X
  Gelu,
  GeluTanh,
  // with two scalar arguments (kernels::activation)
  LeakyRelu,
  Elu,
  Softplus,
  Hardtanh
};
enum class BinaryKind {
#define TD_X(name, family, kind, rule, api) kind,
  TD_BINARY_OPS(TD_X)
#undef TD_X
};
// Comparisons and logical ops: their result is bool.
constexpr bool is_predicate(BinaryKind kind) {
  switch (kind) {
#define TD_X(name, family, k, rule, api) \
  case BinaryKind::k:                    \
    return std::string_view(#rule) == "Compare";
    TD_BINARY_OPS(TD_X)
#undef TD_X
  }
  return false;
}

enum class ReduceKind { Sum, Mean, Var, Std, Amax, Amin, Argmax, Argmin };

// The operands of the product that follows small_gemm_nt's (the next set's), or null where there
// is none or it is the same: prefetched while this product finishes.
struct SmallGemmNext {
  const float* x = nullptr;
  const float* w = nullptr;
  const float* bias = nullptr;
};

// conv2d's geometry: input [n, cin, h, w], weight [cout, cin / groups, kh, kw], output
// [n, cout, oh, ow]; stride, padding and dilation as (rows, columns).
struct ConvGeom {
  int64_t n, cin, h, w, cout, kh, kw, oh, ow, groups;
  std::array<int64_t, 2> stride, pad, dil;
};

// A 2-D pool's geometry: input [n, c, h, w], output [n, c, oh, ow], window k, stride, padding
// and dilation as (rows, columns).
struct PoolGeom {
  int64_t n, c, h, w, oh, ow;
  std::array<int64_t, 2> k, stride, pad, dil;
};

}  // namespace types
using types::BinaryKind;
using types::ConvGeom;
using types::PoolGeom;
using types::is_predicate;
using types::ReduceKind;
using types::SmallGemmNext;
using types::UnaryKind;

// The entry points: each calls the variant of the level this CPU runs (isa.h).
#define TD_KERNEL(ret, name, params, args) ret name params;
#include "engine/kernels/kernels.def"

// The variants, one namespace per level; a kernel file is compiled once per level with TD_ISA
// naming its namespace, and calls the other kernels of its own level directly.
namespace isa_baseline {
#include "engine/kernels/kernels.def"
}
namespace isa_avx2 {
#include "engine/kernels/kernels.def"
}
namespace isa_avx512 {
#include "engine/kernels/kernels.def"
}
namespace isa_native {
#include "engine/kernels/kernels.def"
}
#undef TD_KERNEL

}  // namespace td::kernels
