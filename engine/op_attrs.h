#pragma once
// The non-tensor arguments of ops: one struct per kind of argument set, each field named for
// what it is. OpAttrs holds one of them; an op reads its own with attrs_as<A>(op, attrs)
// (engine/dispatch.h), which throws a TypeError naming the op when it holds another struct.
// op_list.h names, per family, the struct its ops take.
#include <cstdint>
#include <optional>
#include <variant>

#include "engine/dtype.h"
#include "engine/scalar.h"
#include "engine/shape.h"

namespace td {

// Ops without attributes (element-wise, matmul, embedding, copies, in-place but fill_; user ops
// may take any struct).
struct NoAttrs {
  static constexpr const char* kName = "NoAttrs";
};

// rand, randn (shape, dtype); dropout_mask (shape, dtype float32, p = drop probability);
// dropout (p, training); bernoulli reads none.
struct RandomAttrs {
  static constexpr const char* kName = "RandomAttrs";
  Shape shape{};
  DType dtype = DType::Float32;
  double p = 0;
  bool training = false;
};

struct GeluAttrs {
  static constexpr const char* kName = "GeluAttrs";
  bool tanh_approximation = false;
};

struct ClampAttrs {
  static constexpr const char* kName = "ClampAttrs";
  std::optional<Scalar> min{}, max{};  // at least one
  bool floating_bound = false;  // a bound is a floating scalar (integer inputs compute float)
};

// The activations with scalar arguments, each reading its own fields (torch's names and defaults).
struct ActivationAttrs {
  static constexpr const char* kName = "ActivationAttrs";
  double negative_slope = 0.01;      // leaky_relu
  double alpha = 1;                  // elu, celu
  double beta = 1, threshold = 20;   // softplus
  double min_val = -1, max_val = 1;  // hardtanh
};

// to_dtype
struct CastAttrs {
  static constexpr const char* kName = "CastAttrs";
  DType dtype = DType::Float32;
};

// sum, mean, var, std, amax, amin, argmax, argmin
struct ReduceAttrs {
  static constexpr const char* kName = "ReduceAttrs";
  IntList dims{};  // empty = all
  bool keepdim = false;
  bool unbiased = false;  // var, std
};

// One dim: softmax, log_softmax, unsqueeze, cat, stack, index_select, gather.
struct DimAttrs {
  static constexpr const char* kName = "DimAttrs";
  int64_t dim = 0;
};

// cumsum, cumprod along dim; with a dtype, x is cast to it first (as torch's dtype argument),
// else integer and bool inputs scan in int64 and floating ones keep their dtype.
struct ScanAttrs {
  static constexpr const char* kName = "ScanAttrs";
  int64_t dim = 0;
  std::optional<DType> dtype{};
};

// sort, argsort along dim. td's sort is always stable (ties keep their order), so `stable` is
// accepted for torch's signature and changes nothing.
struct SortAttrs {
  static constexpr const char* kName = "SortAttrs";
  int64_t dim = -1;
  bool descending = false;
  bool stable = false;
};

// topk: the k largest (or smallest) along dim, in order when sorted (td always orders them).
struct TopkAttrs {
  static constexpr const char* kName = "TopkAttrs";
  int64_t k = 0;
  int64_t dim = -1;
  bool largest = true;
  bool sorted = true;
};

// permute (the permutation); squeeze (the dims to drop, empty = every size-1 dim).
struct DimsAttrs {
  static constexpr const char* kName = "DimsAttrs";
  IntList dims{};
};

// view, reshape, expand
struct SizesAttrs {
  static constexpr const char* kName = "SizesAttrs";
  Shape sizes{};
};

struct TransposeAttrs {
  static constexpr const char* kName = "TransposeAttrs";
  int64_t dim0 = 0, dim1 = 0;
};

struct SelectAttrs {
  static constexpr const char* kName = "SelectAttrs";
  int64_t dim = 0, index = 0;
};

struct SliceAttrs {
  static constexpr const char* kName = "SliceAttrs";
  int64_t dim = 0, start = 0, end = 0, step = 1;
};

struct FlattenAttrs {
  static constexpr const char* kName = "FlattenAttrs";
  int64_t start_dim = 0, end_dim = 0;
};

struct UnflattenAttrs {
  static constexpr const char* kName = "UnflattenAttrs";
  int64_t dim = 0;
  Shape sizes{};
};

// split: the sections' sizes along dim
struct SplitAttrs {
  static constexpr const char* kName = "SplitAttrs";
  int64_t dim = 0;
  IntList sections{};
};

// linear(x, w, b?)
struct LinearAttrs {
  static constexpr const char* kName = "LinearAttrs";
  bool fused_relu = false;  // linear_relu: ReLU applied as the GEMM's output is stored
};

// layer_norm(x, w?, b?)
struct LayerNormAttrs {
  static constexpr const char* kName = "LayerNormAttrs";
  Shape normalized_shape{};
  double eps = 0;
  // vmap's rule with per-set weights: w and b are [sets, *normalized_shape] for x [sets, ...],
  // each set's rows with its own
  bool per_set_affine = false;
  int64_t sets = 1;
};

// batch_norm(x, running_mean?, running_var?, w?, b?)
struct BatchNormAttrs {
  static constexpr const char* kName = "BatchNormAttrs";
  bool training = false;
  double momentum = 0, eps = 0;
  bool fused_relu = false;  // batch_norm_relu: ReLU applied as the output is stored
};

// conv2d(x, w, b?), or with batch_norm conv2d(x, w, b?, running_mean, running_var, bn_w?, bn_b?);
// empty stride/padding/dilation mean 1/0/1
struct ConvAttrs {
  static constexpr const char* kName = "ConvAttrs";
  IntList stride{}, padding{}, dilation{};
  int64_t groups = 1;
  int64_t sets = 1;         // the weight is `sets` banks of filters, all over the one input
  bool fused_relu = false;  // conv2d_relu: ReLU applied as the GEMM stores the output
  // conv2d_batch_norm: an eval-mode BatchNorm (inputs 3-6, one value per output channel, eps
  // bn_eps) applied to each output plane as it is written, before the ReLU
  bool batch_norm = false;
  double bn_eps = 0;
};

// max_pool2d, avg_pool2d; empty stride = kernel, empty padding/dilation = 0/1
struct PoolAttrs {
  static constexpr const char* kName = "PoolAttrs";
  IntList kernel{}, stride{}, padding{};
  IntList dilation{};  // max only
  bool ceil_mode = false;
  bool count_include_pad = true;              // avg only
  std::optional<int64_t> divisor_override{};  // avg only
  bool with_indices = false;                  // max only: its argmax indices as a second output
};

// fill_
struct FillAttrs {
  static constexpr const char* kName = "FillAttrs";
  Scalar value{};
};

// How scatter_reduce combines the values that land on one element (torch's names); scatter
// overwrites (None), scatter_add sums.
enum class ScatterReduce : uint8_t { None, Sum, Prod, Mean, Amax, Amin };

// scatter, scatter_add, scatter_reduce and their in-place forms
struct ScatterAttrs {
  static constexpr const char* kName = "ScatterAttrs";
  int64_t dim = 0;
  ScatterReduce reduce = ScatterReduce::None;
  bool include_self = true;  // scatter_reduce: the written tensor's own value takes part
};

using OpAttrs = std::variant<NoAttrs, RandomAttrs, GeluAttrs, ClampAttrs, CastAttrs, ReduceAttrs,
                             DimAttrs, DimsAttrs, SizesAttrs, TransposeAttrs, SelectAttrs,
                             SliceAttrs, FlattenAttrs, UnflattenAttrs, SplitAttrs, LinearAttrs,
                             LayerNormAttrs, BatchNormAttrs, ConvAttrs, PoolAttrs, FillAttrs,
                             ActivationAttrs, ScanAttrs, SortAttrs, TopkAttrs, ScatterAttrs>;

// The name of the struct attrs holds ("ConvAttrs").
inline const char* attrs_name(const OpAttrs& attrs) {
  return std::visit([](const auto& a) { return std::decay_t<decltype(a)>::kName; }, attrs);
}

}  // namespace td
