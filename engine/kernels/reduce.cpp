// Reductions (sum, mean, var, std, amax, amin and their arg forms) over any dims of a strided
// tensor, and the row sums of the norms. Floating sums take ordered_sum.h's one order, so a
// slot's bits depend on its values alone, not on the input's strides.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>
#include <xsimd/xsimd.hpp>

#include "engine/dispatch.h"
#include "engine/kernels/kernels.h"
#include "engine/kernels/ordered_sum.h"
#include "engine/kernels/strided.h"

namespace td::kernels::TD_ISA {
namespace {

const char* reduce_name(ReduceKind kind) {
  static constexpr const char* kNames[] = {"sum",  "mean", "var",    "std",
                                           "amax", "amin", "argmax", "argmin"};
  return kNames[static_cast<int>(kind)];
}

// Integer sums accumulate unsigned, so they wrap (as PyTorch's) rather than overflow.
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

// Readers of one slot's reduced elements: a contiguous run, or gathered through offsets.
template <class T>
struct Run {
  const T* p;
  T operator()(int64_t i) const { return p[i]; }
};
template <class T>
struct Gather {
  const T* base;
  const int64_t* offsets;
  T operator()(int64_t i) const { return base[offsets[i]]; }
};

template <class T, class At>
constexpr bool kFloatRun = std::is_floating_point_v<T>&& std::is_same_v<At, Run<T>>;

// step over at(0 .. n-1) in A, from 0. Integer adds reassociate, so the compiler vectorises a
// run of those.
template <class A, class T, class At, class G>
A sum_of(int64_t n, At at, G step) {
  if constexpr (kFloatRun<T, At>) {
    return run_sum(at.p, n, step);
  } else if constexpr (std::is_floating_point_v<T>) {
    double lane[kSumLanes] = {};
    const int64_t whole = n / kSumLanes * kSumLanes;
    int64_t i = 0;
    for (; i < whole; i += kSumLanes)
      for (int64_t l = 0; l < kSumLanes; ++l)
        lane[l] = step(lane[l], static_cast<double>(at(i + l)));
    double s = sum_lanes([&](int64_t l) { return lane[l]; });
    for (; i < n; ++i) s = step(s, static_cast<double>(at(i)));
    return s;
  } else {
    A s = 0;
    for (int64_t i = 0; i < n; ++i) s = step(s, static_cast<A>(at(i)));
    return s;
  }
}

// Whether v replaces the running best b: a NaN beats every number and is never replaced itself,
// and a tie keeps b, so the first best element wins. Bitwise, not short-circuit: loops of it
// then vectorise.
template <bool IsMax, class T>
bool beats(T v, T b) {
  const bool better = IsMax ? v > b : v < b;
  if constexpr (std::is_floating_point_v<T>)
    return (b == b) & ((v != v) | better);
  else
    return better;
}

// The best element of a contiguous floating run p[0 .. n-1], n >= 1, or NaN if there is one:
// vector maxima (minima) with a separate NaN flag, as xsimd leaves max's NaN handling open.
template <bool IsMax, class T>
T best_of_run(const T* p, int64_t n) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  T best = p[0];
  int64_t i = 0;
  if (n >= W) {
    B lanes = B::load_unaligned(p);
    auto nan = xsimd::isnan(lanes);  // not lanes != lanes: xsimd 8's != is false for NaN
    for (i = W; i + W <= n; i += W) {
      const B v = B::load_unaligned(p + i);
      lanes = IsMax ? xsimd::max(lanes, v) : xsimd::min(lanes, v);
      nan = nan | xsimd::isnan(v);
    }
    if (xsimd::any(nan)) return std::numeric_limits<T>::quiet_NaN();
    T l[W];
    lanes.store_unaligned(l);
    for (T v : l)
      if (beats<IsMax>(v, best)) best = v;
  }
  for (; i < n; ++i)
    if (beats<IsMax>(p[i], best)) best = p[i];
  return best;
}

// Index of the first element of p equal to best (the first NaN if best is NaN); there is one.
template <class T>
int64_t find_first(const T* p, int64_t n, T best) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  const bool nan = best != best;
  const B bv(best);
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const B v = B::load_unaligned(p + i);
    if (xsimd::any(nan ? xsimd::isnan(v) : v == bv)) break;
  }
  while (nan ? p[i] == p[i] : p[i] != best) ++i;
  return i;
}

