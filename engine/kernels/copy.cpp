// Copies and casts between tensors of any strides (copy_into), and im2col's strided row copies
// (copy_rows). A strided destination goes through an xt::adapt view (the only use of xtensor),
// a contiguous one through the merged strided loop.
#include <cstring>
#include <type_traits>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnoalias.hpp>

#include "engine/dispatch.h"
#include "engine/kernels/kernels.h"
#include "engine/kernels/simd.h"
#include "engine/kernels/strided.h"

namespace td::kernels::TD_ISA {
namespace {

template <class T>
auto adapt(const Tensor& t, const Shape& shape, const Strides& strides) {
  std::vector<size_t> sh(shape.begin(), shape.end());
  std::vector<std::ptrdiff_t> st(strides.begin(), strides.end());
  // xtensor sizes the buffer as numel (it only indexes through the strides), and refuses any
  // other size for a non-owning buffer.
  return xt::adapt(ptr<T>(t), static_cast<size_t>(shape_numel(shape)), xt::no_ownership(), sh, st);
}

template <class S, class D>
void copy_typed(const Tensor& src, const Tensor& dst) {
  const Shape& shape = dst.shape();
  if (src.is_contiguous() && dst.is_contiguous() && src.shape() == shape) {
    const S* s = ptr<S>(src);
    D* d = ptr<D>(dst);
    const int64_t n = dst.numel();
    if constexpr (std::is_same_v<S, D>) {
      std::memcpy(d, s, static_cast<size_t>(n) * sizeof(D));
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<D>(s[i]);
    }
    return;
  }
  if (shape.empty()) {
    *ptr<D>(dst) = static_cast<D>(*ptr<S>(src));
    return;
  }
  if (dst.is_contiguous()) {
    // Gathering into a contiguous buffer: the merged strided loop beats xtensor's stepper.
    const S* s = ptr<S>(src);
    D* d = ptr<D>(dst);
    Nest<2> nest(shape, {broadcast_strides(src, shape), dst.strides()});
    nest.run([&](const std::array<int64_t, 2>& o) { d[o[1]] = static_cast<D>(s[o[0]]); });
    return;
  }
  auto s = adapt<S>(src, shape, broadcast_strides(src, shape));
  auto d = adapt<D>(dst, shape, dst.strides());
  xt::noalias(d) = xt::cast<D>(s);
}

#ifdef __AVX512F__
// A register of every other element of [a, b] (even lanes), and the masks of a row's tail.
inline __m512 evens(__m512 a, __m512 b) {
  return _mm512_permutex2var_ps(
      a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b);
}
inline __m512d evens(__m512d a, __m512d b) {
  return _mm512_permutex2var_pd(a, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), b);
}
inline __m512 load_masked(const float* p, uint32_t m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512d load_masked(const double* p, uint32_t m) { return _mm512_maskz_loadu_pd(m, p); }
inline void store_masked(float* p, uint32_t m, __m512 v) { _mm512_mask_storeu_ps(p, m, v); }
inline void store_masked(double* p, uint32_t m, __m512d v) { _mm512_mask_storeu_pd(p, m, v); }
#endif

template <class T>
void copy_rows_typed(const T* src, int64_t src_rows, int step, T* dst, int64_t dst_rows, int64_t n,
                     int64_t rows) {
#ifdef __AVX512F__
  constexpr int64_t W = 64 / sizeof(T);  // lanes
  constexpr uint32_t all = (1u << W) - 1;
  auto mask = [](int64_t k) { return k >= W ? all : k <= 0 ? 0u : (1u << k) - 1; };
  // W outputs take step * (W - 1) + 1 inputs; the row's tail masked
  const int64_t full = n / W * W, rest = n - full;
  const uint32_t tail = mask(rest);
  if (step == 1) {
    for (int64_t r = 0; r < rows; ++r, src += src_rows, dst += dst_rows) {
      for (int64_t k = 0; k < full; k += W) store_masked(dst + k, all, load_masked(src + k, all));
      if (rest > 0) store_masked(dst + full, tail, load_masked(src + full, tail));
    }
    return;
  }
  if (step == 2) {
    const int64_t need = 2 * rest - 1;
    const uint32_t ma = mask(need), mb = mask(need - W);
    for (int64_t r = 0; r < rows; ++r, src += src_rows, dst += dst_rows) {
      for (int64_t k = 0; k < full; k += W)
        store_masked(dst + k, all,
                     evens(load_masked(src + 2 * k, all), load_masked(src + 2 * k + W, all >> 1)));
      if (rest > 0)
        store_masked(dst + full, tail,
                     evens(load_masked(src + 2 * full, ma), load_masked(src + 2 * full + W, mb)));
    }
    return;
  }
#endif
  for (int64_t r = 0; r < rows; ++r, src += src_rows, dst += dst_rows)
    for (int64_t k = 0; k < n; ++k) dst[k] = src[step * k];
}

}  // namespace

void copy_into(const Tensor& src, const Tensor& dst) {
  if (src.dim() > dst.dim() || broadcast_shapes("copy_", src.shape(), dst.shape()) != dst.shape())
    throw_error<ValueError>("[copy_] source of shape ", shape_str(src.shape()),
                            " does not broadcast to the destination shape ",
                            shape_str(dst.shape()));
  count_kernel(KernelKind::Copy);
  if (dst.numel() == 0) return;
  visit_dtype(src.dtype(), [&](auto s) {
    visit_dtype(dst.dtype(), [&](auto d) { copy_typed<decltype(s), decltype(d)>(src, dst); });
  });
}

void copy_rows(const float* src, int64_t src_rows, int step, float* dst, int64_t dst_rows,
               int64_t n, int64_t rows) {
  copy_rows_typed(src, src_rows, step, dst, dst_rows, n, rows);
}
void copy_rows(const double* src, int64_t src_rows, int step, double* dst, int64_t dst_rows,
               int64_t n, int64_t rows) {
  copy_rows_typed(src, src_rows, step, dst, dst_rows, n, rows);
}

}  // namespace td::kernels::TD_ISA
