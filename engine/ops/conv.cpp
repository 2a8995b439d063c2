// conv2d: argument and shape checks, then a direct kernel for depthwise float filters, Winograd's
// F(2x2, 3x3) for float 3x3 stride-1 filters over enough channels and outputs, or a GEMM per
// bank of filters: small float filters by the register-blocked kernel, reading the receptive
// fields in place (from x or a copy laid out for it), straight into each output plane; the rest
// im2col, a batched GEMM and a scatter into the output (the kernels of depthwise.cpp,
// winograd.cpp, conv.cpp, small_gemm.cpp and gemm.cpp).
#include <algorithm>

#include "engine/kernels/kernels.h"
#include "engine/ops.h"
#include "engine/ops/impls.h"
#include "engine/ops/nn_args.h"
#include "engine/parallel.h"

namespace td {
namespace impl {
namespace {

// conv2d's geometry and shape checks on x [C, H, W] or [N, C, H, W] (rank checked by the
// caller), w and b's (per-set, `kind`) shapes.
kernels::ConvGeom conv_geom(const char* kind, const Shape& x, const Shape& w, const Shape* b,
                            const ConvAttrs& a) {
  if (w.size() != 4)
    throw_error<ValueError>("[conv2d] weight must be 4-D [out, in/groups, kh, kw], got ", kind, " ",
                            w);
  kernels::ConvGeom g{};
  g.stride = pair_param("conv2d", "stride", a.stride.empty() ? IntList{1} : a.stride, 1);
  g.pad = pair_param("conv2d", "padding", a.padding.empty() ? IntList{0} : a.padding, 0);
  g.dil = pair_param("conv2d", "dilation", a.dilation.empty() ? IntList{1} : a.dilation, 1);
  g.groups = a.groups;
  const size_t r = x.size();
  g.n = r == 4 ? x[0] : 1;
  g.cin = x[r - 3];
  g.h = x[r - 2];
  g.w = x[r - 1];
  g.cout = w[0];
  g.kh = w[2];
  g.kw = w[3];
  if (g.groups < 1) throw_error<ValueError>("[conv2d] groups must be >= 1, got ", g.groups);
  if (g.cin % g.groups != 0 || g.cout % g.groups != 0 || w[1] * g.groups != g.cin)
    throw_error<ValueError>("[conv2d] input of ", kind, " ", x, " and weight of ", kind, " ", w,
                            " do not match with groups=", g.groups,
                            " (expected weight [out, in/groups, kh, kw], out divisible by groups)");
  check_channels("conv2d", "bias", b, g.cout, kind, x);
  if (g.kh == 0 || g.kw == 0)
    throw_error<ValueError>("[conv2d] kernel size should be greater than zero, got weight of ",
                            kind, " ", w);
  const int64_t ny = window_room("conv2d", x, g.h, g.pad[0], g.kh, g.dil[0]);
  const int64_t nx = window_room("conv2d", x, g.w, g.pad[1], g.kw, g.dil[1]);
  if (ny < 0 || nx < 0)
    throw_error<ValueError>("[conv2d] kernel of ", kind, " ", w,
                            " (with dilation) is larger than the padded input of ", kind, " ", x);
  g.oh = ny / g.stride[0] + 1;
  g.ow = nx / g.stride[1] + 1;
  return g;
}
// A direct kernel's tasks [0, tasks), `madds` multiply-adds in all: on the worker threads past
// 4 MFLOP (one set's 8x32x16x16 3x3 depthwise layer, 1.2 MFLOP, ran slower on two).
template <class F>
void run_direct(int64_t tasks, int64_t madds, F&& f) {
  count_multiply_adds(madds);
  if (num_threads() > 1 && tasks > 1 && 2.0 * static_cast<double>(madds) > 4e6)
    parallel_for(tasks, f);
  else
    f(0, tasks);
}
}  // namespace

void check_conv2d(const char* kind, const Shape& x, const Shape& w, const Shape* b,
                  const ConvAttrs& a) {
  conv_geom(kind, x, w, b, a);
}

std::vector<Tensor> conv2d_impl(std::span<const Tensor> in, const OpAttrs& attrs) {
  const auto& a = attrs_as<ConvAttrs>(OpId::conv2d, attrs);
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const Tensor b = opt_input(in, 2);
  Tensor x4 = as_4d("conv2d", x);
  check_floating("conv2d", x);
  check_same_dtype("conv2d", x, w, "weight");
  check_same_dtype("conv2d", x, b, "bias");
  // `sets` banks of filters over the one input (vmap's ensemble on a shared input): the input's
  // columns are made once, and each bank's GEMM is the one a call with that bank alone makes
  // (one GEMM of all banks' rows would round differently, so chunking would change the bits)
  const int64_t sets = a.sets;
  if (sets < 1 || w.dim() != 4 || w.size(0) % sets != 0 ||
      (b.defined() && b.dim() == 1 && b.size(0) % sets != 0))
    throw_error<ValueError>("[conv2d] weight of ", shape_word(), " ", w.shape(), " and bias of ",
                            shape_word(), " ", b.defined() ? b.shape() : Shape{},
                            " do not split into ", sets, " sets of filters");
  Shape ws = w.shape(), bs = b.defined() ? b.shape() : Shape{};
  ws[0] /= sets;
  if (b.defined() && b.dim() == 1) bs[0] /= sets;
  const kernels::ConvGeom g =
      conv_geom(shape_word(), x.shape(), ws, b.defined() ? &bs : nullptr, a);
  const int64_t ckk = (g.cin / g.groups) * g.kh * g.kw, l = g.n * g.oh * g.ow;
  const int64_t og = g.cout / g.groups;

  const int64_t cout = sets * g.cout;
  // An eval-mode BatchNorm folded in (conv2d_batch_norm): batch_norm's factors per output channel
  std::vector<double> bn_scale, bn_shift;
  if (a.batch_norm) {
    const Tensor rm = opt_input(in, 3), rv = opt_input(in, 4);
    const Tensor bw = opt_input(in, 5), bb = opt_input(in, 6);
    if (!rm.defined() || !rv.defined())
      throw_error<ValueError>("[conv2d] a folded batch_norm needs running_mean and running_var");
    for (const auto& [t, name] :
         {std::pair{&rm, "running_mean"}, std::pair{&rv, "running_var"},
          std::pair{&bw, "batch_norm weight"}, std::pair{&bb, "batch_norm bias"}}) {
      if (!t->defined()) continue;
      if (t->dim() != 1 || t->size(0) != cout)
        throw_error<ValueError>("[conv2d] ", name, " of ", shape_word(), " ", t->shape(),
                                " does not match the output's ", cout, " channels (weight of ",
                                shape_word(), " ", w.shape(), ")");
      check_same_dtype("conv2d", x, *t, name);
    }
    bn_scale.resize(cout);
    bn_shift.resize(cout);
    const std::vector<double> mean = rm.to_vector<double>(), var = rv.to_vector<double>();
    const std::vector<double> bnw = values_or(bw, cout, 1.0), bnb = values_or(bb, cout, 0.0);
    kernels::batch_norm_factors(cout, mean.data(), var.data(), bnw.data(), bnb.data(), a.bn_eps,
                                bn_scale.data(), bn_shift.data());
  }
  // with a BatchNorm the ReLU follows it: in its pass, not in the convolution's store
  const bool relu = a.fused_relu && !a.batch_norm;
  Tensor out = Tensor::empty({g.n, cout, g.oh, g.ow}, x.dtype());
  std::vector<double> bias = values_or(b, cout, 0.0);
  count_kernel(KernelKind::Conv);
  if (out.numel() == 0) return {x.dim() == 3 ? out.squeeze(0) : out};
  // the result, after the folded BatchNorm's pass where the kernel did not apply it
  auto result = [&](bool bn_pending) -> std::vector<Tensor> {
    if (bn_pending) {
      const int64_t s = g.oh * g.ow;
      if (out.dtype() == DType::Float32)
        kernels::batch_norm_scale_shift(out.data<float>(), out.data<float>(), g.n, cout, s,
                                        bn_scale.data(), bn_shift.data(), a.fused_relu);
      else
        kernels::batch_norm_scale_shift(out.data<double>(), out.data<double>(), g.n, cout, s,
                                        bn_scale.data(), bn_shift.data(), a.fused_relu);
    }
    return {x.dim() == 3 ? out.squeeze(0) : out};
  };
  // Depthwise (one input channel per group; vmap's per-set inputs stay so): a direct kernel
  // from padded input planes, a task per image and input channel. By shape alone, as below.
  if (x.dtype() == DType::Float32 && g.cin == g.groups) {
    const Tensor wd = w.contiguous();
    const std::vector<float> fb(bias.begin(), bias.end());
    auto planes = [&](int64_t t0, int64_t t1) {
      kernels::conv_depthwise(x4, g, wd.data<float>(), b.defined() ? fb.data() : nullptr, relu, out,
                              t0, t1);
    };
    run_direct(g.n * g.cin, out.numel() * g.kh * g.kw, planes);
    return result(a.batch_norm);
  }
  // 3x3 filters, stride 1, over enough channels and outputs: Winograd's F(2x2, 3x3), 16
  // multiply-adds per 2x2 outputs and channel instead of 36. By the group's shape alone, as
  // below. Counted as the direct convolution's multiply-adds (the work it stands for).
  const int64_t cg = g.cin / g.groups;
  if (x.dtype() == DType::Float32 && g.kh == 3 && g.kw == 3 && g.stride[0] == 1 &&
      g.stride[1] == 1 && g.dil[0] == 1 && g.dil[1] == 1 &&
      kernels::winograd_pays(cg, og, g.oh, g.ow)) {
    const Tensor wc = w.contiguous();
    std::vector<float> u(16 * sets * g.cout * cg);
    std::vector<uint8_t> finite(sets * g.groups);
    kernels::winograd_filters(wc.data<float>(), sets * g.cout, cg, og, u.data(), finite.data());
    const std::vector<float> fbias(bias.begin(), bias.end());
    // t = (group * N + image) * sets + bank: the banks of one image's group share its tiles
    auto tiles = [&](int64_t t0, int64_t t1) {
      kernels::conv_winograd(x4, g, wc.data<float>(), u.data(), finite.data(),
                             b.defined() ? fbias.data() : nullptr, relu, out, t0, t1);
    };
    run_direct(sets * g.groups * g.n, out.numel() * ckk, tiles);
    return result(a.batch_norm);
  }
  // Small float filters times output planes of a few panels each: our register-blocked kernel
  // writes each image's plane of a group's channels in place, bias included (no scatter pass),
  // its panels read from x itself (or from a zero-padded copy of the image's channels, split
  // into phases by the stride), most of them in place: no column matrix. A choice by shape
  // alone, so a set gets the same bits batched, chunked or looped.
  const int64_t hw = g.oh * g.ow;
  if (x.dtype() == DType::Float32 && hw >= 64 && kernels::small_gemm_pays(og, hw, ckk, false)) {
    Tensor wc = w.contiguous();
    const std::vector<float> fbias(bias.begin(), bias.end());
    // t = (group * N + image) * sets + bank: the banks of one image's group share its copy
    auto planes = [&](int64_t t0, int64_t t1) {
      kernels::conv_planes(x4, g, wc.data<float>(), b.defined() ? fbias.data() : nullptr,
                           a.batch_norm ? bn_scale.data() : nullptr,
                           a.batch_norm ? bn_shift.data() : nullptr, a.fused_relu, out, t0, t1);
    };
    run_direct(sets * g.groups * g.n, out.numel() * ckk, planes);
    return result(false);
  }
  // Groups a block at a time, the block's columns about the size of the L2 cache: vmap folds
  // the sets of a per-set input into groups, and all their columns at once outgrew the cache
  // (16 sets of a 16-channel 3x3 layer on 8 32x32 images: 75 MB).
  const int64_t group_bytes = std::max<int64_t>(ckk * l * dtype_size(x.dtype()), 1);
  const int64_t block = std::clamp<int64_t>((int64_t{1} << 20) / group_bytes, 1, g.groups);
  for (int64_t g0 = 0; g0 < g.groups; g0 += block) {
    const int64_t g1 = std::min(g0 + block, g.groups), gb = g1 - g0;
    Tensor cols = Tensor::empty({gb, ckk, l}, x.dtype());
    kernels::im2col(x4, g, g0, g1, cols);
    for (int64_t s = 0; s < sets; ++s) {
      // [gb, Og, Cg*kh*kw] @ [gb, Cg*kh*kw, N*OH*OW]: the block's groups in one batched GEMM
      const int64_t ch0 = s * g.cout + g0 * og;  // the block's first output channel
      Tensor bank = w.narrow(0, ch0, gb * og).reshape({gb, og, ckk});
      Tensor res = kernels::bmm(bank, cols);
      kernels::conv_scatter(res, out, g, ch0, gb * og, bias.data());
    }
  }
  if (relu) out = kernels::unary(kernels::UnaryKind::Relu, out, out.dtype());
  return result(a.batch_norm);
}

}  // namespace impl

ConvPadding::ConvPadding(const std::string& m) : mode(m) {
  if (mode != "same" && mode != "valid")
    throw_error<ValueError>("[conv2d] invalid padding string '", mode,
                            "', should be one of 'valid' or 'same'");
}

std::array<int64_t, 4> conv_same_padding(int64_t kh, int64_t kw, int64_t dh, int64_t dw,
                                         const char* op) {
  int64_t th = 0, tw = 0;
  if (__builtin_mul_overflow(dh, kh - 1, &th) || __builtin_mul_overflow(dw, kw - 1, &tw))
    throw_error<ValueError>("[", op, "] padding='same' with kernel_size (", kh, ", ", kw,
                            ") and dilation (", dh, ", ", dw, ") overflows int64");
  return {tw / 2, tw - tw / 2, th / 2, th - th / 2};
}

namespace {
// conv2d_batch_norm's BatchNorm
struct FoldedBatchNorm {
  const Tensor &running_mean, &running_var, &weight, &bias;
  double eps;
};

Tensor conv2d_call(const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const IntOrList& stride, const ConvPadding& padding, const IntOrList& dilation,
                   int64_t groups, bool relu, const FoldedBatchNorm* bn = nullptr) {
  // the op reads an empty list as the default; from a caller it is a mistake, as in torch
  auto refuse_empty = [](const char* what, const IntList& v) {
    if (v.empty()) throw_error<ValueError>("[conv2d] ", what, " must have 1 or 2 values, got []");
  };
  refuse_empty("stride", stride.values);
  refuse_empty("dilation", dilation.values);
  if (padding.mode.empty()) refuse_empty("padding", padding.values);
  ConvAttrs a{.stride = stride.values,
              .padding = padding.mode.empty() ? padding.values : IntList{0, 0},
              .dilation = dilation.values,
              .groups = groups,
              .fused_relu = relu,
              .batch_norm = bn != nullptr,
              .bn_eps = bn ? bn->eps : 0.0};
  std::vector<Tensor> inputs{x, weight, bias};
  if (bn) inputs.insert(inputs.end(), {bn->running_mean, bn->running_var, bn->weight, bn->bias});
  const IntList& d = dilation.values;
  // what the op would refuse (no weight, one not 4-D or with an empty kernel, a dilation not
  // positive) it refuses with the shapes
  if (padding.mode == "same" && weight.defined() && weight.dim() == 4 && weight.size(2) > 0 &&
      weight.size(3) > 0 && (d.size() == 1 || d.size() == 2) &&
      std::all_of(d.begin(), d.end(), [](int64_t v) { return v > 0; })) {
    if (std::any_of(a.stride.begin(), a.stride.end(), [](int64_t s) { return s != 1; }))
      throw_error<ValueError>("[conv2d] padding='same' is not supported for strided convolutions");
    const auto p = conv_same_padding(weight.size(2), weight.size(3), d[0], d.back());
    if (p[0] != p[1] || p[2] != p[3]) {  // an odd total: its extra element goes last
      inputs[0] = pad(x, {p[0], p[1], p[2], p[3]});
      return call_op(OpId::conv2d, inputs, a)[0];
    }
    a.padding = {p[2], p[0]};
  }
  return call_op(OpId::conv2d, inputs, a)[0];
}
}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const IntOrList& stride,
              const ConvPadding& padding, const IntOrList& dilation, int64_t groups) {
  return conv2d_call(x, weight, bias, stride, padding, dilation, groups, false);
}