// Index of the first best element of at(0 .. n-1), n >= 1 (the first NaN if there is one). On a
// floating run the vector lanes lose which of several equal elements came first (-0 and +0,
// NaNs), so a search finds it.
template <bool IsMax, class T, class At>
int64_t first_best(int64_t n, At at) {
  if constexpr (kFloatRun<T, At>) {
    return find_first(at.p, n, best_of_run<IsMax>(at.p, n));
  } else {
    int64_t bi = 0;
    for (int64_t i = 1; i < n; ++i)
      if (beats<IsMax>(at(i), at(bi))) bi = i;
    return bi;
  }
}

// The value of that element. Equal numbers other than zeros are identical, so only a zero or
// NaN best needs the search (for its sign or payload).
template <bool IsMax, class T, class At>
T best_value(int64_t n, At at) {
  if constexpr (kFloatRun<T, At>) {
    const T best = best_of_run<IsMax>(at.p, n);
    return best == best && best != T(0) ? best : at(find_first(at.p, n, best));
  } else {
    return at(first_best<IsMax, T>(n, at));
  }
}

template <class O, class A>
O sum_result(ReduceKind kind, A s, int64_t r) {
  if (kind == ReduceKind::Mean)
    return static_cast<O>(static_cast<double>(s) / static_cast<double>(r));
  return static_cast<O>(s);
}

// From the sum of squared deviations.
template <class O>
O var_result(ReduceKind kind, double ss, int64_t r, bool unbiased) {
  double v = ss / static_cast<double>(unbiased ? r - 1 : r);
  if (unbiased && r <= 1) v = std::numeric_limits<double>::quiet_NaN();
  return static_cast<O>(kind == ReduceKind::Std ? std::sqrt(v) : v);
}

// One output slot from its r reduced elements at(0 .. r-1), in row-major order of the reduced
// dims (argmax counts in that order).
template <class T, class O, class At>
O reduce_slot(ReduceKind kind, int64_t r, At at, bool unbiased) {
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean:
      return sum_result<O>(kind, sum_of<Acc<T>, T>(r, at, kPlus), r);
    case ReduceKind::Var:
    case ReduceKind::Std: {
      const double m = sum_of<double, T>(r, at, kPlus) / static_cast<double>(r);
      const double ss = sum_of<double, T>(r, at, squares_about(m));
      return var_result<O>(kind, ss, r, unbiased);
    }
    case ReduceKind::Amax:
      return static_cast<O>(best_value<true, T>(r, at));
    case ReduceKind::Amin:
      return static_cast<O>(best_value<false, T>(r, at));
    case ReduceKind::Argmax:
      return static_cast<O>(first_best<true, T>(r, at));
    case ReduceKind::Argmin:
      return static_cast<O>(first_best<false, T>(r, at));
  }
  return O{};
}

// Running bests of m columns over the reduced rows: best[j] and its row index bi[j].
template <bool IsMax, class T>
void best_columns(const T* xp, const Nest<1>& red, int64_t m, T* best, int64_t* bi) {
  std::copy_n(xp, m, best);
  std::fill_n(bi, m, 0);
  int64_t i = 0;
  red.run([&](const std::array<int64_t, 1>& o) {
    const T* row = xp + o[0];
    if (i > 0)
      for (int64_t j = 0; j < m; ++j) {
        const bool take = beats<IsMax>(row[j], best[j]);
        best[j] = take ? row[j] : best[j];
        bi[j] = take ? i : bi[j];
      }
    ++i;
  });
}

// Columns reduced at a time: their accumulators (kSumLanes each for a floating sum) stay in L1.
constexpr int64_t kColumnBlock = 64;

