// Reductions (sum, mean, var, std, amax, amin, argmax, argmin) and the ops composed of them.
#include <algorithm>

#include "engine/kernels/kernels.h"
#include "engine/ops.h"
#include "engine/ops/impls.h"

namespace td {
namespace impl {
namespace {

using kernels::ReduceKind;

const Tensor& single(const char* op, std::span<const Tensor> in) {
  if (in.size() != 1 || !in[0].defined())
    throw_error<ValueError>("[", op, "] expected one defined input tensor");
  return in[0];
}

}  // namespace

IntList reduce_dims(const char* op, const IntList& dims, int64_t ndim) {
  IntList out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) out.push_back(normalize_dim(op, d, ndim));  // 0-d: dim 0 or -1
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw_error<ValueError>("[", op, "] dim appears multiple times in the list of dims ",
                            shape_str(dims));
  if (ndim == 0) out.clear();
  return out;
}

namespace {

ReduceKind reduce_kind(OpId op) {
  switch (op) {
    case OpId::sum:
      return ReduceKind::Sum;
    case OpId::mean:
      return ReduceKind::Mean;
    case OpId::var:
      return ReduceKind::Var;
    case OpId::std:
      return ReduceKind::Std;
    case OpId::amax:
      return ReduceKind::Amax;
    case OpId::amin:
      return ReduceKind::Amin;
    case OpId::argmax:
      return ReduceKind::Argmax;
    case OpId::argmin:
      return ReduceKind::Argmin;
    default:
      throw_error<RuntimeError>("[", op_name(op), "] is not a reduction");
  }
}

}  // namespace

IntList check_reduce(OpId op, const Shape& x, DType t, const IntList& dims, const char* what) {
  const char* name = op_name(op);
  // logsumexp checks as sum does (integer inputs compute in float32)
  const ReduceKind kind = op == OpId::logsumexp ? ReduceKind::Sum : reduce_kind(op);
  IntList out = reduce_dims(name, dims, static_cast<int64_t>(x.size()));
  if (kind == ReduceKind::Mean || kind == ReduceKind::Var || kind == ReduceKind::Std)
    check_floating(name, x, t, what);
  const bool arg = kind == ReduceKind::Argmax || kind == ReduceKind::Argmin;
  if (arg && t == DType::Bool)  // as torch ("argmax_cpu" not implemented for 'Bool')
    throw_bool_not_implemented(name, {x}, "; max or min with a dim gives the indices");
  if (arg || kind == ReduceKind::Amax || kind == ReduceKind::Amin)
    for (int64_t d : out)
      if (x[d] == 0)
        throw_error<ValueError>("[", name, "] cannot reduce over dim ", d, " of size 0 (input ",
                                what, " ", x, ")");
  return out;
}

namespace {

std::vector<Tensor> run_reduce(OpId op, std::span<const Tensor> in, const OpAttrs& any) {
  const auto& attrs = attrs_as<ReduceAttrs>(op, any);
  const Tensor& x = single(op_name(op), in);
  const IntList dims = check_reduce(op, x.shape(), x.dtype(), attrs.dims, shape_word());
  return {kernels::reduce(reduce_kind(op), x, dims, attrs.keepdim, attrs.unbiased)};
}

}  // namespace

#define TD_REDUCE(name)                                                               \
  std::vector<Tensor> name##_impl(std::span<const Tensor> in, const OpAttrs& attrs) { \
    return run_reduce(OpId::name, in, attrs);                                         \
  }
TD_REDUCE(sum)
TD_REDUCE(mean)
TD_REDUCE(var)
TD_REDUCE(std)
TD_REDUCE(amax)
TD_REDUCE(amin)
TD_REDUCE(argmax)
TD_REDUCE(argmin)
#undef TD_REDUCE

// log(sum(exp(x - m))) + m with m the max over dims, taken as 0 where it is infinite: a row of
// -inf gives -inf, a row holding +inf gives +inf (NaN if it also holds NaN), as torch.
std::vector<Tensor> logsumexp_impl(std::span<const Tensor> in, const OpAttrs& any) {
  const auto& attrs = attrs_as<ReduceAttrs>(OpId::logsumexp, any);
  const Tensor& x0 = single("logsumexp", in);
  const IntList dims = check_reduce(OpId::logsumexp, x0.shape(), x0.dtype(), attrs.dims,
                                    shape_word());
  const Tensor x = is_floating(x0.dtype()) ? x0 : x0.to(DType::Float32);
  bool empty_dim = false;
  for (int64_t d : dims) empty_dim = empty_dim || x.size(d) == 0;
  if (empty_dim) return {log(sum(exp(x), dims, attrs.keepdim))};  // -inf, as torch
  Tensor m = amax(x, dims, true);
  m = masked_fill(m, isinf(m), 0);
  Tensor s = log(sum(exp(x - m), dims, attrs.keepdim));
  return {add(s, m.reshape(s.shape()))};
}

}  // namespace impl

