// scatter, scatter_add and scatter_reduce, out of place and in place. One kernel writes src's
// elements into a (possibly strided) tensor at index's positions, in index's row-major order:
// duplicates resolve the same way every time, batched or not.
#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "engine/ops.h"
#include "engine/ops/impls.h"

namespace td {
namespace {

int64_t size_or_one(const Shape& s, int64_t d) { return s.empty() ? 1 : s[d]; }

ScatterReduce parse_reduce(const char* op, const std::string& reduce) {
  if (reduce == "sum") return ScatterReduce::Sum;
  if (reduce == "prod") return ScatterReduce::Prod;
  if (reduce == "mean") return ScatterReduce::Mean;
  if (reduce == "amax") return ScatterReduce::Amax;
  if (reduce == "amin") return ScatterReduce::Amin;
  throw_error<ValueError>("[", op, "] reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got ",
                          quote_key(reduce));
}

// Floor division, as torch's integer mean (-7 / 3 is -3).
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// Walks index (ids, row-major over its shape is) and src together; f(o, s, slot) combines src's
// element s into out's element o, slot being o's offset from out's first element.
template <class T, class F>
void walk(T* op, const Strides& so, int64_t dim, std::span<const int64_t> ids, const Shape& is,
          const T* sp, const Strides& ss, F f) {
  const int64_t nd = static_cast<int64_t>(is.size());
  std::vector<int64_t> pos(nd, 0);
  int64_t oo = 0, os = 0;  // offsets of out (dim's part aside) and src at pos
  for (size_t k = 0; k < ids.size(); ++k) {
    const int64_t slot = oo + ids[k] * so[dim];
    f(op[slot], sp[os], slot);
    for (int64_t d = nd - 1; d >= 0; --d) {  // row-major increment, offsets kept in step
      if (++pos[d] < is[d]) {
        if (d != dim) oo += so[d];
        os += ss[d];
        break;
      }
      pos[d] = 0;
      if (d != dim) oo -= (is[d] - 1) * so[d];
      os -= (is[d] - 1) * ss[d];
    }
  }
}

// Writes with a reduction into out's elements of type T; C counts the values landing on one
// element.
template <class T, class C>
void scatter_typed(const Tensor& out, int64_t dim, std::span<const int64_t> ids, const Shape& is,
                   const Tensor& src, ScatterReduce reduce, bool include_self) {
  const Strides& so = out.strides();
  const Strides& ss = src.strides();
  T* op = out.data<T>();
  const T* sp = src.data<T>();
  // How many values landed on each element (by its slot): for mean, and for a reduction that
  // starts from the first value landing rather than the element's own.
  const bool counted = reduce == ScatterReduce::Mean || !include_self;
  std::vector<C> count;
  if (counted) {
    int64_t last = 0;
    for (int64_t d = 0; d < out.dim(); ++d) last += (out.size(d) - 1) * so[d];
    count.assign(static_cast<size_t>(last) + 1, 0);
  }
  auto run = [&](auto combine) {
    if (!counted) {
      walk(op, so, dim, ids, is, sp, ss, [&](T& o, T s, int64_t) { combine(o, s); });
      return;
    }
    walk(op, so, dim, ids, is, sp, ss, [&](T& o, T s, int64_t slot) {
      if (count[slot]++ == 0 && !include_self)
        o = s;
      else
        combine(o, s);
    });
  };
  switch (reduce) {
    case ScatterReduce::None:
      run([](T& o, T s) { o = s; });
      break;
    case ScatterReduce::Sum:
    case ScatterReduce::Mean:
      if constexpr (std::is_same_v<T, bool>)
        run([](T& o, T s) { o = o || s; });
      else
        run([](T& o, T s) { o += s; });
      break;
    case ScatterReduce::Prod:
      if constexpr (std::is_same_v<T, bool>)
        run([](T& o, T s) { o = o && s; });
      else
        run([](T& o, T s) { o *= s; });
      break;
    case ScatterReduce::Amax:  // NaN wins, as torch's
      run([](T& o, T s) {
        if constexpr (std::is_floating_point_v<T>) {
          if (std::isnan(s) || s > o) o = s;
        } else {
          o = std::max(o, s);
        }
      });
      break;
    case ScatterReduce::Amin:
      run([](T& o, T s) {
        if constexpr (std::is_floating_point_v<T>) {
          if (std::isnan(s) || s < o) o = s;
        } else {
          o = std::min(o, s);
        }
      });
      break;
  }
  if constexpr (!std::is_same_v<T, bool>) {
    if (reduce != ScatterReduce::Mean) return;
    for (size_t slot = 0; slot < count.size(); ++slot) {
      if (count[slot] == 0) continue;
      const int64_t n = static_cast<int64_t>(count[slot]) + (include_self ? 1 : 0);
      T& o = op[slot];
      if constexpr (std::is_floating_point_v<T>)
        o = o / static_cast<T>(n);
      else
        o = floor_div(o, n);
    }
  }
}

// out, index and src have the same number of dims (>= 1) and checked shapes; out's elements each
// have their own memory location. Every index is checked before the first write, so a failing
// call leaves out as it was.
void scatter_into(const char* op, const Tensor& out, int64_t dim, const Tensor& index,
                  const Tensor& src, ScatterReduce reduce, bool include_self) {
  if (reduce == ScatterReduce::Mean && out.dtype() == DType::Bool)
    throw_error<TypeError>("[", op, "] reduce 'mean' does not take a bool input");
  // a contiguous index is read in place; one sharing out's memory (views the overlap check
  // cannot tell apart) is copied, so that the checked values are the ones used
  const bool in_place = index.is_contiguous() && !index.shares_storage(out);
  std::vector<int64_t> copy;
  if (!in_place) copy = index.to_vector<int64_t>();
  const std::span<const int64_t> ids =
      in_place ? std::span<const int64_t>(index.data<int64_t>(), static_cast<size_t>(index.numel()))
               : std::span<const int64_t>(copy);
  const int64_t size = out.size(dim);
  for (int64_t v : ids) impl::check_index_in_range(op, v, size, dim);
  count_kernel(KernelKind::Other);
  // 32-bit counts (half the memory) unless one element could take more values
  const bool narrow = ids.size() <= std::numeric_limits<uint32_t>::max();
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (narrow)
      scatter_typed<T, uint32_t>(out, dim, ids, index.shape(), src, reduce, include_self);
    else
      scatter_typed<T, uint64_t>(out, dim, ids, index.shape(), src, reduce, include_self);
  });
}