// out[j] = column j's step (made by step_of(j)) over the r rows at red's offsets from xp, in
// sum_of's order.
template <class T, class S>
void column_sums(const T* xp, const Nest<1>& red, int64_t r, int64_t m, S step_of, double* out) {
  const int64_t whole = r / kSumLanes * kSumLanes;
  if (whole == 0) {  // fewer rows than lanes: straight into out (the lanes would sum to 0)
    std::fill_n(out, m, 0.0);
    red.run([&](const std::array<int64_t, 1>& o) {
      const T* row = xp + o[0];
      for (int64_t j = 0; j < m; ++j) out[j] = step_of(j)(out[j], static_cast<double>(row[j]));
    });
    return;
  }
  double lane[kSumLanes][kColumnBlock];
  for (auto& l : lane) std::fill_n(l, m, 0.0);
  auto combine = [&] {
    for (int64_t j = 0; j < m; ++j) out[j] = sum_lanes([&](int64_t l) { return lane[l][j]; });
  };
  int64_t i = 0;
  red.run([&](const std::array<int64_t, 1>& o) {
    const T* row = xp + o[0];
    if (i < whole) {
      double* acc = lane[i % kSumLanes];
      for (int64_t j = 0; j < m; ++j) acc[j] = step_of(j)(acc[j], static_cast<double>(row[j]));
    } else {
      if (i == whole) combine();
      for (int64_t j = 0; j < m; ++j) out[j] = step_of(j)(out[j], static_cast<double>(row[j]));
    }
    ++i;
  });
  if (whole == r) combine();
}

// op[j] for m contiguous kept columns xp[j], with the reduced rows at red's offsets (r of them).
// Rows stream into m accumulators rather than striding down each column; every column still
// sees its rows in order, as argmax's first-index rule needs.
template <class T, class O>
void reduce_columns(ReduceKind kind, const T* xp, const Nest<1>& red, int64_t r, int64_t m, O* op,
                    bool unbiased) {
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean: {
      Acc<T> acc[kColumnBlock];
      if constexpr (std::is_floating_point_v<T>) {
        column_sums(
            xp, red, r, m, [](int64_t) { return kPlus; }, acc);
      } else {
        std::fill_n(acc, m, 0);
        red.run([&](const std::array<int64_t, 1>& o) {
          const T* row = xp + o[0];
          for (int64_t j = 0; j < m; ++j) acc[j] += Acc<T>(row[j]);
        });
      }
      for (int64_t j = 0; j < m; ++j) op[j] = sum_result<O>(kind, acc[j], r);
      return;
    }
    case ReduceKind::Var:
    case ReduceKind::Std: {
      double mean[kColumnBlock], ss[kColumnBlock];
      column_sums(
          xp, red, r, m, [](int64_t) { return kPlus; }, mean);
      for (int64_t j = 0; j < m; ++j) mean[j] /= static_cast<double>(r);
      column_sums(
          xp, red, r, m, [&](int64_t j) { return squares_about(mean[j]); }, ss);
      for (int64_t j = 0; j < m; ++j) op[j] = var_result<O>(kind, ss[j], r, unbiased);
      return;
    }
    default: {
      const bool is_max = kind == ReduceKind::Amax || kind == ReduceKind::Argmax;
      const bool is_arg = kind == ReduceKind::Argmax || kind == ReduceKind::Argmin;
      T best[kColumnBlock];
      int64_t bi[kColumnBlock];
      if (is_max)
        best_columns<true>(xp, red, m, best, bi);
      else
        best_columns<false>(xp, red, m, best, bi);
      for (int64_t j = 0; j < m; ++j)
        op[j] = is_arg ? static_cast<O>(bi[j]) : static_cast<O>(best[j]);
      return;
    }
  }
}