namespace {
ReduceAttrs reduce_attrs(const IntList& dims, bool keepdim, bool unbiased = false) {
  return {.dims = dims, .keepdim = keepdim, .unbiased = unbiased};
}
}  // namespace

Tensor sum(const Tensor& x, const IntList& dims, bool keepdim) {
  return call_op1(OpId::sum, {x}, reduce_attrs(dims, keepdim));
}
Tensor mean(const Tensor& x, const IntList& dims, bool keepdim) {
  return call_op1(OpId::mean, {x}, reduce_attrs(dims, keepdim));
}
Tensor var(const Tensor& x, const IntList& dims, bool unbiased, bool keepdim) {
  return call_op1(OpId::var, {x}, reduce_attrs(dims, keepdim, unbiased));
}
Tensor std(const Tensor& x, const IntList& dims, bool unbiased, bool keepdim) {
  return call_op1(OpId::std, {x}, reduce_attrs(dims, keepdim, unbiased));
}
Tensor amax(const Tensor& x, const IntList& dims, bool keepdim) {
  return call_op1(OpId::amax, {x}, reduce_attrs(dims, keepdim));
}
Tensor amin(const Tensor& x, const IntList& dims, bool keepdim) {
  return call_op1(OpId::amin, {x}, reduce_attrs(dims, keepdim));
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return call_op1(OpId::argmax, {x}, reduce_attrs(dim ? IntList{*dim} : IntList{}, keepdim));
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return call_op1(OpId::argmin, {x}, reduce_attrs(dim ? IntList{*dim} : IntList{}, keepdim));
}
Tensor logsumexp(const Tensor& x, const IntList& dims, bool keepdim) {
  return call_op1(OpId::logsumexp, {x}, reduce_attrs(dims, keepdim));
}
// Compositions of batched ops, so vmap needs no rules of their own.
// (their dims are checked first, so that a bad one is reported as theirs, not sum's)
Tensor all(const Tensor& x, const IntList& dims, bool keepdim) {
  impl::reduce_dims("all", dims, x.dim());
  return eq(sum(eq(x, 0), dims, keepdim), 0);
}
Tensor any(const Tensor& x, const IntList& dims, bool keepdim) {
  impl::reduce_dims("any", dims, x.dim());
  return gt(sum(ne(x, 0), dims, keepdim), 0);
}
Tensor max(const Tensor& x) {
  if (x.numel() == 0)
    throw_error<ValueError>("[max] of an empty tensor (", shape_word(), " ", x.shape(),
                            "): give the dim to reduce");
  return amax(x);
}
Tensor min(const Tensor& x) {
  if (x.numel() == 0)
    throw_error<ValueError>("[min] of an empty tensor (", shape_word(), " ", x.shape(),
                            "): give the dim to reduce");
  return amin(x);
}
namespace {
// torch.max(x, dim) takes bool tensors, whose argmax does not: their indices come from int64.
// The dim is checked as max's or min's own, not amax's.
std::tuple<Tensor, Tensor> max_or_min(bool is_max, const Tensor& x, int64_t dim, bool keepdim) {
  const char* op = is_max ? "max" : "min";
  const IntList d = impl::reduce_dims(op, {dim}, x.dim());  // none for a 0-d x (dim 0 or -1)
  if (!d.empty() && x.size(d[0]) == 0)
    throw_error<ValueError>("[", op, "] cannot reduce over dim ", d[0], " of size 0 (input ",
                            shape_word(), " ", x.shape(), ")");
  const Tensor xi = x.dtype() == DType::Bool ? x.to(DType::Int64) : x;
  if (is_max) return {amax(x, IntList{dim}, keepdim), argmax(xi, dim, keepdim)};
  return {amin(x, IntList{dim}, keepdim), argmin(xi, dim, keepdim)};
}
}  // namespace
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return max_or_min(true, x, dim, keepdim);
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return max_or_min(false, x, dim, keepdim);
}
Tensor max(const Tensor& a, const Tensor& b) { return maximum(a, b); }
Tensor min(const Tensor& a, const Tensor& b) { return minimum(a, b); }

}  // namespace td
