#pragma once
// The case table of the vmap oracle test (tests/vmap_oracle_test.cpp): for every op, its
// deterministic per-set inputs, the function applied to them and how its results compare.
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "vmap/vmap.h"

namespace td::test {

using Tensors = std::vector<Tensor>;
using Fn = std::function<Tensor(const Tensors&)>;
using Gen = std::function<Tensors(int64_t set)>;

enum class Kind { Float, Exact, Random, InPlace };

struct Case {
  OpId op;
  std::string name;
  Gen gen;  // the inputs of set `set`
  Fn f;
  Kind kind = Kind::Float;
};

// Deterministic per-set data (different for every set).
inline Tensor vals(const Shape& s, int64_t set, double scale = 1, double shift = 0,
                   DType dt = kFloat64) {
  std::vector<double> v(shape_numel(s));
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = std::sin(0.37 * static_cast<double>(k) + 1.91 * static_cast<double>(set) + 0.3) * scale +
           shift;
  return tensor<double>(v, s).to(dt);
}
inline Tensor ints(const Shape& s, int64_t set, int64_t mod) {
  std::vector<int64_t> v(shape_numel(s));
  for (size_t k = 0; k < v.size(); ++k) v[k] = (static_cast<int64_t>(k) * 5 + set * 3 + 1) % mod;
  return tensor<int64_t>(v, s);
}
inline Tensor bools(const Shape& s, int64_t set) {
  std::vector<bool> v(shape_numel(s));
  for (size_t k = 0; k < v.size(); ++k) v[k] = (static_cast<int64_t>(k) + set) % 3 == 0;
  return tensor<bool>(v, s);
}

inline Tensor pos(const Shape& s, int64_t set) { return vals(s, set, 1, 1.5); }

inline OpAttrs no_attrs() { return {}; }

inline std::vector<Case> make_cases() {
  std::vector<Case> c;
  auto add_case = [&](OpId op, std::string name, Gen g, Fn f, Kind k = Kind::Float) {
    c.push_back({op, std::move(name), std::move(g), std::move(f), k});
  };
  auto one = [](Shape s) { return [s](int64_t i) { return Tensors{vals(s, i)}; }; };
  auto two = [](Shape a, Shape b) {
    return [a, b](int64_t i) { return Tensors{vals(a, i), vals(b, i + 7)}; };
  };
  // ---- random (checked by Same/Different semantics) ----
  add_case(
      OpId::rand, "rand", one({2, 3}), [](const Tensors& x) { return rand(x[0].shape()); },
      Kind::Random);
  add_case(
      OpId::randn, "randn", one({4}),
      [](const Tensors& x) { return randn(x[0].shape(), kFloat64); }, Kind::Random);
  add_case(
      OpId::bernoulli, "bernoulli", one({3, 4}),
      [](const Tensors& x) { return bernoulli(full(x[0].shape(), 0.5)); }, Kind::Random);
  add_case(
      OpId::dropout_mask, "dropout_mask", one({3, 4}),
      [](const Tensors& x) { return dropout_mask(x[0].shape(), 0.5); }, Kind::Random);
  add_case(
      OpId::randperm, "randperm", one({6}), [](const Tensors& x) { return randperm(x[0].size(0)); },
      Kind::Random);
  add_case(
      OpId::dropout, "dropout", one({3, 4}),
      [](const Tensors& x) { return dropout(add(mul(x[0], 0.0), 3.0), 0.5, true); }, Kind::Random);
  // ---- unary ----
  add_case(OpId::neg, "neg", one({2, 3}), [](const Tensors& x) { return neg(x[0]); });
  add_case(OpId::abs, "abs", one({2, 3}), [](const Tensors& x) { return abs(x[0]); });
  add_case(OpId::exp, "exp", one({2, 3}), [](const Tensors& x) { return exp(x[0]); });
  add_case(
      OpId::log, "log",
      [](int64_t i) {
        return Tensors{pos({2, 3}, i)};
      },
      [](const Tensors& x) { return log(x[0]); });
  add_case(
      OpId::sqrt, "sqrt",
      [](int64_t i) {
        return Tensors{pos({2, 3}, i)};
      },
      [](const Tensors& x) { return sqrt(x[0]); });
  add_case(
      OpId::rsqrt, "rsqrt", [](int64_t i) { return Tensors{pos({3}, i)}; },
      [](const Tensors& x) { return rsqrt(x[0]); });
  add_case(OpId::tanh, "tanh", one({2, 3}), [](const Tensors& x) { return tanh(x[0]); });
  add_case(OpId::sigmoid, "sigmoid", one({2, 3}), [](const Tensors& x) { return sigmoid(x[0]); });
  add_case(OpId::relu, "relu", one({2, 3}), [](const Tensors& x) { return relu(x[0]); });
  add_case(OpId::gelu, "gelu", one({2, 3}), [](const Tensors& x) { return gelu(x[0]); });
  add_case(OpId::gelu, "gelu_tanh", one({4}), [](const Tensors& x) { return gelu(x[0], true); });
  {  // activations, on inputs in [-4, 4]
    auto wide = [](int64_t i) { return Tensors{vals({2, 5}, i, 4)}; };
    add_case(OpId::silu, "silu", wide, [](const Tensors& x) { return silu(x[0]); });
    add_case(OpId::selu, "selu", wide, [](const Tensors& x) { return selu(x[0]); });
    add_case(OpId::mish, "mish", wide, [](const Tensors& x) { return mish(x[0]); });
    add_case(OpId::hardswish, "hardswish", wide, [](const Tensors& x) { return hardswish(x[0]); });
    add_case(OpId::hardsigmoid, "hardsigmoid", wide,
             [](const Tensors& x) { return hardsigmoid(x[0]); });
    add_case(OpId::logsigmoid, "logsigmoid", wide,
             [](const Tensors& x) { return logsigmoid(x[0]); });
    add_case(OpId::relu6, "relu6", wide, [](const Tensors& x) { return relu6(x[0]); });
    add_case(OpId::softsign, "softsign", wide, [](const Tensors& x) { return softsign(x[0]); });
    add_case(OpId::tanhshrink, "tanhshrink", wide,
             [](const Tensors& x) { return tanhshrink(x[0]); });
    add_case(OpId::leaky_relu, "leaky_relu", wide,
             [](const Tensors& x) { return leaky_relu(x[0], 0.2); });
    add_case(OpId::elu, "elu", wide, [](const Tensors& x) { return elu(x[0], 0.7); });
    add_case(OpId::celu, "celu", wide, [](const Tensors& x) { return celu(x[0], 1.5); });
    add_case(OpId::softplus, "softplus", wide,
             [](const Tensors& x) { return softplus(x[0], 2, 3); });
    add_case(OpId::hardtanh, "hardtanh", wide,
             [](const Tensors& x) { return hardtanh(x[0], -0.5, 2); });
  }
  add_case(OpId::sin, "sin", one({2, 3}), [](const Tensors& x) { return sin(x[0]); });
  add_case(OpId::cos, "cos", one({2, 3}), [](const Tensors& x) { return cos(x[0]); });
  add_case(
      OpId::log1p, "log1p",
      [](int64_t i) {
        return Tensors{pos({2, 3}, i)};
      },
      [](const Tensors& x) { return log1p(x[0]); });
  add_case(OpId::expm1, "expm1", one({2, 3}), [](const Tensors& x) { return expm1(x[0]); });
  add_case(
      OpId::reciprocal, "reciprocal",
      [](int64_t i) {
        return Tensors{pos({2, 3}, i)};
      },
      [](const Tensors& x) { return reciprocal(x[0]); });
  add_case(OpId::floor, "floor", one({2, 3}), [](const Tensors& x) { return floor(x[0]); });
  add_case(OpId::ceil, "ceil", one({2, 3}), [](const Tensors& x) { return ceil(x[0]); });
  add_case(OpId::round, "round", one({2, 3}), [](const Tensors& x) { return round(x[0]); });
  add_case(OpId::sign, "sign", one({2, 3}), [](const Tensors& x) { return sign(x[0]); });
  add_case(
      OpId::logical_not, "logical_not",
      [](int64_t i) {
        return Tensors{bools({2, 3}, i)};
      },
      [](const Tensors& x) { return logical_not(x[0]); }, Kind::Exact);
  add_case(
      OpId::bitwise_not, "bitwise_not",
      [](int64_t i) {
        return Tensors{ints({2, 3}, i, 9)};
      },
      [](const Tensors& x) { return bitwise_not(x[0]); }, Kind::Exact);
  add_case(
      OpId::clamp, "clamp", one({2, 3}), [](const Tensors& x) { return clamp(x[0], -0.3, 0.4); },
      Kind::Exact);
  add_case(
      OpId::to_dtype, "to_dtype", one({2, 3}), [](const Tensors& x) { return x[0].to(kFloat32); },
      Kind::Exact);
  // ---- binary (with broadcasting) ----
  for (auto [op, name] : std::vector<std::pair<OpId, std::string>>{{OpId::add, "add"},
                                                                   {OpId::sub, "sub"},
                                                                   {OpId::mul, "mul"},
                                                                   {OpId::div, "div"},
                                                                   {OpId::maximum, "maximum"},
                                                                   {OpId::minimum, "minimum"},
                                                                   {OpId::remainder, "remainder"},
                                                                   {OpId::fmod, "fmod"}}) {
    OpId o = op;
    add_case(op, name, two({2, 3}, {3}), [o](const Tensors& x) {
      return call_op1(o, {x[0], x[1]}, no_attrs());
    });
  }
  add_case(OpId::add, "add_bcast_left", two({3}, {2, 1}),
           [](const Tensors& x) { return add(x[0], x[1]); });
  add_case(OpId::mul, "mul_scalar", one({2, 3}), [](const Tensors& x) { return mul(x[0], 2.5); });
  add_case(
      OpId::pow, "pow",
      [](int64_t i) {
        return Tensors{pos({2, 3}, i), vals({3}, i)};
      },
      [](const Tensors& x) { return pow(x[0], x[1]); });
  // comparisons and bitwise ops on int64
  for (auto [op, name] :
       std::vector<std::pair<OpId, std::string>>{{OpId::eq, "eq"},
                                                 {OpId::ne, "ne"},
                                                 {OpId::lt, "lt"},
                                                 {OpId::le, "le"},
                                                 {OpId::gt, "gt"},
                                                 {OpId::ge, "ge"},
                                                 {OpId::bitwise_and, "bitwise_and"},
                                                 {OpId::bitwise_or, "bitwise_or"},
                                                 {OpId::bitwise_xor, "bitwise_xor"}}) {
    OpId o = op;
    add_case(
        op, name,
        [](int64_t i) {
          return Tensors{ints({2, 3}, i, 4), ints({3}, i + 1, 4)};
        },
        [o](const Tensors& x) {
          return call_op1(o, {x[0], x[1]}, no_attrs());
        },
        Kind::Exact);
  }
  add_case(
      OpId::logical_and, "logical_and",
      [](int64_t i) {
        return Tensors{bools({2, 3}, i), bools({3}, i + 1)};
      },
      [](const Tensors& x) { return logical_and(x[0], x[1]); }, Kind::Exact);
  add_case(
      OpId::logical_or, "logical_or",
      [](int64_t i) {
        return Tensors{bools({2, 3}, i), bools({2, 3}, i + 1)};
      },
      [](const Tensors& x) { return logical_or(x[0], x[1]); }, Kind::Exact);
  add_case(
      OpId::where, "where",
      [](int64_t i) {
        return Tensors{bools({2, 3}, i), vals({2, 3}, i), vals({3}, i + 2)};
      },
      [](const Tensors& x) { return where(x[0], x[1], x[2]); }, Kind::Exact);
  add_case(
      OpId::masked_fill, "masked_fill",
      [](int64_t i) { return Tensors{vals({2, 3}, i), bools({3}, i), vals({}, i + 1)}; },
      [](const Tensors& x) { return masked_fill(x[0], x[1], x[2]); }, Kind::Exact);
  // ---- reductions ----
  add_case(OpId::sum, "sum_dim1", one({2, 3, 2}), [](const Tensors& x) { return sum(x[0], {1}); });
  add_case(OpId::sum, "sum_all", one({2, 3}), [](const Tensors& x) { return sum(x[0]); });
  add_case(
      OpId::sum, "sum_0d", [](int64_t i) { return Tensors{vals({}, i)}; },
      [](const Tensors& x) { return sum(x[0]); });
  add_case(OpId::mean, "mean_all_keepdim", one({2, 3}),
           [](const Tensors& x) { return mean(x[0], {}, true); });
  add_case(OpId::mean, "mean_neg", one({2, 3}), [](const Tensors& x) { return mean(x[0], {-1}); });
  add_case(OpId::var, "var", one({4, 3}), [](const Tensors& x) { return var(x[0], {0}); });
  add_case(OpId::std, "std_biased_keepdim", one({4, 3}),
           [](const Tensors& x) { return td::std(x[0], {1}, false, true); });
  add_case(
      OpId::amax, "amax", one({2, 3}), [](const Tensors& x) { return amax(x[0], {0}); },
      Kind::Exact);
  add_case(
      OpId::amin, "amin_all", one({2, 3}), [](const Tensors& x) { return amin(x[0]); },
      Kind::Exact);
  add_case(
      OpId::argmax, "argmax_flat", one({2, 3}), [](const Tensors& x) { return argmax(x[0]); },
      Kind::Exact);
  add_case(
      OpId::argmax, "argmax_flat_keepdim", one({2, 3}),
      [](const Tensors& x) { return argmax(x[0], std::nullopt, true); }, Kind::Exact);
  add_case(
      OpId::argmin, "argmin_dim", one({2, 3}),
      [](const Tensors& x) { return argmin(x[0], 1, true); }, Kind::Exact);
  add_case(OpId::softmax, "softmax", one({2, 3}),
           [](const Tensors& x) { return softmax(x[0], -1); });
  add_case(OpId::log_softmax, "log_softmax", one({2, 3}),
           [](const Tensors& x) { return log_softmax(x[0], 0); });
  add_case(OpId::logsumexp, "logsumexp", one({2, 3, 2}),
           [](const Tensors& x) { return logsumexp(x[0], {0, 2}); });
  add_case(OpId::logsumexp, "logsumexp_keepdim", one({2, 3}),
           [](const Tensors& x) { return logsumexp(x[0], -1, true); });
  // ---- scans and sorting (ints with ties check that equal values keep their order) ----
  auto tied = [](Shape s) { return [s](int64_t i) { return Tensors{ints(s, i, 3)}; }; };
  auto scalar = [](int64_t i) { return Tensors{vals({}, i)}; };
  add_case(OpId::cumsum, "cumsum", one({2, 3}), [](const Tensors& x) { return cumsum(x[0], 1); });
  add_case(
      OpId::cumsum, "cumsum_neg_int", tied({3, 2}),
      [](const Tensors& x) { return cumsum(x[0], -2); }, Kind::Exact);
  add_case(OpId::cumsum, "cumsum_0d", scalar, [](const Tensors& x) { return cumsum(x[0], -1); });
  add_case(OpId::cumprod, "cumprod", one({3, 2}),
           [](const Tensors& x) { return cumprod(x[0], -1); });
  add_case(OpId::cumprod, "cumprod_1d_f32", one({4}),
           [](const Tensors& x) { return cumprod(x[0], 0, kFloat32); });
  add_case(
      OpId::sort, "sort_values", one({2, 4}), [](const Tensors& x) { return sort(x[0]).first; },
      Kind::Exact);
  add_case(
      OpId::sort, "sort_indices_desc_dim0", tied({4, 2}),
      [](const Tensors& x) { return sort(x[0], 0, true).second; }, Kind::Exact);
  add_case(
      OpId::sort, "sort_0d", scalar, [](const Tensors& x) { return sort(x[0], 0).second; },
      Kind::Exact);
  add_case(
      OpId::argsort, "argsort_1d_desc", one({5}),
      [](const Tensors& x) { return argsort(x[0], 0, true); }, Kind::Exact);
  add_case(
      OpId::argsort, "argsort_ties", tied({2, 5}),
      [](const Tensors& x) { return argsort(x[0], -1); }, Kind::Exact);
  add_case(
      OpId::topk, "topk_values", one({2, 5}),
      [](const Tensors& x) { return topk(x[0], 3).first; }, Kind::Exact);
  add_case(
      OpId::topk, "topk_indices_smallest_dim0", tied({5, 2}),
      [](const Tensors& x) { return topk(x[0], 2, -2, false).second; }, Kind::Exact);
  add_case(
      OpId::topk, "topk_0d", scalar, [](const Tensors& x) { return topk(x[0], 1).first; },
      Kind::Exact);
  // ---- linear algebra ----
  add_case(OpId::matmul, "matmul_mm", two({2, 3}, {3, 4}),
           [](const Tensors& x) { return matmul(x[0], x[1]); });
  add_case(OpId::matmul, "matmul_vm", two({3}, {3, 4}),
           [](const Tensors& x) { return matmul(x[0], x[1]); });
  add_case(OpId::matmul, "matmul_mv", two({2, 3}, {3}),
           [](const Tensors& x) { return matmul(x[0], x[1]); });
  add_case(OpId::matmul, "matmul_dot", two({3}, {3}),
           [](const Tensors& x) { return matmul(x[0], x[1]); });
  add_case(OpId::matmul, "matmul_bcast", two({2, 2, 3}, {3, 4}),
           [](const Tensors& x) { return matmul(x[0], x[1]); });
  add_case(
      OpId::linear, "linear",
      [](int64_t i) {
        return Tensors{vals({4, 3}, i), vals({5, 3}, i + 1), vals({5}, i + 2)};
      },
      [](const Tensors& x) { return linear(x[0], x[1], x[2]); });
  add_case(OpId::linear, "linear_3d_nobias", two({2, 4, 3}, {5, 3}),
           [](const Tensors& x) { return linear(x[0], x[1]); });
  add_case(
      OpId::linear, "linear_1d",
      [](int64_t i) {
        return Tensors{vals({3}, i), vals({2, 3}, i + 1), vals({2}, i + 2)};
      },
      [](const Tensors& x) { return linear(x[0], x[1], x[2]); });
  // ---- recurrent steps ----
  add_case(
      OpId::lstm_pointwise, "lstm_pointwise",
      [](int64_t i) {
        return Tensors{vals({2, 12}, i), vals({2, 12}, i + 1), vals({3}, i + 2)};
      },
      [](const Tensors& x) {
        auto [h, c] = lstm_pointwise(x[0], x[1], x[2]);
        return cat({h, c}, -1);
      });
  add_case(
      OpId::gru_pointwise, "gru_pointwise",
      [](int64_t i) {
        return Tensors{vals({9}, i), vals({2, 9}, i + 1), vals({2, 3}, i + 2)};
      },
      [](const Tensors& x) { return gru_pointwise(x[0], x[1], x[2]); });
  // ---- norms ----
  add_case(
      OpId::layer_norm, "layer_norm",
      [](int64_t i) {
        return Tensors{vals({2, 4}, i), vals({4}, i + 1), vals({4}, i + 2)};
      },
      [](const Tensors& x) { return layer_norm(x[0], {4}, x[1], x[2]); });
  add_case(
      OpId::batch_norm, "batch_norm_eval",
      [](int64_t i) {
        return Tensors{vals({4, 3, 2}, i), vals({3}, i + 1), pos({3}, i + 2)};
      },
      [](const Tensors& x) { return batch_norm(x[0], x[1], x[2], {}, {}, false); });
  add_case(
      OpId::batch_norm, "batch_norm_train_affine",
      [](int64_t i) {
        return Tensors{vals({4, 3}, i), vals({3}, i + 1), vals({3}, i + 2)};
      },
      [](const Tensors& x) { return batch_norm(x[0], {}, {}, x[1], x[2], true); });
  // ---- conv, pool ----
  add_case(
      OpId::conv2d, "conv2d",
      [](int64_t i) {
        return Tensors{vals({2, 2, 5, 5}, i), vals({4, 2, 3, 3}, i + 1), vals({4}, i + 2)};
      },
      [](const Tensors& x) { return conv2d(x[0], x[1], x[2]); });
  add_case(
      OpId::conv2d, "conv2d_groups_stride",
      [](int64_t i) {
        return Tensors{vals({1, 4, 5, 5}, i), vals({4, 2, 3, 3}, i + 1)};
      },
      [](const Tensors& x) {
        return conv2d(x[0], x[1], {}, {2, 2}, {1, 1}, {1, 1}, 2);
      });
  add_case(
      OpId::max_pool2d, "max_pool2d", one({1, 2, 6, 6}),
      [](const Tensors& x) {
        return max_pool2d(x[0], {2, 2});
      },
      Kind::Exact);
  add_case(
      OpId::max_pool2d, "max_pool2d_ceil_mode", one({1, 2, 7, 6}),
      [](const Tensors& x) {
        return max_pool2d(x[0], {3, 2}, {2, 2}, {1, 1}, {1, 1}, true);
      },
      Kind::Exact);
  add_case(OpId::avg_pool2d, "avg_pool2d", one({1, 2, 6, 6}), [](const Tensors& x) {
    return avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1});
  });
  // ---- embedding ----
  add_case(
      OpId::embedding, "embedding",
      [](int64_t i) {
        return Tensors{ints({2, 3}, i, 5), vals({5, 4}, i)};
      },
      [](const Tensors& x) { return embedding(x[0], x[1]); }, Kind::Exact);
  // ---- views ----
  auto view_case = [&](OpId op, std::string name, Shape s, Fn f) {
    add_case(op, std::move(name), one(std::move(s)), std::move(f), Kind::Exact);
  };
  view_case(OpId::view, "view", {2, 6}, [](const Tensors& x) { return x[0].view({3, -1}); });
  view_case(OpId::reshape, "reshape", {2, 6},
            [](const Tensors& x) { return x[0].transpose(0, 1).reshape({-1}); });
  view_case(OpId::permute, "permute", {2, 3, 4}, [](const Tensors& x) {
    return x[0].permute({2, 0, 1});
  });
  view_case(OpId::transpose, "transpose", {2, 3},
            [](const Tensors& x) { return x[0].transpose(0, -1); });
  view_case(OpId::unsqueeze, "unsqueeze", {2, 3},
            [](const Tensors& x) { return x[0].unsqueeze(-1); });
  view_case(OpId::squeeze, "squeeze", {2, 1, 3}, [](const Tensors& x) { return x[0].squeeze(); });
  view_case(OpId::squeeze, "squeeze_dim", {1, 3}, [](const Tensors& x) { return x[0].squeeze(0); });
  view_case(OpId::expand, "expand", {2, 1, 3}, [](const Tensors& x) {
    return x[0].expand({4, 2, 5, 3});
  });
  view_case(OpId::select, "select", {2, 3}, [](const Tensors& x) { return x[0].select(1, -1); });
  view_case(OpId::slice, "slice", {2, 5}, [](const Tensors& x) { return x[0].slice(1, 1, 5, 2); });
  view_case(OpId::flatten, "flatten", {2, 3, 2}, [](const Tensors& x) { return x[0].flatten(); });
  view_case(OpId::unflatten, "unflatten", {2, 6}, [](const Tensors& x) {
    return x[0].unflatten(1, {2, 3});
  });
  // ---- copies ----
  view_case(OpId::contiguous, "contiguous", {2, 3},
            [](const Tensors& x) { return x[0].transpose(0, 1).contiguous(); });
  view_case(OpId::clone, "clone", {2, 3}, [](const Tensors& x) { return x[0].clone(); });
  // ---- join / split ----
  add_case(
      OpId::cat, "cat", two({2, 3}, {2, 2}),
      [](const Tensors& x) {
        return cat({x[0], x[1]}, -1);
      },
      Kind::Exact);
  add_case(
      OpId::stack, "stack", two({2, 3}, {2, 3}),
      [](const Tensors& x) {
        return stack({x[0], x[1]}, 1);
      },
      Kind::Exact);
  add_case(
      OpId::split, "split", one({2, 5}),
      [](const Tensors& x) {
        return split(x[0], IntList{2, 3}, 1)[1];
      },
      Kind::Exact);
  // ---- indexing ----
  add_case(
      OpId::index_select, "index_select",
      [](int64_t i) {
        return Tensors{vals({4, 3}, i), ints({2}, i, 4)};
      },
      [](const Tensors& x) { return index_select(x[0], 0, x[1]); }, Kind::Exact);
  add_case(
      OpId::index_select, "index_select_dim1",
      [](int64_t i) {
        return Tensors{vals({2, 4}, i), ints({3}, i + 1, 4)};
      },
      [](const Tensors& x) { return index_select(x[0], -1, x[1]); }, Kind::Exact);
  add_case(
      OpId::gather, "gather",
      [](int64_t i) {
        return Tensors{vals({3, 4}, i), ints({3, 2}, i, 4)};
      },
      [](const Tensors& x) { return gather(x[0], 1, x[1]); }, Kind::Exact);
  // scatters: x, index (repeated positions: the order of the writes shows), src
  auto three = [](Shape xs, Shape is, int64_t mod, Shape ss) {
    return [=](int64_t i) { return Tensors{vals(xs, i), ints(is, i, mod), vals(ss, i + 7)}; };
  };
  add_case(
      OpId::scatter, "scatter", three({3, 4}, {2, 4}, 3, {2, 5}),
      [](const Tensors& x) { return scatter(x[0], 0, x[1], x[2]); }, Kind::Exact);
  add_case(
      OpId::scatter, "scatter_neg_dim", three({3, 4}, {3, 2}, 4, {3, 3}),
      [](const Tensors& x) { return scatter(x[0], -1, x[1], x[2]); }, Kind::Exact);
  add_case(
      OpId::scatter, "scatter_value",
      [](int64_t i) {
        return Tensors{vals({3, 4}, i), ints({2, 4}, i, 3)};
      },
      [](const Tensors& x) { return scatter(x[0], 0, x[1], 1.25); }, Kind::Exact);
  add_case(
      OpId::scatter_add, "scatter_add", three({3, 4}, {5, 4}, 3, {5, 4}),
      [](const Tensors& x) { return scatter_add(x[0], 0, x[1], x[2]); }, Kind::Exact);
  add_case(
      OpId::scatter_add, "scatter_add_neg_dim", three({2, 3}, {2, 6}, 3, {2, 7}),
      [](const Tensors& x) { return scatter_add(x[0], -1, x[1], x[2]); }, Kind::Exact);
  add_case(
      OpId::scatter_reduce, "scatter_reduce_mean", three({3, 4}, {5, 4}, 3, {5, 4}),
      [](const Tensors& x) { return scatter_reduce(x[0], 0, x[1], x[2], "mean", false); },
      Kind::Exact);
  add_case(
      OpId::scatter_reduce, "scatter_reduce_amax_neg_dim", three({2, 3}, {2, 6}, 3, {2, 6}),
      [](const Tensors& x) { return scatter_reduce(x[0], -1, x[1], x[2], "amax"); }, Kind::Exact);
  // ---- in place (self = neg(x) keeps x's bdim position, so alignment is exercised) ----
  add_case(
      OpId::add_, "add_", two({2, 3}, {3}),
      [](const Tensors& x) {
        Tensor s = neg(x[0]);
        add_(s, x[1]);
        return s;
      },
      Kind::InPlace);
  add_case(
      OpId::mul_, "mul_", two({2, 3}, {2, 3}),
      [](const Tensors& x) {
        Tensor s = neg(x[0]);
        mul_(s, x[1]);
        return s;
      },
      Kind::InPlace);
  add_case(
      OpId::copy_, "copy_", two({2, 3}, {2, 1}),
      [](const Tensors& x) {
        Tensor s = neg(x[0]);
        copy_(s, x[1]);
        return s;
      },
      Kind::InPlace);
  add_case(
      OpId::fill_, "fill_", one({2, 3}),
      [](const Tensors& x) {
        Tensor s = neg(x[0]);
        fill_(s, 2.5);
        return mul(s, x[0]);
      },
      Kind::InPlace);
  add_case(
      OpId::scatter_, "scatter_", three({3, 4}, {2, 4}, 3, {2, 5}),
      [](const Tensors& x) {
        Tensor s = neg(x[0]);
        scatter_(s, 0, x[1], x[2]);
        return s;
      },
      Kind::InPlace);
  add_case(
      OpId::scatter_, "scatter_value_",
      [](int64_t i) {
        return Tensors{vals({3, 4}, i), ints({3, 2}, i, 4)};
      },
      [](const Tensors& x) {
        Tensor s = neg(x[0]);
        scatter_(s, -1, x[1], -0.5);
        return s;
      },
      Kind::InPlace);
  add_case(
      OpId::scatter_add_, "scatter_add_neg_dim_", three({2, 3}, {2, 6}, 3, {2, 7}),
      [](const Tensors& x) {
        Tensor s = neg(x[0]);
        scatter_add_(s, -1, x[1], x[2]);
        return s;
      },
      Kind::InPlace);
  add_case(
      OpId::scatter_reduce_, "scatter_reduce_prod_", three({3, 4}, {5, 4}, 3, {5, 4}),
      [](const Tensors& x) {
        Tensor s = neg(x[0]);
        scatter_reduce_(s, 0, x[1], x[2], "prod", false);
        return s;
      },
      Kind::InPlace);
  return c;
}

}  // namespace td::test
