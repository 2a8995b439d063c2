// In-place ops (write into input 0 and return it) and the whole-tensor comparisons
// allclose/equal.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/kernels/kernels.h"
#include "engine/ops.h"
#include "engine/ops/impls.h"

namespace td {
namespace {

// PyTorch's can_cast: no float into an integer or bool, no integer into bool.
bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  if (from == DType::Int64 && to == DType::Bool) return false;
  return true;
}

// torch's is_non_overlapping_and_dense: the elements fill numel consecutive slots, the dims in
// some order.
bool dense(const Shape& shape, const Strides& strides) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t expected = 1;
  for (size_t d : dims) {
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

// What an in-place binary op needs of self: other broadcasts to it, the op's result type casts
// to its dtype, every element has its own memory, and other is self or does not overlap it.
void check_inplace(const char* op, const Tensor& self, const Tensor& other, DType result) {
  impl::check_broadcasts_to(op, self.shape(), other.shape(), shape_word());
  if (!can_cast(result, self.dtype()))
    throw_error<TypeError>("[", op, "] result type ", dtype_name(result),
                           " can't be cast to the desired output type ", dtype_name(self.dtype()));
  impl::check_writable(op, self);
  impl::check_no_overlap(op, self, other, false);
}

std::vector<Tensor> binary_inplace(const char* op, kernels::BinaryKind kind,
                                   std::span<const Tensor> in) {
  const Tensor& self = in[0];
  Tensor other = in[1];
  check_inplace(op, self, other, promote_types(self.dtype(), other.dtype()));
  if (other.shares_storage(self)) other = other.clone();  // reads must not see our writes
  if (self.numel() > 0) kernels::binary_inplace(kind, self, other.to(self.dtype()));
  return {self};
}

}  // namespace

namespace impl {

// The written tensor must be writable element by element: no dim of size > 1 with stride 0.
// An empty one has no element to share (torch takes it, as a contiguous one).
void check_writable(const char* op, const Tensor& self) {
  if (self.numel() == 0) return;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (self.shape()[d] > 1 && self.strides()[d] == 0)
      throw_error<ExpandedWriteError>("[", op, "] cannot write into an expanded tensor of shape ",
                                      self.shape(),
                                      " (several elements share one memory location); "
                                      "clone it first");
}

// torch's assert_no_partial_overlap (with same_too: assert_no_overlap), on the physical layouts
// (as torch's vmap runs the op on them): an input that shares memory with the written tensor must
// be the same view (without same_too), or the result would depend on the order of the writes.
// Where torch cannot tell (a view that is not dense) it lets the op run; td then reads a copy of
// the input, so the result is still defined.
void check_no_overlap(const char* op, const Tensor& self, const Tensor& input, bool same_too) {
  if (!self.shares_storage(input)) return;
  const bool same = self.is_same(input);
  if (same && !same_too) return;
  const Shape &ss = self.physical_shape(), &is = input.physical_shape();
  const Strides &st = self.physical_strides(), &it = input.physical_strides();
  if (shape_numel(ss) == 0 || shape_numel(is) == 0) return;
  if (!same && (!dense(ss, st) || !dense(is, it))) return;
  bool same_view = self.offset() == input.offset() && ss == is;
  for (size_t d = 0; same_view && d < ss.size(); ++d) same_view = ss[d] == 1 || st[d] == it[d];
  if (same_view && !same_too) return;
  auto bytes = [](const Tensor& t, int64_t n) {
    return n * static_cast<int64_t>(dtype_size(t.dtype()));
  };
  const int64_t sb = bytes(self, self.offset()), se = sb + bytes(self, shape_numel(ss));
  const int64_t ib = bytes(input, input.offset()), ie = ib + bytes(input, shape_numel(is));
  if (same || same_view || (sb < ie && ib < se))
    throw_error<RuntimeError>(
        "[", op, "] unsupported operation: some elements of the input tensor of shape ",
        input.shape(), " and the written-to tensor of shape ", self.shape(),
        " refer to a single memory location; clone() the input first");
}

void check_broadcasts_to(const char* op, const Shape& self, const Shape& other, const char* kind) {
  if (broadcast_shapes(op, self, other) != self)
    throw_error<ValueError>("[", op, "] operand of ", kind, " ", other,
                            " does not broadcast to the ", kind, " ", self,
                            " of the tensor written in place");
}

std::vector<Tensor> add__impl(std::span<const Tensor> in, const OpAttrs&) {
  return binary_inplace("add_", kernels::BinaryKind::Add, in);
}

std::vector<Tensor> mul__impl(std::span<const Tensor> in, const OpAttrs&) {
  return binary_inplace("mul_", kernels::BinaryKind::Mul, in);
}

std::vector<Tensor> copy__impl(std::span<const Tensor> in, const OpAttrs&) {
  const Tensor& self = in[0];
  Tensor src = in[1];
  check_broadcasts_to("copy_", self.shape(), src.shape(), shape_word());
  check_writable("copy_", self);
  check_no_overlap("copy_", self, src, false);
  if (src.shares_storage(self) && !src.is_same(self)) src = src.clone();
  if (self.numel() > 0) kernels::copy_into(src, self);
  return {self};
}

std::vector<Tensor> fill__impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<FillAttrs>(OpId::fill_, attrs);
  const Tensor& self = in[0];
  check_scalar_fits("fill_", a.value, self.dtype());
  // Every element gets the one value, so an expanded self is allowed, as in torch: the
  // elements that share a memory location are written once.
  Tensor distinct = self;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (self.strides()[d] == 0)
      distinct = distinct.narrow(d, 0, std::min<int64_t>(1, self.size(d)));
  // a floating value as float64: the only narrowing is the checked one into self
  const DType vt = a.value.is_floating_point() ? DType::Float64 : a.value.dtype();
  if (distinct.numel() > 0) kernels::copy_into(full({}, a.value, vt), distinct);
  return {self};
}

}  // namespace impl

