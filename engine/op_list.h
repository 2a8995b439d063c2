#pragma once
// The one list of ops. Every line X(name, Family, ...) gives OpId::name, its printed name, its
// kernel entry `std::vector<Tensor> name_impl(std::span<const Tensor>, const OpAttrs&)` (declared
// in engine/ops/impls.h, defined in engine/ops/<family>.cpp: elementwise.cpp for Unary, Binary
// and Ternary, views.cpp for View and Copy) and its batching rule, which
// vmap/rules/<family>_rules.cpp registers for the whole family, or per op where its ops differ
// (binary_rules.cpp serves Ternary and Rnn too, reduce_rules.cpp Softmax).
// The comments name the attribute struct (engine/op_attrs.h) each op takes; none: NoAttrs.
//
// The element-wise lists carry more columns, from which everything else of theirs is generated:
// the kernel kind (kernels::UnaryKind / BinaryKind), the public functions of engine/ops.h, the
// _impl with its dtype rule. Adding one is a line here and its case in the kernel's switch.
//
// Unary: X(name, Unary, kernel kind, dtype rule) -> Tensor name(const Tensor&). Dtype rules:
//   Float    integer and bool inputs compute in float32 (exp, log, ...)
//   Signed   keeps the dtype; bool refused, as in torch
//   Keep     keeps the dtype, bool included
//   Bool     a bool result
//   Bitwise  bool and int64 only, dtype kept
//   Floating floating only: integer and bool inputs refused, as torch's silu, mish, ...
//   NoBool   as Float, but bool refused (torch's softsign, tanhshrink)
// clang-format off
#define TD_UNARY_OPS(X)                                                                      \
  X(neg, Unary, Neg, Signed) X(abs, Unary, Abs, Signed) X(exp, Unary, Exp, Float)            \
  X(log, Unary, Log, Float) X(sqrt, Unary, Sqrt, Float) X(rsqrt, Unary, Rsqrt, Float)        \
  X(tanh, Unary, Tanh, Float) X(sigmoid, Unary, Sigmoid, Float) X(relu, Unary, Relu, Signed) \
  X(logical_not, Unary, LogicalNot, Bool) X(bitwise_not, Unary, BitNot, Bitwise)             \
  X(sin, Unary, Sin, Float) X(cos, Unary, Cos, Float) X(log1p, Unary, Log1p, Float)          \
  X(expm1, Unary, Expm1, Float) X(reciprocal, Unary, Reciprocal, Float)                      \
  X(floor, Unary, Floor, Signed) X(ceil, Unary, Ceil, Signed) X(round, Unary, Round, Signed) \
  X(sign, Unary, Sign, Keep)                                                                \
  X(silu, Unary, Silu, Floating) X(selu, Unary, Selu, Floating) X(mish, Unary, Mish, Floating) \
  X(hardswish, Unary, Hardswish, Floating) X(hardsigmoid, Unary, Hardsigmoid, Floating)     \
  X(logsigmoid, Unary, LogSigmoid, Floating) X(relu6, Unary, Relu6, Signed)                  \
  X(softsign, Unary, Softsign, NoBool) X(tanhshrink, Unary, Tanhshrink, NoBool)

// Binary, broadcasting: X(name, Binary, kernel kind, dtype rule, public functions).
// Dtype rules (after type promotion):
//   Promote  the promoted dtype
//   Sub      as Promote; a bool operand refused, as in torch
//   Div      true division: integers give float32
//   Pow      bool refused
//   Mod      bool refused; an integer divisor holding 0 is a RuntimeError
//   Compare  a bool result
//   Bitwise  bool and int64 only
// Public functions: Scalar: name(Tensor, Tensor) and name(Tensor, Scalar); Own: name(Tensor,
// Tensor), its scalar overloads written by hand (elementwise.cpp); Plain: name(Tensor, Tensor)
// only, the operands as given (no 0-d narrowing).
#define TD_BINARY_OPS(X)                                                                     \
  X(add, Binary, Add, Promote, Scalar) X(sub, Binary, Sub, Sub, Own)                         \
  X(mul, Binary, Mul, Promote, Scalar) X(div, Binary, Div, Div, Scalar)                      \
  X(pow, Binary, Pow, Pow, Own) X(maximum, Binary, Maximum, Promote, Scalar)                 \
  X(minimum, Binary, Minimum, Promote, Scalar) X(eq, Binary, Eq, Compare, Scalar)            \
  X(ne, Binary, Ne, Compare, Scalar) X(lt, Binary, Lt, Compare, Scalar)                      \
  X(le, Binary, Le, Compare, Scalar) X(gt, Binary, Gt, Compare, Scalar)                      \
  X(ge, Binary, Ge, Compare, Scalar) X(logical_and, Binary, LogicalAnd, Compare, Plain)      \
  X(logical_or, Binary, LogicalOr, Compare, Plain) X(bitwise_and, Binary, BitAnd, Bitwise, Plain) \
  X(bitwise_or, Binary, BitOr, Bitwise, Plain) X(bitwise_xor, Binary, BitXor, Bitwise, Plain) \
  X(remainder, Binary, Remainder, Mod, Scalar) X(fmod, Binary, Fmod, Mod, Scalar)

