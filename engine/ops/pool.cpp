// max_pool2d and avg_pool2d: parameter and shape checks, then the kernel of pool.cpp in
// engine/kernels/.
#include "engine/kernels/kernels.h"
#include "engine/ops.h"
#include "engine/ops/impls.h"
#include "engine/ops/nn_args.h"

namespace td {
namespace impl {
namespace {

// Output length of a pool over n (input length L, padding p), room = L + 2p - d(k-1) - 1 >= 0.
// ceil_mode (torch's rule): ceil(room / s) + 1, less one if the last window would start at or past
// L + p, that is in the right padding only. Windows past the end take the elements that exist.
// room < 0 (a window longer than the padded input) leaves ceil_mode one window when room > -s.
int64_t pool_out(int64_t room, int64_t s, int64_t n, int64_t p, bool ceil_mode) {
  int64_t steps = room / s;  // rounded to zero: floor for room >= 0
  if (room % s != 0 && room < 0) --steps;
  if (ceil_mode && room % s != 0) {
    ++steps;
    int64_t last_start;  // steps * s; on overflow it is certainly past n + p (<= INT64_MAX)
    if (__builtin_mul_overflow(steps, s, &last_start) || last_start >= n + p) --steps;
  }
  return steps + 1;
}

// x: [C, H, W] or [N, C, H, W] (rank checked by the caller), a (per-set, `kind`) shape.
kernels::PoolGeom pool_geom(const char* op, const char* kind, const Shape& x, const PoolAttrs& a,
                            bool with_dilation) {
  kernels::PoolGeom g{};
  g.k = pair_param(op, "kernel_size", a.kernel, 1);
  g.stride = a.stride.empty() ? g.k : pair_param(op, "stride", a.stride, 1);
  g.pad = pair_param(op, "padding", a.padding.empty() ? IntList{0} : a.padding, 0);
  g.dil = with_dilation
              ? pair_param(op, "dilation", a.dilation.empty() ? IntList{1} : a.dilation, 1)
              : std::array<int64_t, 2>{1, 1};
  for (int d = 0; d < 2; ++d)
    if (g.pad[d] > g.k[d] / 2)
      throw_error<ValueError>("[", op,
                              "] padding should be at most half of kernel size, got padding ",
                              a.padding, " and kernel_size ", a.kernel);
  const size_t r = x.size();
  g.n = r == 4 ? x[0] : 1;
  g.c = x[r - 3];
  g.h = x[r - 2];
  g.w = x[r - 1];
  const int64_t ny = window_room(op, x, g.h, g.pad[0], g.k[0], g.dil[0]);
  const int64_t nx = window_room(op, x, g.w, g.pad[1], g.k[1], g.dil[1]);
  g.oh = pool_out(ny, g.stride[0], g.h, g.pad[0], a.ceil_mode);
  g.ow = pool_out(nx, g.stride[1], g.w, g.pad[1], a.ceil_mode);
  if (g.oh < 1 || g.ow < 1)
    throw_error<ValueError>("[", op, "] input of ", kind, " ", x, " is too small for kernel ",
                            a.kernel, " with padding ", g.pad[0], "x", g.pad[1], " and dilation ",
                            g.dil[0], "x", g.dil[1], (a.ceil_mode ? " (ceil_mode)" : ""));
  return g;
}

std::vector<Tensor> pool_impl(const char* op, std::span<const Tensor> in, const PoolAttrs& a,
                              bool is_max) {
  const Tensor& x = in[0];
  Tensor x4 = as_4d(op, x);
  check_floating(op, x);
  kernels::PoolGeom g = pool_geom(op, shape_word(), x.shape(), a, is_max);
  Tensor out = Tensor::empty({g.n, g.c, g.oh, g.ow}, x.dtype());
  const bool with_indices = is_max && a.with_indices;
  Tensor idx = with_indices ? Tensor::empty(out.shape(), DType::Int64) : Tensor();
  int64_t* ip = with_indices ? idx.data<int64_t>() : nullptr;
  count_kernel(KernelKind::Other);
  if (out.numel() > 0)
    kernels::pool2d(x4, out, ip, g, is_max, a.divisor_override.value_or(0), a.count_include_pad);
  auto shaped = [&](const Tensor& t) { return x.dim() == 3 ? t.squeeze(0) : t; };
  if (with_indices) return {shaped(out), shaped(idx)};
  return {shaped(out)};
}

}  // namespace

void check_pool2d(const char* op, const char* kind, const Shape& x, const PoolAttrs& a,
                  bool with_dilation) {
  pool_geom(op, kind, x, a, with_dilation);
}

std::vector<Tensor> max_pool2d_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return pool_impl("max_pool2d", in, attrs_as<PoolAttrs>(OpId::max_pool2d, attrs), true);
}

std::vector<Tensor> avg_pool2d_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  return pool_impl("avg_pool2d", in, attrs_as<PoolAttrs>(OpId::avg_pool2d, attrs), false);
}

}  // namespace impl

namespace {
PoolAttrs max_pool_attrs(const IntOrList& kernel_size, const IntOrList& stride,
                         const IntOrList& padding, const IntOrList& dilation, bool ceil_mode) {
  return {.kernel = kernel_size.values,
          .stride = stride.values,
          .padding = padding.values,
          .dilation = dilation.values,
          .ceil_mode = ceil_mode};
}
}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const IntOrList& kernel_size,
                                                   const IntOrList& stride,
                                                   const IntOrList& padding,
                                                   const IntOrList& dilation, bool ceil_mode) {
  PoolAttrs a = max_pool_attrs(kernel_size, stride, padding, dilation, ceil_mode);
  a.with_indices = true;
  const Tensor in[] = {x};
  std::vector<Tensor> r = call_op(OpId::max_pool2d, in, a);
  return {r.at(0), r.at(1)};
}

Tensor max_pool2d(const Tensor& x, const IntOrList& kernel_size, const IntOrList& stride,
                  const IntOrList& padding, const IntOrList& dilation, bool ceil_mode) {
  return call_op1(OpId::max_pool2d, {x},
                  max_pool_attrs(kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool2d(const Tensor& x, const IntOrList& kernel_size, const IntOrList& stride,
                  const IntOrList& padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  if (divisor_override == 0)
    throw_error<ValueError>("[avg_pool2d] divisor_override must be nonzero, got 0 (input of ",
                            shape_word(), " ", x.shape(), ")");
  const PoolAttrs a{.kernel = kernel_size.values,
                    .stride = stride.values,
                    .padding = padding.values,
                    .ceil_mode = ceil_mode,
                    .count_include_pad = count_include_pad,
                    .divisor_override = divisor_override};
  return call_op1(OpId::avg_pool2d, {x}, a);
}

}  // namespace td