template <class T, class O>
void reduce_typed(ReduceKind kind, const Tensor& x, const std::vector<bool>& is_red,
                  const Tensor& out, bool unbiased) {
  Shape rs, ks;
  Strides rst, kst;
  for (int64_t d = 0; d < x.dim(); ++d) {
    (is_red[d] ? rs : ks).push_back(x.shape()[d]);
    (is_red[d] ? rst : kst).push_back(x.strides()[d]);
  }
  // Merging keeps row-major order, so argmax indexes still count in the logical order.
  const Nest<1> red(rs, {rst}), kept(ks, {kst});
  const int64_t r = shape_numel(rs);
  const T* xp = ptr<T>(x);
  O* op = ptr<O>(out);
  int64_t slot = 0;
  // Every slot's reduced elements are one contiguous run.
  if (red.shape.empty() || (red.shape.size() == 1 && red.st[0][0] == 1)) {
    kept.run([&](const std::array<int64_t, 1>& o) {
      op[slot++] = reduce_slot<T, O>(kind, r, Run<T>{xp + o[0]}, unbiased);
    });
    return;
  }
  // The innermost kept dims are contiguous: reduce blocks of columns.
  if (!kept.shape.empty() && kept.st[0].back() == 1) {
    const int64_t m = kept.shape.back();
    Shape outer_shape(kept.shape.begin(), kept.shape.end() - 1);
    Strides outer_strides(kept.st[0].begin(), kept.st[0].end() - 1);
    Nest<1>(outer_shape, {outer_strides}).run([&](const std::array<int64_t, 1>& o) {
      for (int64_t j = 0; j < m; j += kColumnBlock)
        reduce_columns<T, O>(kind, xp + o[0] + j, red, r, std::min(kColumnBlock, m - j),
                             op + slot + j, unbiased);
      slot += m;
    });
    return;
  }
  std::vector<int64_t> offsets;
  try {
    offsets.reserve(r);
  } catch (const std::exception&) {  // length_error or bad_alloc: r of an expanded x is unbounded
    throw_error<RuntimeError>("[", reduce_name(kind), "] cannot allocate the offsets of ", r,
                              " reduced elements (input of shape ", x.shape(), ")");
  }
  red.run([&](const std::array<int64_t, 1>& o) { offsets.push_back(o[0]); });
  kept.run([&](const std::array<int64_t, 1>& o) {
    op[slot++] = reduce_slot<T, O>(kind, r, Gather<T>{xp + o[0], offsets.data()}, unbiased);
  });
}

}  // namespace

Tensor reduce(ReduceKind kind, const Tensor& x, const IntList& dims, bool keepdim, bool unbiased) {
  Shape out_shape, keep_shape = x.shape();
  std::vector<bool> red(x.dim(), false);
  for (int64_t d : dims) red[d] = true;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (red[d])
      keep_shape[d] = 1;
    else
      out_shape.push_back(x.shape()[d]);
  }
  DType out_dtype;
  switch (kind) {
    case ReduceKind::Sum:
      out_dtype = is_floating(x.dtype()) ? x.dtype() : DType::Int64;
      break;
    case ReduceKind::Argmax:
    case ReduceKind::Argmin:
      out_dtype = DType::Int64;
      break;
    default:
      out_dtype = x.dtype();
  }
  Tensor out = Tensor::empty(out_shape, out_dtype);
  count_kernel(KernelKind::Reduce);
  if (out.numel() > 0) {
    visit_dtype(x.dtype(), [&](auto xt) {
      visit_dtype(out_dtype, [&](auto ot) {
        using T = decltype(xt);
        using O = decltype(ot);
        // Only the meaningful (T, O) pairs are instantiated.
        if constexpr (std::is_same_v<T, O> || std::is_same_v<O, int64_t>)
          reduce_typed<T, O>(kind, x, red, out, unbiased);
      });
    });
  }
  if (keepdim)
    return Tensor::from_storage_unchecked(out.storage(), out_dtype, keep_shape,
                                          contiguous_strides(keep_shape));
  return out;
}

double row_sum(const float* p, int64_t n) { return run_sum(p, n, kPlus); }
double row_sum(const double* p, int64_t n) { return run_sum(p, n, kPlus); }
double row_sum_squares(const float* p, int64_t n, double m) {
  return run_sum(p, n, squares_about(m));
}
double row_sum_squares(const double* p, int64_t n, double m) {
  return run_sum(p, n, squares_about(m));
}

}  // namespace td::kernels::TD_ISA