Tensor conv2d_relu(const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const IntOrList& stride, const ConvPadding& padding, const IntOrList& dilation,
                   int64_t groups) {
  return conv2d_call(x, weight, bias, stride, padding, dilation, groups, true);
}

Tensor conv2d_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         const IntOrList& stride, const ConvPadding& padding,
                         const IntOrList& dilation, int64_t groups, const Tensor& running_mean,
                         const Tensor& running_var, const Tensor& bn_weight, const Tensor& bn_bias,
                         double eps, bool relu) {
  const FoldedBatchNorm bn{running_mean, running_var, bn_weight, bn_bias, eps};
  return conv2d_call(x, weight, bias, stride, padding, dilation, groups, relu, &bn);
}

}  // namespace td

namespace td {

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, const IntOrList& stride,
              const ConvPadding& padding, const IntOrList& dilation, int64_t groups) {
  auto one = [](const char* what, const IntList& v) {
    if (v.size() != 1) throw_error<ValueError>("[conv1d] ", what, " must have 1 value, got ", v);
    return v[0];
  };
  const int64_t s = one("stride", stride.values), d = one("dilation", dilation.values);
  const int64_t p = padding.mode.empty() ? one("padding", padding.values) : 0;
  if (x.dim() != 2 && x.dim() != 3)
    throw_error<ValueError>("[conv1d] expects a 2-D or 3-D input, got ", shape_word(), " ",
                            x.shape());
  if (!weight.defined() || weight.dim() != 3)
    throw_error<ValueError>("[conv1d] weight must be 3-D [out, in/groups, k], got ", shape_word(),
                            " ", weight.defined() ? weight.shape() : Shape{});
  if (groups >= 1 && weight.size(1) * groups != x.size(x.dim() - 2))
    throw_error<ValueError>("[conv1d] input of ", shape_word(), " ", x.shape(), " and weight of ",
                            shape_word(), " ", weight.shape(), " do not match with groups=", groups,
                            " (expected weight [out, in/groups, k])");
  Tensor xp = x;
  int64_t pad_lr = p;
  if (padding.mode == "same" && weight.size(2) > 0 && d > 0) {
    if (s != 1)
      throw_error<ValueError>("[conv1d] padding='same' is not supported for strided convolutions");
    const auto lr = conv_same_padding(1, weight.size(2), 1, d, "conv1d");
    pad_lr = lr[0];
    if (lr[0] != lr[1]) {  // an odd total: its extra element goes last, as torch
      xp = pad(x, {lr[0], lr[1]});
      pad_lr = 0;
    }
  }
  // conv2d's errors speak of 4-D shapes: name conv1d and the shapes given to it instead
  try {
    return conv2d(xp.unsqueeze(-2), weight.unsqueeze(2), bias, {1, s}, {0, pad_lr}, {1, d}, groups)
        .squeeze(-2);
  } catch (const ValueError& e) {
    const std::string m = e.what();
    throw_error<ValueError>("[conv1d] input of ", shape_word(), " ", x.shape(), ", weight of ",
                            shape_word(), " ", weight.shape(), ": ",
                            m.rfind("[conv2d] ", 0) == 0 ? m.substr(9) : m);
  }
}

}  // namespace td