const Tensor& add_(const Tensor& self, const Tensor& other) {
  call_op1(OpId::add_, {self, other});
  return self;
}

const Tensor& mul_(const Tensor& self, const Tensor& other) {
  call_op1(OpId::mul_, {self, other});
  return self;
}

const Tensor& add_(const Tensor& self, Scalar other) {
  return add_(self, wrap_scalar(other, self));
}
const Tensor& mul_(const Tensor& self, Scalar other) {
  return mul_(self, wrap_scalar(other, self));
}

namespace {

// self = op(self, other) for ops without an in-place kernel: add_'s checks, then the
// out-of-place result is copied in.
template <class F>
const Tensor& assign_result(const char* op, const Tensor& self, const Tensor& other, bool true_div,
                            F f) {
  if (!self.defined() || !other.defined())
    throw_error<ValueError>("[", op, "] got an undefined tensor");
  DType result = result_type({self, other});
  if (true_div && !is_floating(result)) result = DType::Float32;
  check_inplace(op, self, other, result);
  return copy_(self, f(self, other));
}

}  // namespace

const Tensor& sub_(const Tensor& self, const Tensor& other) {
  return assign_result("sub_", self, other, false,
                       [](const Tensor& a, const Tensor& b) { return sub(a, b); });
}
const Tensor& div_(const Tensor& self, const Tensor& other) {
  return assign_result("div_", self, other, true,
                       [](const Tensor& a, const Tensor& b) { return div(a, b); });
}
const Tensor& sub_(const Tensor& self, Scalar other) {
  impl::check_sub_scalar("sub_", self, other);
  return sub_(self, wrap_scalar(other, self));
}
const Tensor& div_(const Tensor& self, Scalar other) {
  return div_(self, wrap_scalar(other, self));
}

const Tensor& copy_(const Tensor& self, const Tensor& src) {
  call_op1(OpId::copy_, {self, src});
  return self;
}

const Tensor& fill_(const Tensor& self, Scalar value) {
  call_op1(OpId::fill_, {self}, FillAttrs{.value = value});
  return self;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (!a.defined() || !b.defined())
    throw_error<UndefinedTensorError>("[allclose] got an undefined tensor (",
                                      a.defined() ? "other" : "input", ")");
  if (!(rtol >= 0) || !(atol >= 0))
    throw_error<ValueError>("[allclose] ", !(rtol >= 0) ? "rtol" : "atol",
                            " must be greater than or equal to zero, but got ",
                            !(rtol >= 0) ? rtol : atol);
  (void)a.raw_data();  // RuntimeError on a batched tensor: the answer would differ per set
  (void)b.raw_data();
  if (a.dtype() != b.dtype())
    throw_error<TypeError>("[allclose] dtypes differ: ", a.dtype(), " and ", b.dtype(),
                           " (as in PyTorch, convert one first)");
  Shape s = broadcast_shapes("allclose", a.shape(), b.shape());
  std::vector<double> va = a.expand(s).to_vector<double>();
  std::vector<double> vb = b.expand(s).to_vector<double>();
  for (size_t i = 0; i < va.size(); ++i) {
    if (va[i] == vb[i]) continue;                // also equal infinities
    const double err = std::abs(va[i] - vb[i]);  // PyTorch: only a finite error can be close
    if (!(std::isfinite(err) && err <= atol + rtol * std::abs(vb[i]))) return false;
  }
  return true;
}

bool equal(const Tensor& a, const Tensor& b) {
  (void)a.raw_data();
  (void)b.raw_data();
  if (a.shape() != b.shape()) return false;
  if (!is_floating(a.dtype()) && !is_floating(b.dtype()))
    return a.to_vector<int64_t>() == b.to_vector<int64_t>();
  std::vector<double> va = a.to_vector<double>();
  std::vector<double> vb = b.to_vector<double>();
  return va == vb;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  const size_t n = static_cast<size_t>(ca.numel()) * dtype_size(ca.dtype());
  return n == 0 || std::memcmp(ca.raw_data(), cb.raw_data(), n) == 0;
}

}  // namespace td
