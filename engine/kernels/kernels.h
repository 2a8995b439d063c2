#pragma once
// The kernels: the loops under the ops, listed in kernels.def. Every file of engine/kernels/ but
// isa.cpp is compiled once per instruction-set level, and the entry points declared here call
// the level chosen for this CPU at start-up (isa.h). Eigen is included only in gemm.cpp, xtensor
// only in copy.cpp; small_gemm.cpp is our own register-blocked GEMM for small float matrices.
#include <array>
#include <cstdint>

#include "engine/tensor.h"

namespace td::kernels {

// The kernels' argument types live apart from the entry points, so that a call inside a level's
// variant finds by argument-dependent lookup no entry point to be ambiguous with.
namespace types {

// BitNot: bool and int64 only
enum class UnaryKind {
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Tanh,
  Sigmoid,
  Relu,
  Gelu,
  GeluTanh,
  LogicalNot,
  BitNot,
  Sin,
  Cos,
  Log1p,
  Expm1,
  Reciprocal,
  Floor,
  Ceil,
  Round,
  Sign
};
// Bit*: bool and int64 only
// Remainder: the divisor's sign (Python's %); Fmod: the dividend's (C's fmod). Integer divisors
// are checked for 0 by the op.
enum class BinaryKind {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Maximum,
  Minimum,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  LogicalAnd,
  LogicalOr,
  BitAnd,
  BitOr,
  BitXor,
  Remainder,
  Fmod
};
// Comparisons and logical ops: their result is bool.
inline bool is_predicate(BinaryKind kind) {
  switch (kind) {
    case BinaryKind::Eq:
    case BinaryKind::Ne:
    case BinaryKind::Lt:
    case BinaryKind::Le:
    case BinaryKind::Gt:
    case BinaryKind::Ge:
    case BinaryKind::LogicalAnd:
    case BinaryKind::LogicalOr:
      return true;
    default:
      return false;
  }
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
