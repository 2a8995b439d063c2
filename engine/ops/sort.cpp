// Sorting along one dim: sort, argsort and topk. Every row is ordered by one total order: the
// values (NaN above every number), then the index, so equal values keep their order and the
// result depends neither on the algorithm nor on the thread count.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/ops.h"
#include "engine/ops/impls.h"
#include "engine/parallel.h"

namespace td {
namespace impl {
int64_t check_one_dim(const char* op, const Shape& x, int64_t dim, const char* what) {
  const auto nd = static_cast<int64_t>(x.size());
  const int64_t n = nd == 0 ? 1 : nd;
  if (dim < -n || dim >= n)
    throw_error<IndexError>("[", op, "] dim ", dim, " is out of range for input of ", what, " ", x,
                            " (expected -", n, " <= dim < ", n, ")");
  return dim < 0 ? dim + n : dim;
}

int64_t check_topk(const Shape& x, int64_t k, int64_t dim, const char* what) {
  const int64_t d = check_one_dim("topk", x, dim, what);
  const int64_t size = x.empty() ? 1 : x[d];
  if (k < 0 || k > size)
    throw_error<IndexError>("[topk] k ", k, " is out of range for dim ", d, " of ", what, " ", x,
                            " (expected 0 <= k <= ", size, ")");
  return d;
}

namespace {

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return v != v;
  else
    return false;
}

// "a comes before b": by value (NaN the largest), then by index. A strict total order over a
// row's (value, index) pairs.
template <class T>
struct Before {
  bool descending;
  bool operator()(const std::pair<T, int64_t>& a, const std::pair<T, int64_t>& b) const {
    const bool an = is_nan(a.first), bn = is_nan(b.first);
    if (an || bn) {
      if (an && bn) return a.second < b.second;
      return descending ? an : bn;  // NaN first descending, last ascending
    }
    if (a.first != b.first) return descending ? a.first > b.first : a.first < b.first;
    return a.second < b.second;
  }
};

// Below this many elements the rows are ordered on one thread.
constexpr int64_t kParallelSort = 1 << 14;

struct Layout {
  int64_t outer = 1, n = 1, inner = 1;
};

Layout layout_of(const Shape& s, int64_t dim) {
  Layout l;
  if (s.empty()) return l;
  for (int64_t d = 0; d < dim; ++d) l.outer *= s[d];
  l.n = s[dim];
  for (auto d = static_cast<size_t>(dim + 1); d < s.size(); ++d) l.inner *= s[d];
  return l;
}

// The first k of each row of x (contiguous, `l`) in order into values (if non-null) and indices,
// contiguous with k in place of n.
template <class T>
void order_rows(const T* x, const Layout& l, int64_t k, bool descending, T* values,
                int64_t* indices) {
  const int64_t rows = l.outer * l.inner;
  auto run = [&](int64_t r0, int64_t r1) {
    std::vector<std::pair<T, int64_t>> buf(static_cast<size_t>(l.n));
    const Before<T> before{descending};
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / l.inner, j = r % l.inner;
      const T* xr = x + o * l.n * l.inner + j;
      for (int64_t i = 0; i < l.n; ++i) buf[i] = {xr[i * l.inner], i};
      if (k == l.n) {
        std::sort(buf.begin(), buf.end(), before);
      } else if (k * 8 < l.n) {
        std::partial_sort(buf.begin(), buf.begin() + k, buf.end(), before);
      } else {
        std::nth_element(buf.begin(), buf.begin() + k, buf.end(), before);
        std::sort(buf.begin(), buf.begin() + k, before);
      }
      const int64_t base = o * k * l.inner + j;
      for (int64_t i = 0; i < k; ++i) {
        if (values) values[base + i * l.inner] = buf[i].first;
        indices[base + i * l.inner] = buf[i].second;
      }
    }
  };
  if (rows > 1 && rows * l.n >= kParallelSort)
    parallel_for(rows, run);
  else
    run(0, rows);
}

// values (unless indices_only) and indices of the first k along dim in the order `descending`.
std::vector<Tensor> ordered(const Tensor& x0, int64_t dim, int64_t k, bool descending,
                            bool indices_only) {
  const Tensor x = x0.contiguous();
  Shape shape = x.shape();
  if (!shape.empty()) shape[dim] = k;
  Tensor values = indices_only ? Tensor() : Tensor::empty(shape, x.dtype());
  Tensor indices = Tensor::empty(shape, DType::Int64);
  count_kernel(KernelKind::Other);
  if (x.dim() == 0) {  // one element, itself (k 0 too, as torch)
    indices.data<int64_t>()[0] = 0;
    if (indices_only) return {indices};
    return {x.clone(), indices};
  }
  if (indices.numel() > 0) {
    const Layout l = layout_of(x.shape(), dim);
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      order_rows<T>(x.data<T>(), l, k, descending, indices_only ? nullptr : values.data<T>(),
                    indices.data<int64_t>());
    });
  }
  if (indices_only) return {indices};
  return {values, indices};
}

const Tensor& single(const char* op, std::span<const Tensor> in) {
  if (in.size() != 1 || !in[0].defined())
    throw_error<ValueError>("[", op, "] expected one defined input tensor");
  return in[0];
}

std::vector<Tensor> run_sort(OpId op, std::span<const Tensor> in, const OpAttrs& any) {
  const auto& a = attrs_as<SortAttrs>(op, any);
  const Tensor& x = single(op_name(op), in);
  const int64_t dim = check_one_dim(op_name(op), x.shape(), a.dim, shape_word());
  const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  return ordered(x, dim, n, a.descending, op == OpId::argsort);
}

}  // namespace

std::vector<Tensor> sort_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return run_sort(OpId::sort, in, attrs);
}
std::vector<Tensor> argsort_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return run_sort(OpId::argsort, in, attrs);
}
std::vector<Tensor> topk_impl(std::span<const Tensor> in, const OpAttrs& any) {
  const auto& a = attrs_as<TopkAttrs>(OpId::topk, any);
  const Tensor& x = single("topk", in);
  const int64_t dim = check_topk(x.shape(), a.k, a.dim, shape_word());
  return ordered(x, dim, a.k, a.largest, false);
}

}  // namespace impl

std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  auto r = call_op(OpId::sort, {&x, 1},
                   SortAttrs{.dim = dim, .descending = descending, .stable = stable});
  return {std::move(r[0]), std::move(r[1])};
}
Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  return call_op1(OpId::argsort, {x},
                  SortAttrs{.dim = dim, .descending = descending, .stable = stable});
}
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  auto r = call_op(OpId::topk, {&x, 1},
                   TopkAttrs{.k = k, .dim = dim, .largest = largest, .sorted = sorted});
  return {std::move(r[0]), std::move(r[1])};
}

}  // namespace td
