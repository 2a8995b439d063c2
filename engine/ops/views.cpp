// View ops: new shapes and strides over the same storage, never a copy (reshape copies only
// when no view exists), and the copies contiguous/clone.
#include <algorithm>
#include <numeric>

#include "engine/kernels/kernels.h"
#include "engine/ops/impls.h"

namespace td {
namespace {

Tensor make_view(const Tensor& x, Shape shape, Strides strides, int64_t offset) {
  return Tensor::from_storage_unchecked(x.storage(), x.dtype(), std::move(shape),
                                        std::move(strides), offset);
}

// Strides that view `old` (shape, strides) as `shape` without copying, if any (PyTorch's rule:
// dims may merge or split only within runs of memory-contiguous dims).
std::optional<Strides> view_strides(Shape old, Strides old_st, const Shape& shape) {
  Strides st(shape.size());
  if (shape_numel(old) == 0) return contiguous_strides(shape);
  if (old.empty()) {
    old = {1};
    old_st = {1};
  }
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base = old_st.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old.size()) - 1; d >= 0; --d) {
    tensor_numel *= old[d];
    if (d == 0 || (old[d - 1] != 1 && old_st[d - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        st[view_d] = view_numel * chunk_base;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base = old_st[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return st;
}

Tensor copy_contiguous(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  kernels::copy_into(x, out);
  return out;
}

Tensor view_as(const Tensor& x, const Shape& requested, const char* op, bool allow_copy) {
  Shape s = infer_size(op, requested, x.numel());
  if (auto st = view_strides(x.shape(), x.strides(), s)) return make_view(x, s, *st, x.offset());
  if (!allow_copy) impl::throw_view_strides(requested, x.shape(), x.strides(), shape_word());
  Tensor c = copy_contiguous(x);
  return make_view(c, s, contiguous_strides(s), 0);
}

}  // namespace

namespace impl {

std::vector<Tensor> view_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<SizesAttrs>(OpId::view, attrs);
  return {view_as(in[0], a.sizes, "view", false)};
}

std::vector<Tensor> reshape_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<SizesAttrs>(OpId::reshape, attrs);
  return {view_as(in[0], a.sizes, "reshape", true)};
}

std::vector<Tensor> permute_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<DimsAttrs>(OpId::permute, attrs);
  const Tensor& x = in[0];
  int64_t n = x.dim();
  if (static_cast<int64_t>(a.dims.size()) != n)
    throw_error<ValueError>("[permute] got ", a.dims.size(), " dims ", a.dims, " for a tensor of ",
                            shape_word(), " ", x.shape());
  Shape s(n);
  Strides st(n);
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = normalize_dim("permute", a.dims[i], n);
    if (seen[d]) throw_error<ValueError>("[permute] dim ", d, " repeats in ", a.dims);
    seen[d] = true;
    s[i] = x.shape()[d];
    st[i] = x.strides()[d];
  }
  return {make_view(x, s, st, x.offset())};
}

std::vector<Tensor> transpose_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<TransposeAttrs>(OpId::transpose, attrs);
  const Tensor& x = in[0];
  int64_t d0 = normalize_dim("transpose", a.dim0, x.dim());
  int64_t d1 = normalize_dim("transpose", a.dim1, x.dim());
  if (x.dim() == 0) return {x};
  Shape s = x.shape();
  Strides st = x.strides();
  std::swap(s[d0], s[d1]);
  std::swap(st[d0], st[d1]);
  return {make_view(x, s, st, x.offset())};
}

std::vector<Tensor> unsqueeze_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<DimAttrs>(OpId::unsqueeze, attrs);
  const Tensor& x = in[0];
  int64_t d = normalize_insert_dim("unsqueeze", a.dim, x.dim());
  Shape s = x.shape();
  Strides st = x.strides();
  int64_t inner = d < x.dim() ? s[d] * st[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, inner);
  return {make_view(x, s, st, x.offset())};
}

std::vector<Tensor> squeeze_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<DimsAttrs>(OpId::squeeze, attrs);
  const Tensor& x = in[0];
  std::vector<bool> drop(x.dim(), false);
  if (a.dims.empty()) {
    for (int64_t d = 0; d < x.dim(); ++d) drop[d] = x.shape()[d] == 1;
  } else {
    for (int64_t d : a.dims) {
      int64_t nd = normalize_dim("squeeze", d, x.dim());
      if (x.dim() > 0) drop[nd] = x.shape()[nd] == 1;
    }
  }
  Shape s;
  Strides st;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!drop[d]) {
      s.push_back(x.shape()[d]);
      st.push_back(x.strides()[d]);
    }
  return {make_view(x, s, st, x.offset())};
}

void throw_view_strides(const Shape& req, const Shape& x, const Strides& st, const char* kind) {
  throw_error<RuntimeError>("[view] shape ", req, " is not compatible with the strides of a tensor",
                            " of ", kind, " ", x, " and strides ", st, "; use reshape instead");
}

