#pragma once
// The argument checks of the ops that their batching rules share: a rule that folds the sets
// into another dim (conv2d into groups, batch_norm into channels, ...) checks the per-set shapes
// with the op's own check first, because the stacked call could accept what a call per set
// refuses. `what` / `kind` name the shapes ("shape", or shape_word() under vmap's replay).
#include <cstdint>
#include <span>

#include "engine/dispatch.h"

namespace td::impl {

// A RuntimeError when a floating `value` does not fit `dtype` (NaN or beyond int64's range for
// int64, a finite value beyond float32's range), as torch's full and fill_ raise.
void check_scalar_fits(const char* op, Scalar value, DType dtype);

// The TypeError of a bool scalar in a subtraction (x - true, true - x, x.sub_(true)), as torch
// raises for a bool tensor operand: the scalar is wrapped in x's dtype, so the tensor check
// does not see it. t is the tensor operand.
void check_sub_scalar(const char* op, const Tensor& t, Scalar s);

// A reduction's dims normalised and sorted (all of them when dims is empty; none for a 0-d
// input, which takes dim 0 / -1 as in torch); a repeated dim is a ValueError. Shared with the
// reductions' vmap rule, which checks a 0-d per-set input's dims with it.
IntList reduce_dims(const char* op, const IntList& dims, int64_t ndim);

// The reductions' checks of their input's (per-set, `what`) shape x and dtype t: the dims (as
// reduce_dims, which it returns), a floating dtype for mean, var and std, no bool for argmax and
// argmin, no reduced dim of size 0 for amax to argmin. Shared with the reductions' vmap rule.
IntList check_reduce(OpId op, const Shape& x, DType t, const IntList& dims, const char* what);

// cumsum's and cumprod's checks of dim and dtype against x's (per-set, `what`) shape and dtype
// t; returns the dtype they scan in. Shared with their vmap rule.
DType check_scan(OpId op, const Shape& x, DType t, const ScanAttrs& a, const char* what);

// The one dim of a scan or sort (sort, argsort) normalised against a (per-set, `what`) shape x
// (0-d: dim 0 or -1), or an IndexError naming op, dim and x.
int64_t check_one_dim(const char* op, const Shape& x, int64_t dim, const char* what);
// topk's checks: dim, and k within [0, size of dim] (an IndexError naming k, the dim and the
// shape); returns the normalised dim. Shared with its vmap rule.
int64_t check_topk(const Shape& x, int64_t k, int64_t dim, const char* what);

// TypeErrors naming op: x must be floating (also on a (per-set, `what`) shape and dtype, as
// softmax's vmap rule checks it); t (when defined), `what` of op, must have x's dtype.
void check_floating(const char* op, const Tensor& x);
void check_floating(const char* op, const Shape& x, DType t, const char* what);
void check_same_dtype(const char* op, const Tensor& x, const Tensor& t, const char* what);

// The GEMM's dtype (matmul, linear): float32 with float64 promotes (td's documented extension),
// but as in torch an integral or bool operand does not mix with a floating one, nor bool with
// int64, and bool alone is refused: TypeErrors naming op, the (per-set, `what`) shapes sa and sb
// and the dtypes. Shared with vmap's matmul rule, whose stacked call would name stacked shapes.
DType gemm_dtype(const char* op, DType a, DType b, const char* what, const Shape& sa,
                 const Shape& sb);

// linear's argument checks on (per-set) shapes and its compute dtype: a ValueError or TypeError
// naming linear, `what` ("shape" or "per-set shape") naming the shapes. Shared with vmap's
// linear rule, which calls the GEMM kernel itself for stacked weights. b: the bias's, or null.
DType check_linear(const char* what, const Shape& x, DType xt, const Shape& w, DType wt,
                   const Shape* b, DType bt);

// The shape checks of layer_norm, batch_norm and a per-channel vector, on shapes or per-set
// shapes (`what`/`kind`: "shape" or "per-set shape"; an absent tensor's shape is null), shared
// with their vmap rules as check_linear is.
void check_layer_norm(const char* what, const Shape& x, const Shape& ns, const Shape* w,
                      const Shape* b);
// In training, batch_norm also needs more than one value per channel (none is fine).
void check_batch_norm(const char* kind, const Shape& x, const Shape* rm, const Shape* rv,
                      const Shape* w, const Shape* b, bool training);
// t (the shape of `what`) must be [c] for an input of shape xs
void check_channels(const char* op, const char* what, const Shape* t, int64_t c, const char* kind,
                    const Shape& xs);

// conv2d's shape checks on x [C, H, W] or [N, C, H, W], weight and bias (null if absent),
// per-set shapes in its vmap rule, which folds the sets into N or the groups.
void check_conv2d(const char* kind, const Shape& x, const Shape& w, const Shape* b,
                  const ConvAttrs& a);

// max/avg_pool2d's checks of their parameters against x [C, H, W] or [N, C, H, W] (with
// dilation: max_pool2d), per-set shapes in their vmap rule, which folds the sets into N.
void check_pool2d(const char* op, const char* kind, const Shape& x, const PoolAttrs& a,
                  bool with_dilation);

// The IndexError of an index outside [0, size) of dim (index_select, gather), and of one
// outside the rows of an embedding weight of (per-set, `kind`) shape w; the vmap rules, which
// fold the sets' tables into one, raise the same.
void check_index_in_range(const char* op, int64_t v, int64_t size, int64_t dim);
[[noreturn]] void throw_embedding_index(int64_t v, const char* kind, const Shape& w);
// index_select of a 0-d input (per set, in the vmap rule) takes exactly one index: the result
// is 0-d, with room for one value. IndexError naming the index's (per-set) shape otherwise.
void check_scalar_index_select(const Shape& index);
// scatter's checks on the (per-set, `kind`) shapes of x, index and src (null: src unchecked) and
// on the dtypes (index int64, src of x's): dim in range, as many dims (0-d counting as 1-D),
// index no larger than src, nor than x but at dim; an empty index skips the shape checks, as in
// torch. Returns dim normalised. Shared with the vmap rules, which stack the sets.
int64_t check_scatter(const char* op, int64_t dim, const Shape& x, DType xt, const Shape& index,
                      DType it, const Shape* src, DType st, const char* kind);
// The written tensor of an in-place op must have an own memory location per element (a
// RuntimeError naming op otherwise), and an input must not share any of them: partly
// (check_no_overlap, as add_) or, with `same_too` (scatter_, as torch), also as the same view.
void check_writable(const char* op, const Tensor& self);
void check_no_overlap(const char* op, const Tensor& self, const Tensor& input, bool same_too);

// An in-place op's operand must broadcast to the written tensor's (per-set, `kind`) shape
// without growing it: a ValueError naming op and both shapes. Shared with vmap's in-place rule,
// whose physical layouts would broadcast an operand with more dims over the batch dim.
void check_broadcasts_to(const char* op, const Shape& self, const Shape& other, const char* kind);


// view's RuntimeError when no view of x's (per-set, `kind`) shape and strides st has shape req.
[[noreturn]] void throw_view_strides(const Shape& req, const Shape& x, const Strides& st,
                                     const char* kind);

// expand's result for x of (per-set, `kind`) shape expanded to req (-1 keeps a dim; new leading
// dims may not be -1): a ValueError naming both otherwise. Shared with expand's vmap rule.
Shape expand_shape(const Shape& x, const Shape& req, const char* kind);

// split's checks of dim and the section sizes against a (per-set, `kind`) shape; returns the
// normalised dim. Shared with split's vmap rule.
int64_t check_split(const Shape& x, int64_t dim, const IntList& sizes, const char* kind);

// select's check of dim and index on a (per-set, `kind`) shape; returns the normalised dim.
int64_t check_select(const Shape& x, int64_t dim, int64_t index, const char* kind);

// cat's and stack's checks on the (per-set, `kind`) shapes of their inputs; check_cat returns
// the normalised dim (0 when every input is skipped). Shared with their vmap rule.
int64_t check_cat(std::span<const Shape> shapes, int64_t dim, const char* kind);
// torch's legacy rule for cat: a 1-D tensor of size 0 joins tensors of any shape (it is skipped
// for the shapes and the dim, and counts only for the dtype).
inline bool cat_skips(const Shape& s) { return s.size() == 1 && s[0] == 0; }
void check_stack(std::span<const Shape> shapes, const char* kind);

}  // namespace td::impl
