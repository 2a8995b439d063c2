// Copies and casts between tensors of any strides (copy_into). A strided destination goes
// through an xt::adapt view (the only use of xtensor), a contiguous one through the merged
// strided loop.
#include <cstring>
#include <type_traits>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnoalias.hpp>

#include "engine/dispatch.h"
#include "engine/kernels/kernels.h"
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
  // Rows contiguous on both sides (a slot of cat's or stack's output, a slice): row by row.
  Nest<2> nest(shape, {broadcast_strides(src, shape), dst.strides()});
  if (nest.inner_stride(0) == 1 && nest.inner_stride(1) == 1) {
    const S* s = ptr<S>(src);
    D* d = ptr<D>(dst);
    nest.rows([&](const std::array<int64_t, 2>& o, int64_t n) {
      if constexpr (std::is_same_v<S, D>) {
        std::memcpy(d + o[1], s + o[0], static_cast<size_t>(n) * sizeof(D));
      } else {
        for (int64_t i = 0; i < n; ++i) d[o[1] + i] = static_cast<D>(s[o[0] + i]);
      }
    });
    return;
  }
  auto s = adapt<S>(src, shape, broadcast_strides(src, shape));
  auto d = adapt<D>(dst, shape, dst.strides());
  xt::noalias(d) = xt::cast<D>(s);
}

}  // namespace

void copy_into(const Tensor& src, const Tensor& dst) {
  // the ops check their shapes first, naming themselves: this guards the kernel's contract
  if (src.dim() > dst.dim() ||
      broadcast_shapes("copy_into", src.shape(), dst.shape()) != dst.shape())
    throw_error<ValueError>("[copy_into] source of shape ", shape_str(src.shape()),
                            " does not broadcast to the destination shape ",
                            shape_str(dst.shape()));
  count_kernel(KernelKind::Copy);
  if (dst.numel() == 0) return;
  visit_dtype(src.dtype(), [&](auto s) {
    visit_dtype(dst.dtype(), [&](auto d) { copy_typed<decltype(s), decltype(d)>(src, dst); });
  });
}

}  // namespace td::kernels::TD_ISA
