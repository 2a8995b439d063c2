#pragma once
// The one list of ops. Each entry X(name, Family) gives:
//   - OpId::name and its printed name,
//   - the kernel entry `std::vector<Tensor> name_impl(std::span<const Tensor>, const OpAttrs&)`
//     (declared in engine/ops/impls.h, defined in engine/ops/<family>.cpp),
//   - a slot in the batching-rule table that vmap/ fills (vmap/rules/<family>_rules.cpp).
// Adding an op: a line here, its _impl, its public function in engine/ops.h, its rule.
//
// The OpAttrs fields each family reads are noted beside it.

// clang-format off
#define TD_OPS(X)                                                                      \
  /* Random: shape = sizes, dtype; bernoulli(p); dropout alpha = p, training;          \
     dropout_mask shape = sizes, alpha = p */                                          \
  X(rand, Random) X(randn, Random) X(bernoulli, Random) X(dropout, Random)             \
  X(dropout_mask, Random)                                                              \
  /* Unary: gelu flag = tanh approx; clamp alpha/beta + has_min/has_max; to_dtype */   \
  X(neg, Unary) X(abs, Unary) X(exp, Unary) X(log, Unary) X(sqrt, Unary)                \
  X(rsqrt, Unary) X(tanh, Unary) X(sigmoid, Unary) X(relu, Unary) X(gelu, Unary)        \
  X(logical_not, Unary) X(bitwise_not, Unary) X(clamp, Unary) X(to_dtype, Unary)        \
  X(sin, Unary) X(cos, Unary) X(log1p, Unary) X(expm1, Unary) X(reciprocal, Unary)      \
  X(floor, Unary) X(ceil, Unary) X(round, Unary) X(sign, Unary)                         \
  /* Binary, broadcasting */                                                           \
  X(add, Binary) X(sub, Binary) X(mul, Binary) X(div, Binary) X(pow, Binary)            \
  X(maximum, Binary) X(minimum, Binary) X(eq, Binary) X(ne, Binary) X(lt, Binary)       \
  X(le, Binary) X(gt, Binary) X(ge, Binary) X(logical_and, Binary) X(logical_or, Binary) \
  X(bitwise_and, Binary) X(bitwise_or, Binary) X(bitwise_xor, Binary)                 \
  X(remainder, Binary) X(fmod, Binary)                                                 \
  X(where, Ternary)                                                                    \
  /* Reduce: dims (empty = all), keepdim, flag = unbiased (var, std) */                \
  X(sum, Reduce) X(mean, Reduce) X(var, Reduce) X(std, Reduce) X(amax, Reduce)          \
  X(amin, Reduce) X(argmax, Reduce) X(argmin, Reduce)                                   \
  /* Softmax: dim */                                                                   \
  X(softmax, Softmax) X(log_softmax, Softmax)                                           \
  /* Linalg: linear(x, w, b?) */                                                       \
  X(matmul, Linalg) X(linear, Linalg)                                                   \
  /* Norm: layer_norm(x, w?, b?) sizes = normalized_shape, alpha = eps; flag: w and b   \
     are [sets, *sizes] for x [sets, ...], each set's rows with its own;                \
     batch_norm(x, running_mean?, running_var?, w?, b?) training, alpha = momentum,     \
     beta = eps */                                                                     \
  X(layer_norm, Norm) X(batch_norm, Norm)                                               \
  /* Conv: conv2d(x, w, b?) stride, padding, dilation, groups */                       \
  X(conv2d, Conv)                                                                      \
  /* Pool: sizes = kernel, stride, padding, flag = ceil_mode; max: dilation;           \
     avg: count_include_pad, divisor */                                                \
  X(max_pool2d, Pool) X(avg_pool2d, Pool)                                               \
  /* Embedding: embedding(indices, weight) */                                          \
  X(embedding, Embedding)                                                              \
  /* View: view/reshape/expand sizes; permute dims; transpose dim,dim2; unsqueeze,     \
     select dim + start(index); squeeze dims (empty = all size-1); slice dim, start,    \
     end, step; flatten dim..dim2; unflatten dim, sizes */                              \
  X(view, View) X(reshape, View) X(permute, View) X(transpose, View)                    \
  X(unsqueeze, View) X(squeeze, View) X(expand, View) X(select, View) X(slice, View)    \
  X(flatten, View) X(unflatten, View)                                                   \
  /* Copy */                                                                           \
  X(contiguous, Copy) X(clone, Copy)                                                    \
  /* Join and split: cat/stack(tensors...) dim; split dim, sizes (section sizes) */    \
  X(cat, Join) X(stack, Join) X(split, Join)                                            \
  /* Index: index_select(x, index) dim; gather(x, index) dim */                        \
  X(index_select, Index) X(gather, Index)                                               \
  /* InPlace: self is input 0 and is returned; fill_ alpha = value */                  \
  X(add_, InPlace) X(mul_, InPlace) X(copy_, InPlace) X(fill_, InPlace)
// clang-format on

#define TD_OP_FAMILIES(X)                                                                 \
  X(Random) X(Unary) X(Binary) X(Ternary) X(Reduce) X(Softmax) X(Linalg) X(Norm) X(Conv) \
  X(Pool) X(Embedding) X(View) X(Copy) X(Join) X(Index) X(InPlace) X(Custom)