Shape expand_shape(const Shape& x, const Shape& req, const char* kind) {
  const int64_t n = static_cast<int64_t>(req.size()), lead = n - static_cast<int64_t>(x.size());
  if (lead < 0)
    throw_error<ValueError>("[expand] cannot expand a tensor of ", kind, " ", x, " to ", req,
                            " (fewer dims)");
  Shape s(n);
  for (int64_t i = 0; i < n; ++i) {
    if (i < lead) {
      if (req[i] < 0)
        throw_error<ValueError>("[expand] -1 is not allowed for a new leading dim in ", req);
      s[i] = req[i];
      continue;
    }
    const int64_t have = x[i - lead], want = req[i] == -1 ? have : req[i];
    if (want < 0) throw_error<ValueError>("[expand] negative size in ", req);
    if (have != want && have != 1)
      throw_error<ValueError>("[expand] cannot expand a tensor of ", kind, " ", x, " to ", req,
                              " (dim ", i, ": ", have, " vs ", want, ")");
    s[i] = want;
  }
  return s;
}

std::vector<Tensor> expand_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<SizesAttrs>(OpId::expand, attrs);
  const Tensor& x = in[0];
  const Shape s = expand_shape(x.shape(), a.sizes, shape_word());
  const int64_t n = static_cast<int64_t>(s.size()), lead = n - x.dim();
  Strides st(n);  // new leading dims and grown ones read one element again and again
  for (int64_t i = lead; i < n; ++i)
    st[i] = s[i] == x.shape()[i - lead] ? x.strides()[i - lead] : 0;
  return {make_view(x, s, st, x.offset())};
}

int64_t check_select(const Shape& x, int64_t dim, int64_t index, const char* kind) {
  if (x.empty()) throw_error<IndexError>("[select] cannot select from a 0-d tensor");
  const int64_t d = normalize_dim("select", dim, static_cast<int64_t>(x.size()));
  const int64_t n = x[d];
  if (index < -n || index >= n)
    throw_error<IndexError>("[select] index ", index, " out of range for dim ", d, " of size ", n,
                            " (", kind, " ", x, ")");
  return d;
}

std::vector<Tensor> select_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<SelectAttrs>(OpId::select, attrs);
  const Tensor& x = in[0];
  const int64_t d = check_select(x.shape(), a.dim, a.index, shape_word());
  int64_t n = x.shape()[d], i = a.index;
  if (i < 0) i += n;
  Shape s = x.shape();
  Strides st = x.strides();
  int64_t off = x.offset() + i * st[d];
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return {make_view(x, s, st, off)};
}

std::vector<Tensor> slice_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<SliceAttrs>(OpId::slice, attrs);
  const Tensor& x = in[0];
  if (x.dim() == 0) throw_error<IndexError>("[slice] cannot slice a 0-d tensor");
  int64_t d = normalize_dim("slice", a.dim, x.dim());
  if (a.step <= 0) throw_error<ValueError>("[slice] step must be positive, got ", a.step);
  const int64_t n = x.shape()[d];
  const SliceRange r = slice_range(n, a.start, a.end, a.step);
  Shape s = x.shape();
  Strides st = x.strides();
  int64_t off = x.offset() + (r.start < n ? r.start * st[d] : 0);
  s[d] = r.length;
  // unsigned: wraps (as PyTorch's) only where the stride is never used, one element or none
  st[d] = static_cast<int64_t>(static_cast<uint64_t>(st[d]) * static_cast<uint64_t>(a.step));
  return {make_view(x, s, st, off)};
}

std::vector<Tensor> flatten_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<FlattenAttrs>(OpId::flatten, attrs);
  const Tensor& x = in[0];
  if (x.dim() == 0) {  // to [1]; its dims are 0 or -1, as torch (nn.Flatten's start 1 is not)
    normalize_dim("flatten", a.start_dim, 0);
    normalize_dim("flatten", a.end_dim, 0);
    return {view_as(x, {1}, "flatten", true)};
  }
  int64_t s0 = normalize_dim("flatten", a.start_dim, x.dim());
  int64_t s1 = normalize_dim("flatten", a.end_dim, x.dim());
  if (s0 > s1)
    throw_error<ValueError>("[flatten] start_dim ", a.start_dim, " comes after end_dim ", a.end_dim,
                            " for ", shape_word(), " ", x.shape());
  Shape s(x.shape().begin(), x.shape().begin() + s0);
  s.push_back(checked_numel("flatten", Shape(x.shape().begin() + s0, x.shape().begin() + s1 + 1)));
  s.insert(s.end(), x.shape().begin() + s1 + 1, x.shape().end());
  return {view_as(x, s, "flatten", true)};
}

std::vector<Tensor> unflatten_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<UnflattenAttrs>(OpId::unflatten, attrs);
  const Tensor& x = in[0];
  // normalize_dim takes dim 0 of a 0-d tensor, which has no dim to split
  if (x.dim() == 0)
    throw_error<IndexError>("[unflatten] dim ", a.dim, " given but a tensor of shape ", x.shape(),
                            " has no dims");
  int64_t d = normalize_dim("unflatten", a.dim, x.dim());
  if (a.sizes.empty()) throw_error<ValueError>("[unflatten] sizes must not be empty");
  Shape inner = infer_size("unflatten", a.sizes, x.shape()[d]);
  Shape s(x.shape().begin(), x.shape().begin() + d);
  s.insert(s.end(), inner.begin(), inner.end());
  s.insert(s.end(), x.shape().begin() + d + 1, x.shape().end());
  return {view_as(x, s, "unflatten", true)};
}

std::vector<Tensor> contiguous_impl(std::span<const Tensor> in, const OpAttrs&) {
  return {in[0].is_contiguous() ? in[0] : copy_contiguous(in[0])};
}

std::vector<Tensor> clone_impl(std::span<const Tensor> in, const OpAttrs&) {
  return {copy_contiguous(in[0])};
}

}  // namespace impl
}  // namespace td