#define TD_OPS(X)                                                                      \
  /* Random: RandomAttrs (rand, randn, dropout_mask, dropout, randperm: shape {n},     \
     int64); bernoulli(p) none */                                                      \
  X(rand, Random) X(randn, Random) X(bernoulli, Random) X(dropout, Random)             \
  X(dropout_mask, Random) X(randperm, Random)                                          \
  /* Unary ops with attributes, their _impl and public function written by hand:       \
     gelu GeluAttrs; clamp ClampAttrs; to_dtype CastAttrs */                           \
  TD_UNARY_OPS(X) X(gelu, Unary) X(clamp, Unary) X(to_dtype, Unary)                        \
  /* Activations with scalar arguments: ActivationAttrs */                             \
  X(leaky_relu, Unary) X(elu, Unary) X(celu, Unary) X(softplus, Unary) X(hardtanh, Unary)  \
  TD_BINARY_OPS(X)                                                                         \
  X(where, Ternary)                                                                    \
  X(masked_fill, Ternary) /* masked_fill(x, mask, value) */                             \
  /* Reduce: ReduceAttrs */                                                           \
  X(sum, Reduce) X(mean, Reduce) X(var, Reduce) X(std, Reduce) X(amax, Reduce)          \
  X(amin, Reduce) X(argmax, Reduce) X(argmin, Reduce)                                   \
  X(logsumexp, Reduce)                                                                 \
  /* Softmax: DimAttrs */                                                              \
  X(softmax, Softmax) X(log_softmax, Softmax)                                           \
  /* Scan: ScanAttrs */                                                               \
  X(cumsum, Scan) X(cumprod, Scan)                                                      \
  /* Sort: sort(x) -> [values, indices], argsort(x) -> [indices] SortAttrs;           \
     topk(x) -> [values, indices] TopkAttrs */                                         \
  X(sort, Sort) X(argsort, Sort) X(topk, Sort)                                          \
  /* Linalg: matmul; linear(x, w, b?) LinearAttrs */                                  \
  X(matmul, Linalg) X(linear, Linalg)                                                   \
  /* Norm: layer_norm(x, w?, b?) LayerNormAttrs;                                      \
     batch_norm(x, running_mean?, running_var?, w?, b?) BatchNormAttrs */              \
  X(layer_norm, Norm) X(batch_norm, Norm)                                               \
  /* Conv: conv2d(x, w, b?[, rm, rv, bn_w?, bn_b?]) ConvAttrs */                       \
  X(conv2d, Conv)                                                                      \
  /* Pool: PoolAttrs */                                                               \
  X(max_pool2d, Pool) X(avg_pool2d, Pool)                                               \
  /* Embedding: embedding(indices, weight) */                                          \
  X(embedding, Embedding)                                                              \
  /* Rnn, a recurrent step's point-wise part: lstm_pointwise(gates_x, gates_h, c) ->   \
     [h, c]; gru_pointwise(gates_x, gates_h, h) -> [h] */                              \
  X(lstm_pointwise, Rnn) X(gru_pointwise, Rnn)                                         \
  /* View: view/reshape/expand SizesAttrs; permute, squeeze DimsAttrs; transpose      \
     TransposeAttrs; unsqueeze DimAttrs; select SelectAttrs; slice SliceAttrs;          \
     flatten FlattenAttrs; unflatten UnflattenAttrs */                                 \
  X(view, View) X(reshape, View) X(permute, View) X(transpose, View)                    \
  X(unsqueeze, View) X(squeeze, View) X(expand, View) X(select, View) X(slice, View)    \
  X(flatten, View) X(unflatten, View)                                                   \
  /* Copy */                                                                           \
  X(contiguous, Copy) X(clone, Copy)                                                    \
  /* Join and split: cat/stack(tensors...) DimAttrs; split SplitAttrs */              \
  X(cat, Join) X(stack, Join) X(split, Join)                                            \
  /* Index: index_select(x, index), gather(x, index) DimAttrs; scatter(x, index, src), \
     scatter_add, scatter_reduce ScatterAttrs */                                       \
  X(index_select, Index) X(gather, Index) X(scatter, Index) X(scatter_add, Index)       \
  X(scatter_reduce, Index)                                                              \
  /* InPlace: self is input 0 and is returned; fill_ FillAttrs; scatter_(self, index,   \
     src), scatter_add_, scatter_reduce_ ScatterAttrs (their own rules) */             \
  X(add_, InPlace) X(mul_, InPlace) X(copy_, InPlace) X(fill_, InPlace)                 \
  X(scatter_, InPlace) X(scatter_add_, InPlace) X(scatter_reduce_, InPlace)
// clang-format on

#define TD_OP_FAMILIES(X)                                                                  \
  X(Random) X(Unary) X(Binary) X(Ternary) X(Reduce) X(Softmax) X(Scan) X(Sort) X(Linalg)  \
  X(Norm) X(Conv) X(Pool) X(Embedding) X(Rnn) X(View) X(Copy) X(Join) X(Index) X(InPlace) \
  X(Custom)