// The shared body: checks, then the write into `out` (x's copy, or self in place).
void scatter_checked(const char* op, const Tensor& out, const ScatterAttrs& a, const Tensor& index,
                     const Tensor& src, ScatterReduce reduce) {
  const int64_t dim = impl::check_scatter(op, a.dim, out.shape(), out.dtype(), index.shape(),
                                          index.dtype(), &src.shape(), src.dtype(), shape_word());
  if (index.numel() == 0) return;
  if (out.dim() == 0 || index.dim() == 0 || src.dim() == 0) {  // all 1-D of size 1 or 0-d
    auto one_d = [](const Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; };
    scatter_into(op, one_d(out), 0, one_d(index), one_d(src), reduce, a.include_self);
    return;
  }
  scatter_into(op, out, dim, index, src, reduce, a.include_self);
}

std::vector<Tensor> scatter_out(const char* op, OpId id, std::span<const Tensor> in,
                                const OpAttrs& attrs, std::optional<ScatterReduce> reduce) {
  const auto& a = attrs_as<ScatterAttrs>(id, attrs);
  Tensor out = in[0].clone();
  scatter_checked(op, out, a, in[1], in[2], reduce.value_or(a.reduce));
  return {out};
}

std::vector<Tensor> scatter_in_place(const char* op, OpId id, std::span<const Tensor> in,
                                     const OpAttrs& attrs, std::optional<ScatterReduce> reduce) {
  const auto& a = attrs_as<ScatterAttrs>(id, attrs);
  const Tensor& self = in[0];
  impl::check_writable(op, self);
  // as torch: the reads must not see the writes, so no sharing at all
  impl::check_no_overlap(op, self, in[1], true);
  impl::check_no_overlap(op, self, in[2], true);
  // views torch cannot tell apart pass the check; reading a copy keeps the result defined
  const Tensor src = in[2].shares_storage(self) ? in[2].clone() : in[2];
  scatter_checked(op, self, a, in[1], src, reduce.value_or(a.reduce));
  return {self};
}

void check_reduce_kind(const char* op, ScatterReduce r) {
  if (r == ScatterReduce::None)
    throw_error<ValueError>("[", op, "] needs a reduction ('sum', 'prod', 'mean', 'amax' or ",
                            "'amin')");
}

// The value form's src: value in x's dtype, read at every index position.
Tensor value_src(const char* op, const Tensor& x, const Tensor& index, Scalar value) {
  impl::check_scalar_fits(op, value, x.dtype());
  return full({}, value, x.dtype()).expand(index.shape());
}

}  // namespace

