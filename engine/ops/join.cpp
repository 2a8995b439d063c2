// Joining and splitting: cat and stack copy into one fresh tensor; split and chunk return views.
#include "engine/kernels/kernels.h"
#include "engine/ops.h"
#include "engine/ops/impls.h"

namespace td {
namespace {

std::vector<Tensor> split_views(const Tensor& x, const IntList& sizes, int64_t dim) {
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(x.narrow(dim, start, s));
    start += s;
  }
  return out;
}

std::vector<Shape> shapes_of(std::span<const Tensor> in) {
  std::vector<Shape> out;
  out.reserve(in.size());
  for (const Tensor& t : in) out.push_back(t.shape());
  return out;
}

}  // namespace

namespace impl {

int64_t check_cat(std::span<const Shape> shapes, int64_t dim, const char* kind) {
  if (shapes.empty()) throw_error<ValueError>("[cat] expects a non-empty list of tensors");
  for (size_t i = 0; i < shapes.size(); ++i)
    if (shapes[i].empty())
      throw_error<ValueError>("[cat] zero-dimensional tensor (at index ", i,
                              ") cannot be concatenated");
  // the first tensor not skipped sets the shape and the dim's range, as in torch
  size_t r = 0;
  while (r < shapes.size() && cat_skips(shapes[r])) ++r;
  if (r == shapes.size()) return 0;  // all skipped: the result is [0], whatever the dim
  const Shape& first = shapes[r];
  const int64_t nd = static_cast<int64_t>(first.size());
  const int64_t d = normalize_dim("cat", dim, nd);
  for (size_t i = r + 1; i < shapes.size(); ++i) {
    const Shape& t = shapes[i];
    if (cat_skips(t)) continue;
    bool ok = static_cast<int64_t>(t.size()) == nd;
    for (int64_t j = 0; ok && j < nd; ++j) ok = j == d || t[j] == first[j];
    if (!ok)
      throw_error<ValueError>("[cat] tensor at index ", i, " has ", kind, " ", t,
                              " but tensor at index ", r, " has ", kind, " ", first,
                              "; all dims except dim ", d, " must match");
  }
  return d;
}

void check_stack(std::span<const Shape> shapes, const char* kind) {
  if (shapes.empty()) throw_error<ValueError>("[stack] expects a non-empty list of tensors");
  for (size_t i = 0; i < shapes.size(); ++i)
    if (shapes[i] != shapes[0])
      throw_error<ValueError>("[stack] tensor at index ", i, " has ", kind, " ", shapes[i],
                              " but tensor at index 0 has ", kind, " ", shapes[0],
                              "; stack needs equal shapes");
}

std::vector<Tensor> cat_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<DimAttrs>(OpId::cat, attrs);
  const int64_t dim = check_cat(shapes_of(in), a.dim, shape_word());
  DType dtype = in[0].dtype();
  Shape shape{0};  // all skipped
  bool joined = false;
  for (const Tensor& t : in) {
    dtype = promote_types(dtype, t.dtype());
    if (cat_skips(t.shape())) continue;
    if (!joined) {
      shape = t.shape();
      shape[dim] = 0;
      joined = true;
    }
    shape[dim] += t.shape()[dim];
  }
  Tensor out = Tensor::empty(shape, dtype);
  int64_t start = 0;
  for (const Tensor& t : in) {
    if (cat_skips(t.shape())) continue;
    const int64_t len = t.shape()[dim];
    if (len > 0 && t.numel() > 0) kernels::copy_into(t, out.narrow(dim, start, len));
    start += len;
  }
  return {out};
}

std::vector<Tensor> stack_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<DimAttrs>(OpId::stack, attrs);
  check_stack(shapes_of(in), shape_word());
  const int64_t dim = normalize_insert_dim("stack", a.dim, in[0].dim());
  std::vector<Tensor> parts;
  parts.reserve(in.size());
  for (const Tensor& t : in) parts.push_back(t.unsqueeze(dim));
  return cat_impl(parts, DimAttrs{.dim = dim});
}

int64_t check_split(const Shape& x, int64_t dim, const IntList& sizes, const char* kind) {
  if (x.empty()) throw_error<ValueError>("[split] cannot split a zero-dimensional tensor");
  const int64_t d = normalize_dim("split", dim, static_cast<int64_t>(x.size()));
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) throw_error<ValueError>("[split] negative section size in ", sizes);
    if (__builtin_add_overflow(total, s, &total))
      throw_error<ValueError>("[split] section sizes ", sizes, " overflow int64 (dim ", d, " of ",
                              kind, " ", x, " has size ", x[d], ")");
  }
  if (total != x[d])
    throw_error<ValueError>("[split] section sizes ", sizes, " sum to ", total, " but dim ", d,
                            " of ", kind, " ", x, " has size ", x[d]);
  return d;
}

std::vector<Tensor> split_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<SplitAttrs>(OpId::split, attrs);
  const Tensor& x = in[0];
  return split_views(x, a.sections, check_split(x.shape(), a.dim, a.sections, shape_word()));
}

}  // namespace impl

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw_error<ValueError>("[cat] expects a non-empty list of tensors");
  return call_op(OpId::cat, tensors, DimAttrs{.dim = dim})[0];
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw_error<ValueError>("[stack] expects a non-empty list of tensors");
  return call_op(OpId::stack, tensors, DimAttrs{.dim = dim})[0];
}

std::vector<Tensor> split(const Tensor& x, const IntList& sizes, int64_t dim) {
  return call_op(OpId::split, std::span<const Tensor>(&x, 1),
                 SplitAttrs{.dim = dim, .sections = sizes});
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  if (x.dim() == 0) throw_error<ValueError>("[split] cannot split a zero-dimensional tensor");
  const int64_t size = x.size(normalize_dim("split", dim, x.dim()));
  if (split_size < 0 || (split_size == 0 && size != 0))
    throw_error<ValueError>("[split] split_size must be positive (or 0 for an empty dim), got ",
                            split_size, " for dim of size ", size);
  IntList sizes;
  if (size == 0) {
    sizes.push_back(0);
  } else {
    for (int64_t s = 0; s < size; s += split_size) sizes.push_back(std::min(split_size, size - s));
  }
  return split(x, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  if (chunks <= 0) throw_error<ValueError>("[chunk] chunks must be positive, got ", chunks);
  if (x.dim() == 0) throw_error<ValueError>("[chunk] cannot chunk a zero-dimensional tensor");
  const int64_t size = x.size(normalize_dim("chunk", dim, x.dim()));
  // PyTorch: chunks of ceil(size / chunks); an empty dim gives `chunks` empty pieces.
  if (size == 0) {
    if (chunks > static_cast<int64_t>(IntList::max_size()))
      throw_error<RuntimeError>("[chunk] cannot return ", chunks, " empty pieces of ", shape_word(),
                                " ", x.shape(), " (too many)");
    return split(x, IntList(chunks, 0), dim);
  }
  return split(x, size / chunks + (size % chunks != 0), dim);  // ceil, without overflow
}

}  // namespace td
