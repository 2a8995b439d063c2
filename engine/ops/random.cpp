// Random ops on the unbatched path: every rand/randn call takes one Philox stream, so a draw is
// a pure function of (seed, call number, set key, element index).
#include "engine/random.h"

#include "engine/dispatch.h"
#include "engine/ops.h"
#include "engine/kernels/kernels.h"
#include "engine/ops/draws.h"
#include "engine/ops/impls.h"

namespace td {
namespace {

// A probability p of dropout or dropout_mask, NaN refused too (p < 0 || p > 1 lets it through)
void check_probability(const char* op, double p) {
  if (!(p >= 0 && p <= 1))
    throw_error<ValueError>("[", op, "] probability must be in [0, 1], got ", p);
}

}  // namespace

namespace impl {
namespace {

std::vector<Tensor> draw(OpId id, const OpAttrs& any) {
  const char* op = op_name(id);
  const auto& attrs = attrs_as<RandomAttrs>(id, any);
  check_sizes(op, attrs.shape);
  check_random_dtype(id, attrs.dtype);
  Tensor out = Tensor::empty(attrs.shape, attrs.dtype);
  const uint64_t stream = next_rng_stream();
  const RngState st = rng_state();
  count_kernel(KernelKind::Random);
  fill_random(id, attrs, out.raw_data(), out.numel(), st.seed, stream, st.set_key);
  return {out};
}

}  // namespace

void check_random_dtype(OpId op, DType dtype) {
  if (op == OpId::randperm ? dtype != DType::Int64 : !is_floating(dtype))
    throw_error<TypeError>("[", op_name(op), "] needs ",
                           op == OpId::randperm ? "int64" : "a floating dtype", ", got ",
                           dtype_name(dtype));
}

void fill_random(OpId op, const RandomAttrs& attrs, void* out, int64_t n, uint64_t seed,
                 uint64_t stream, uint64_t key) {
  if (op == OpId::randperm) {
    kernels::philox_permutation(static_cast<int64_t*>(out), n, seed, stream, key);
  } else if (op == OpId::dropout_mask) {
    if (attrs.dtype != DType::Float32)
      throw_error<TypeError>("[dropout_mask] draws float32 masks, got ", dtype_name(attrs.dtype));
    kernels::philox_keep_mask(static_cast<float*>(out), n, attrs.p, seed, stream, key);
  } else if (attrs.dtype == DType::Float32) {
    auto* p = static_cast<float*>(out);
    op == OpId::randn ? kernels::philox_normal(p, n, seed, stream, key, 0)
                      : kernels::philox_uniform(p, n, seed, stream, key, 0);
  } else {
    auto* p = static_cast<double*>(out);
    op == OpId::randn ? kernels::philox_normal(p, n, seed, stream, key, 0)
                      : kernels::philox_uniform(p, n, seed, stream, key, 0);
  }
}

void fused_dropout(const Tensor& x, const Tensor& out, double p, uint64_t stream, uint64_t key) {
  const uint64_t seed = rng_state().seed;
  if (x.dtype() == DType::Float32)
    kernels::philox_dropout(x.data<float>(), out.data<float>(), x.numel(), p, seed, stream, key);
  else
    kernels::philox_dropout(x.data<double>(), out.data<double>(), x.numel(), p, seed, stream, key);
}

namespace {

const Tensor& single(const char* op, std::span<const Tensor> in) {
  if (in.size() != 1 || !in[0].defined())
    throw_error<ValueError>("[", op, "] expected one defined input tensor");
  return in[0];
}

}  // namespace

std::vector<Tensor> rand_impl(std::span<const Tensor>, const OpAttrs& attrs) {
  return draw(OpId::rand, attrs);
}
std::vector<Tensor> dropout_mask_impl(std::span<const Tensor>, const OpAttrs& attrs) {
  return draw(OpId::dropout_mask, attrs);
}
std::vector<Tensor> randn_impl(std::span<const Tensor>, const OpAttrs& attrs) {
  return draw(OpId::randn, attrs);
}
std::vector<Tensor> randperm_impl(std::span<const Tensor>, const OpAttrs& attrs) {
  return draw(OpId::randperm, attrs);
}

std::vector<Tensor> bernoulli_impl(std::span<const Tensor> in, const OpAttrs&) {
  const Tensor& p = single("bernoulli", in);
  if (!is_floating(p.dtype()))
    throw_error<TypeError>("[bernoulli] p of shape ", shape_str(p.shape()),
                           " needs a floating dtype, got ", dtype_name(p.dtype()));
  // Probabilities outside [0, 1] (or NaN) raise, as in PyTorch. Inside vmap's decomposition p
  // may carry tags: its physical array holds every set's values, all checked at once.
  for (double v : all_sets(p).to_vector<double>())
    if (!(v >= 0 && v <= 1))
      throw_error<ValueError>("[bernoulli] probabilities must be in [0, 1], got ", v,
                              " in p of shape ", p.shape());
  return {lt(rand(p.shape(), p.dtype()), p).to(p.dtype())};
}

std::vector<Tensor> dropout_impl(std::span<const Tensor> in, const OpAttrs& any) {
  const auto& attrs = attrs_as<RandomAttrs>(OpId::dropout, any);
  const Tensor& x = single("dropout", in);
  const double p = attrs.p;
  if (!is_floating(x.dtype()))
    throw_error<TypeError>("[dropout] input of shape ", shape_str(x.shape()),
                           " needs a floating dtype, got ", dtype_name(x.dtype()));
  check_probability("dropout", p);
  if (!attrs.training || p == 0) return {x};
  // x * 0 as torch, so an inf or NaN stays NaN (the fused pass multiplies dropped values by 0 too)
  if (p == 1) return {mul(x, 0.0)};
  if (x.is_batched()) {
    // inside vmap's decomposition: the ops take their own rules. Keep with probability 1 - p,
    // scale the kept values by 1 / (1 - p).
    Tensor keep = x.dtype() == kFloat32 ? dropout_mask(x.shape(), p)
                                        : ge(rand(x.shape(), x.dtype()), p).to(x.dtype());
    return {mul(mul(x, keep), 1.0 / (1.0 - p))};
  }
  // the same draws (one stream, as rand takes) and arithmetic in one pass
  Tensor xc = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  count_kernel(KernelKind::Random);
  fused_dropout(xc, out, p, next_rng_stream(), rng_state().set_key);
  return {out};
}

}  // namespace impl

Tensor rand(const Shape& shape, DType dtype) {
  return call_op1(OpId::rand, {}, RandomAttrs{.shape = shape, .dtype = dtype});
}
Tensor randn(const Shape& shape, DType dtype) {
  return call_op1(OpId::randn, {}, RandomAttrs{.shape = shape, .dtype = dtype});
}
Tensor randperm(int64_t n, DType dtype) {
  if (n < 0) throw_error<ValueError>("[randperm] n must be non-negative, got ", n);
  Tensor perm = call_op1(OpId::randperm, {}, RandomAttrs{.shape = {n}, .dtype = DType::Int64});
  return dtype == DType::Int64 ? perm : perm.to(dtype);
}
Tensor rand_like(const Tensor& t) { return rand(t.shape(), t.dtype()); }
Tensor randn_like(const Tensor& t) { return randn(t.shape(), t.dtype()); }
Tensor bernoulli(const Tensor& p) { return call_op1(OpId::bernoulli, {p}, {}); }
Tensor dropout_mask(const Shape& shape, double p) {
  check_probability("dropout_mask", p);
  return call_op1(OpId::dropout_mask, {}, RandomAttrs{.shape = shape, .dtype = kFloat32, .p = p});
}

Tensor dropout(const Tensor& x, double p, bool training) {
  check_probability("dropout", p);
  if (!training || p == 0) return x;
  return call_op1(OpId::dropout, {x}, RandomAttrs{.p = p, .training = training});
}

}  // namespace td