namespace impl {

int64_t check_scatter(const char* op, int64_t dim, const Shape& x, DType xt, const Shape& index,
                      DType it, const Shape* src, DType st, const char* kind) {
  if (it != DType::Int64)
    throw_error<TypeError>("[", op, "] index must be int64, got ", it, " of ", kind, " ", index);
  if (src && st != xt)
    throw_error<TypeError>("[", op, "] src must have the dtype of the input (", xt, "), got ", st,
                           " of ", kind, " ", *src);
  const int64_t d = normalize_dim(op, dim, static_cast<int64_t>(x.size()));
  if (shape_numel(index) == 0) return d;  // nothing is written: torch checks no shape
  const auto rank = [](const Shape& s) {
    return std::max<int64_t>(static_cast<int64_t>(s.size()), 1);
  };
  if (rank(index) != rank(x))
    throw_error<ValueError>("[", op, "] index of ", kind, " ", index,
                            " must have as many dims as the input of ", kind, " ", x);
  if (src && rank(index) != rank(*src))
    throw_error<ValueError>("[", op, "] index of ", kind, " ", index,
                            " must have as many dims as src of ", kind, " ", *src);
  for (int64_t k = 0; k < rank(index); ++k) {
    const int64_t n = size_or_one(index, k);
    if (src && n > size_or_one(*src, k))
      throw_error<ValueError>("[", op, "] index of ", kind, " ", index, " is larger than src of ",
                              kind, " ", *src, " at dim ", k);
    if (k != d && n > size_or_one(x, k))
      throw_error<ValueError>("[", op, "] index of ", kind, " ", index,
                              " is larger than the input of ", kind, " ", x, " at dim ", k);
  }
  return d;
}

std::vector<Tensor> scatter_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return scatter_out("scatter", OpId::scatter, in, attrs, ScatterReduce::None);
}

std::vector<Tensor> scatter_add_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return scatter_out("scatter_add", OpId::scatter_add, in, attrs, ScatterReduce::Sum);
}

std::vector<Tensor> scatter_reduce_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  check_reduce_kind("scatter_reduce", attrs_as<ScatterAttrs>(OpId::scatter_reduce, attrs).reduce);
  return scatter_out("scatter_reduce", OpId::scatter_reduce, in, attrs, std::nullopt);
}

std::vector<Tensor> scatter__impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return scatter_in_place("scatter_", OpId::scatter_, in, attrs, ScatterReduce::None);
}

std::vector<Tensor> scatter_add__impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return scatter_in_place("scatter_add_", OpId::scatter_add_, in, attrs, ScatterReduce::Sum);
}

std::vector<Tensor> scatter_reduce__impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  check_reduce_kind("scatter_reduce_", attrs_as<ScatterAttrs>(OpId::scatter_reduce_, attrs).reduce);
  return scatter_in_place("scatter_reduce_", OpId::scatter_reduce_, in, attrs, std::nullopt);
}

}  // namespace impl

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return call_op1(OpId::scatter, {x, index, src}, ScatterAttrs{.dim = dim});
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
  return scatter(x, dim, index, value_src("scatter", x, index, value));
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return call_op1(OpId::scatter_add, {x, index, src}, ScatterAttrs{.dim = dim});
}

Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self) {
  return call_op1(OpId::scatter_reduce, {x, index, src},
                  ScatterAttrs{.dim = dim,
                               .reduce = parse_reduce("scatter_reduce", reduce),
                               .include_self = include_self});
}

const Tensor& scatter_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  call_op1(OpId::scatter_, {self, index, src}, ScatterAttrs{.dim = dim});
  return self;
}

const Tensor& scatter_(const Tensor& self, int64_t dim, const Tensor& index, Scalar value) {
  return scatter_(self, dim, index, value_src("scatter_", self, index, value));
}

const Tensor& scatter_add_(const Tensor& self, int64_t dim, const Tensor& index,
                           const Tensor& src) {
  call_op1(OpId::scatter_add_, {self, index, src}, ScatterAttrs{.dim = dim});
  return self;
}

const Tensor& scatter_reduce_(const Tensor& self, int64_t dim, const Tensor& index,
                              const Tensor& src, const std::string& reduce, bool include_self) {
  call_op1(OpId::scatter_reduce_, {self, index, src},
           ScatterAttrs{.dim = dim,
                        .reduce = parse_reduce("scatter_reduce_", reduce),
                        .include_self = include_self});
  return self;
}

}  // namespace td
