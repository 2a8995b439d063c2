// lstm_pointwise and gru_pointwise: the point-wise part of a recurrent step.
#include "engine/ops.h"
#include "engine/kernels/kernels.h"
#include "engine/ops/impls.h"

namespace td {
namespace impl {
namespace {

// Checks gates_x, gates_h [..., gates * H] and the state [..., H] (floating, one dtype, leading
// dims broadcasting) and returns them expanded to the result's leading dims, last dim contiguous.
std::vector<Tensor> cell_operands(const char* op, std::span<const Tensor> in, int64_t gates) {
  if (in.size() != 3)
    throw_error<ValueError>("[", op, "] takes gates_x, gates_h and a state, got ", in.size(),
                            " tensors");
  const Tensor &gx = in[0], &gh = in[1], &s = in[2];
  const DType dt = s.dtype();
  for (const Tensor* t : {&gx, &gh, &s}) {
    if (t->dtype() != DType::Float32 && t->dtype() != DType::Float64)
      throw_error<TypeError>("[", op, "] expects float32 or float64 tensors, got ",
                             dtype_name(t->dtype()), " of ", shape_word(), " ", t->shape());
    if (t->dtype() != dt)
      throw_error<TypeError>("[", op, "] gates and state must have one dtype, got ",
                             dtype_name(gx.dtype()), ", ", dtype_name(gh.dtype()), " and ",
                             dtype_name(dt));
  }
  const int64_t H = s.dim() ? s.size(-1) : 0;
  if (s.dim() == 0 || gx.dim() == 0 || gh.dim() == 0 || gx.size(-1) != gates * H ||
      gh.size(-1) != gates * H)
    throw_error<ValueError>("[", op, "] expects gates [..., ", gates,
                            " * H] and a state [..., H], got ", shapes_word(), " ", gx.shape(),
                            ", ", gh.shape(), " and ", s.shape());
  auto lead = [](const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 1); };
  Shape out = broadcast_shapes(op, broadcast_shapes(op, lead(gx), lead(gh)), lead(s));
  std::vector<Tensor> r;
  for (const Tensor* t : {&gx, &gh, &s}) {
    Shape full = out;
    full.push_back(t->size(-1));
    Tensor e = t->expand(full);
    r.push_back(e.stride(-1) == 1 ? e : e.contiguous());
  }
  return r;
}

}  // namespace

std::vector<Tensor> lstm_pointwise_impl(std::span<const Tensor> in, const OpAttrs&) {
  const std::vector<Tensor> t = cell_operands("lstm_pointwise", in, 4);
  Tensor h = Tensor::empty(t[2].shape(), t[2].dtype()), c = Tensor::empty(h.shape(), h.dtype());
  kernels::lstm_pointwise(t[0], t[1], t[2], h, c);
  return {h, c};
}

std::vector<Tensor> gru_pointwise_impl(std::span<const Tensor> in, const OpAttrs&) {
  const std::vector<Tensor> t = cell_operands("gru_pointwise", in, 3);
  Tensor h = Tensor::empty(t[2].shape(), t[2].dtype());
  kernels::gru_pointwise(t[0], t[1], t[2], h);
  return {h};
}

}  // namespace impl

std::pair<Tensor, Tensor> lstm_pointwise(const Tensor& gates_x, const Tensor& gates_h,
                                         const Tensor& c) {
  std::vector<Tensor> r = call_op(OpId::lstm_pointwise, std::vector<Tensor>{gates_x, gates_h, c});
  return {r[0], r[1]};
}

Tensor gru_pointwise(const Tensor& gates_x, const Tensor& gates_h, const Tensor& h) {
  return call_op1(OpId::gru_pointwise, {gates_x, gates_h, h});
}

}  // namespace td
