// scaled_dot_product_attention against the ops it is composed of (matmul, mul, add, softmax,
// matmul) bit for bit, so that any fusion of its scores, softmax and weights @ v keeps today's
// bits: no mask, bool, float additive and causal masks, fully masked rows (NaN), NaN and inf in
// the inputs, broadcast and strided operands, shapes on both sides of the narrow product's
// limits (and float64); vmap, chunks, a loop and two threads.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "engine/engine.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// the raw bits of t's elements (NaN payloads included)
std::vector<uint64_t> bits(const Tensor& t) {
  std::vector<uint64_t> out;
  if (t.dtype() == kFloat32) {
    for (float v : t.contiguous().to_vector<float>()) {
      uint32_t u;
      std::memcpy(&u, &v, sizeof u);
      out.push_back(u);
    }
  } else {
    for (double v : t.contiguous().to_vector<double>()) {
      uint64_t u;
      std::memcpy(&u, &v, sizeof u);
      out.push_back(u);
    }
  }
  return out;
}

// softmax(q @ k^T * scale + bias) @ v from the ops, the bias additive (0 / -inf for a bool mask)
Tensor composed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                std::optional<double> scale) {
  Tensor s = matmul(q, k.transpose(-2, -1));
  const double f = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  if (f != 1.0) s = mul(s, f);
  if (bias.defined()) s = add(s, bias);
  return matmul(softmax(s, -1), v);
}

Tensor additive(const Tensor& keep, DType dtype = kFloat32) {
  return where(keep, zeros({}, dtype), -kInf);
}

// SDPA with a bool mask, a float mask and is_causal against the ops, at scale 1 (MultiheadAttention
// pre-scales q) and at the default scale
void check_same(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& keep,
                const Tensor& fmask) {
  for (std::optional<double> scale : {std::optional<double>(1.0), std::optional<double>()}) {
    CAPTURE(scale.has_value());
    CHECK(bits(scaled_dot_product_attention(q, k, v, {}, 0.0, false, scale)) ==
          bits(composed(q, k, v, {}, scale)));
    if (keep.defined())
      CHECK(bits(scaled_dot_product_attention(q, k, v, keep, 0.0, false, scale)) ==
            bits(composed(q, k, v, additive(keep, q.dtype()), scale)));
    if (fmask.defined())
      CHECK(bits(scaled_dot_product_attention(q, k, v, fmask, 0.0, false, scale)) ==
            bits(composed(q, k, v, fmask, scale)));
    const int64_t L = q.size(-2), S = k.size(-2);
    const Tensor later = lt(arange(L).unsqueeze(1), arange(S).unsqueeze(0));
    CHECK(bits(scaled_dot_product_attention(q, k, v, {}, 0.0, true, scale)) ==
          bits(composed(q, k, v, additive(logical_not(later), q.dtype()), scale)));
  }
}

}  // namespace

TEST_CASE("sdpa: the bits of its ops around the narrow product's limits") {
  manual_seed(7);
  // S around the vector widths (8, 16) and the narrow product's 4 vectors (32 / 64 columns) and
  // past them; L around its row tiles (3, 4, 6, 8); E and Ev from 1 up
  for (int64_t L : {1, 3, 8, 9, 32}) {
    for (int64_t S : {1, 5, 16, 17, 32, 33, 64, 65, 100}) {
      for (int64_t E : {1, 16, 33}) {
        CAPTURE(L);
        CAPTURE(S);
        CAPTURE(E);
        Tensor q = randn({2, L, E}) * 2.0, k = randn({2, S, E}), v = randn({2, S, E + 3});
        check_same(q, k, v, bernoulli(full({2, 1, S}, 0.7)) > 0.5, randn({L, S}));
      }
    }
  }
}

TEST_CASE("sdpa: masks, fully masked rows, NaN and inf, broadcasts, strides, float64") {
  manual_seed(11);
  const int64_t N = 3, H = 4, L = 32, S = 32, D = 16;
  // self-attention's heads: strided views of one projection [N, L, 3, H, D]
  Tensor qkv = randn({N, L, 3, H, D}).permute({0, 3, 2, 1, 4});
  Tensor q = qkv.select(2, 0), k = qkv.select(2, 1), v = qkv.select(2, 2);
  check_same(q, k, v, bernoulli(full({N, 1, 1, S}, 0.5)) > 0.5, randn({1, H, 1, S}));
  check_same(q, k.select(0, 0), v.select(0, 1), Tensor(), randn({S}));  // shared k, v
  // fully masked rows give NaN: row 3 every key, row 9 all but the last
  Tensor keep = ones({L, S}, kBool);
  keep.slice(0, 3, 4).fill_(false);
  keep.slice(1, 0, S - 1).slice(0, 9, 10).fill_(false);
  Tensor m = where(keep, zeros({}, kFloat32), -kInf);
  check_same(q, k, v, keep, m);
  const Tensor w = scaled_dot_product_attention(q, k, v, keep);
  CHECK(std::isnan(w.select(-2, 3).flatten(0, -1).to_vector<float>()[0]));
  CHECK_FALSE(std::isnan(w.select(-2, 9).flatten(0, -1).to_vector<float>()[0]));
  check_same(q, k, v, zeros({L, S}, kBool), full({L, S}, -kInf));  // every row
  // NaN and inf in q, k, v and the mask
  Tensor qn = q.contiguous(), kn = k.contiguous(), vn = v.contiguous(), mn = randn({L, S});
  qn.select(0, 1).select(0, 2).select(0, 5).select(0, 3).fill_(std::nan(""));
  qn.select(0, 2).select(0, 0).select(0, 7).select(0, 0).fill_(kInf);
  kn.select(0, 0).select(0, 3).select(0, 11).select(0, 1).fill_(-kInf);
  vn.select(0, 0).select(0, 1).select(0, 2).select(0, 4).fill_(kInf);
  mn.select(0, 4).select(0, 4).fill_(std::nan(""));
  mn.select(0, 6).select(0, 1).fill_(kInf);
  check_same(qn, kn, vn, Tensor(), mn);
  check_same(randn({2, 5, 8}, kFloat64), randn({2, 9, 8}, kFloat64), randn({2, 9, 4}, kFloat64),
             randn({5, 9}) > 0.0, randn({5, 9}, kFloat64));
}

TEST_CASE("sdpa: vmap, chunks, a loop and two threads give the same bits") {
  manual_seed(3);
  const int64_t B = 5, H = 4, L = 32, S = 32, D = 16;
  Tensor q = randn({B, H, L, D}), k = randn({B, H, S, D}), v = randn({B, H, S, D});
  Tensor keep = bernoulli(full({B, 1, S}, 0.7)) > 0.5;
  auto f = [](Tensor qi, Tensor ki, Tensor vi, Tensor mi) {
    return scaled_dot_product_attention(qi, ki, vi, mi, 0.0, false, 1.0);
  };
  const Tensor all = vmap(f)(q, k, v, keep);
  for (int64_t c : {1, 2, 3}) {
    CAPTURE(c);
    CHECK(bits(vmap(f, {.chunk_size = c})(q, k, v, keep)) == bits(all));
  }
  for (int64_t b = 0; b < B; ++b) {
    CAPTURE(b);
    CHECK(bits(f(q.select(0, b), k.select(0, b), v.select(0, b), keep.select(0, b))) ==
          bits(all.select(0, b)));
  }
  set_num_threads(2);
  const Tensor two = vmap(f)(q, k, v, keep);
  set_num_threads(1);
  CHECK(bits(two) == bits(all));
}
