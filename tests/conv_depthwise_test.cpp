// conv2d's depthwise kernel (float32, one input channel per group): against a direct loop in
// double over many geometries, banks of filters on one input, NaN and inf, and the same bits
// batched, chunked, looped and on two threads.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/functional_vmap_helpers.h"
#include "tests/tensor_values.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;
using nn::functional_vmap;

namespace {

struct Geom {
  int64_t n, c, h, w, mult, kh, kw, s0, s1, p0, p1, d0, d1;
  bool bias;
};

int64_t out_size(int64_t in, int64_t p, int64_t k, int64_t d, int64_t s) {
  const int64_t room = in + 2 * p - d * (k - 1) - 1;
  return room < 0 ? -1 : room / s + 1;
}

// y [n, c * mult, oh, ow] in double: only the taps inside x, summed in double.
std::vector<double> ref_depthwise(const std::vector<double>& x, const std::vector<double>& w,
                                  const std::vector<double>& b, const Geom& k) {
  const int64_t oh = out_size(k.h, k.p0, k.kh, k.d0, k.s0);
  const int64_t ow = out_size(k.w, k.p1, k.kw, k.d1, k.s1);
  const int64_t o = k.c * k.mult;
  std::vector<double> y(k.n * o * oh * ow);
  for (int64_t in = 0; in < k.n; ++in)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t yy = 0; yy < oh; ++yy)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double acc = b.empty() ? 0.0 : b[oc];
          for (int64_t i = 0; i < k.kh; ++i)
            for (int64_t j = 0; j < k.kw; ++j) {
              const int64_t iy = yy * k.s0 - k.p0 + i * k.d0, ix = xx * k.s1 - k.p1 + j * k.d1;
              if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
              acc += x[((in * k.c + oc / k.mult) * k.h + iy) * k.w + ix] *
                     w[(oc * k.kh + i) * k.kw + j];
            }
          y[((in * o + oc) * oh + yy) * ow + xx] = acc;
        }
  return y;
}

Tensor run(const Tensor& x, const Tensor& w, const Tensor& b, const Geom& k) {
  return conv2d(x, w, b, {k.s0, k.s1}, {k.p0, k.p1}, {k.d0, k.d1}, k.c);
}

// A deterministic spread of geometries: kernels 1-7, strides 1-3, padding 0-3, dilation 1-2,
// multipliers 1-2, widths around the vector widths (8, 16) and planes of one row or column.
std::vector<Geom> geometries() {
  std::vector<Geom> out;
  uint64_t r = 12345;
  auto pick = [&](int64_t lo, int64_t hi) {
    r = r * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + static_cast<int64_t>((r >> 33) % static_cast<uint64_t>(hi - lo + 1));
  };
  const int64_t widths[] = {1, 2, 5, 7, 8, 9, 15, 16, 17, 23, 31, 32, 33, 40};
  while (out.size() < 300) {
    Geom k{pick(1, 2), pick(1, 3), pick(1, 12), widths[pick(0, 13)], pick(1, 2),
           pick(1, 7), pick(1, 7), pick(1, 3),  pick(1, 3),          pick(0, 3),
           pick(0, 3), pick(1, 2), pick(1, 2),  pick(0, 1) == 1};
    if (out.size() % 10 == 0) k.h = 1;  // one row
    if (out.size() % 10 == 1) k.w = 1;  // one column
    if (out_size(k.h, k.p0, k.kh, k.d0, k.s0) < 1 || out_size(k.w, k.p1, k.kw, k.d1, k.s1) < 1)
      continue;
    out.push_back(k);
  }
  // rows of exactly one, two and a part of a vector, stride 2 down to 8 and 16 outputs
  out.push_back({2, 4, 16, 16, 1, 3, 3, 1, 1, 1, 1, 1, 1, true});
  out.push_back({2, 4, 16, 16, 1, 3, 3, 2, 2, 1, 1, 1, 1, true});
  out.push_back({1, 3, 9, 32, 2, 3, 3, 2, 2, 1, 1, 1, 1, false});
  out.push_back({1, 2, 20, 33, 1, 5, 5, 1, 1, 2, 2, 1, 1, true});
  out.push_back({1, 2, 13, 64, 2, 7, 7, 3, 3, 3, 3, 1, 1, true});
  out.push_back({1, 1, 3, 100, 1, 1, 9, 1, 1, 0, 4, 1, 1, true});  // conv1d-like
  return out;
}

}  // namespace

TEST_CASE("depthwise conv2d against a direct loop in double over many geometries") {
  for (const Geom& k : geometries()) {
    CAPTURE(k.n);
    CAPTURE(k.c);
    CAPTURE(k.h);
    CAPTURE(k.w);
    CAPTURE(k.mult);
    CAPTURE(k.kh);
    CAPTURE(k.kw);
    CAPTURE(k.s0);
    CAPTURE(k.s1);
    CAPTURE(k.p0);
    CAPTURE(k.p1);
    CAPTURE(k.d0);
    CAPTURE(k.d1);
    Tensor x = seq({k.n, k.c, k.h, k.w}, kFloat32, 0.31);
    Tensor w = seq({k.c * k.mult, 1, k.kh, k.kw}, kFloat32, 0.57);
    Tensor b = k.bias ? seq({k.c * k.mult}, kFloat32, 1.1) : Tensor();
    Tensor y = run(x, w, b, k);
    const auto ref = ref_depthwise(x.to_vector<double>(), w.to_vector<double>(),
                                   k.bias ? b.to_vector<double>() : std::vector<double>{}, k);
    REQUIRE(y.shape() == Shape{k.n, k.c * k.mult, out_size(k.h, k.p0, k.kh, k.d0, k.s0),
                               out_size(k.w, k.p1, k.kw, k.d1, k.s1)});
    REQUIRE(y.dtype() == kFloat32);
    check_close(y, ref, 1e-5);
  }
}

TEST_CASE("depthwise conv2d from strided inputs and unbatched, same values as contiguous") {
  const Geom k{2, 5, 11, 19, 2, 3, 5, 1, 2, 1, 2, 2, 1, true};
  Tensor x = seq({k.n, k.h, k.w, k.c}, kFloat32, 0.31).permute({0, 3, 1, 2});  // channels-last
  Tensor w = seq({k.c * k.mult, 1, k.kh, k.kw}, kFloat32, 0.57);
  Tensor b = seq({k.c * k.mult}, kFloat32, 1.1);
  Tensor y = run(x, w, b, k);
  CHECK(equal(y, run(x.contiguous(), w, b, k)));
  check_close(y,
              ref_depthwise(x.contiguous().to_vector<double>(), w.to_vector<double>(),
                            b.to_vector<double>(), k),
              1e-5);
  // a [C, H, W] input is image 0 of the batch
  CHECK(equal(run(x[1], w, b, k), y[1]));
  // an expanded weight (stride 0 along the filters)
  Tensor we = seq({1, 1, k.kh, k.kw}, kFloat32, 0.57).expand({k.c * k.mult, 1, k.kh, k.kw});
  CHECK(equal(run(x, we, b, k), run(x, we.contiguous(), b, k)));
}

TEST_CASE("depthwise conv2d with banks of filters on one input: each bank's bits alone") {
  // vmap's ensemble on a shared input: output channel = bank * cout + channel * mult + k
  for (const Geom& k : {Geom{2, 3, 9, 17, 2, 3, 3, 1, 1, 1, 1, 1, 1, true},
                        Geom{1, 4, 8, 16, 1, 5, 5, 2, 2, 2, 2, 1, 1, false},
                        Geom{3, 2, 7, 7, 1, 3, 3, 1, 1, 0, 0, 2, 2, true}}) {
    const int64_t sets = 3, cout = k.c * k.mult;
    Tensor x = seq({k.n, k.c, k.h, k.w}, kFloat32, 0.31);
    Tensor w = seq({sets * cout, 1, k.kh, k.kw}, kFloat32, 0.57);
    Tensor b = k.bias ? seq({sets * cout}, kFloat32, 1.1) : Tensor();
    ConvAttrs a{.stride = {k.s0, k.s1},
                .padding = {k.p0, k.p1},
                .dilation = {k.d0, k.d1},
                .groups = k.c,
                .sets = sets};
    Tensor y = call_op1(OpId::conv2d, {x, w, b}, a);
    for (int64_t s = 0; s < sets; ++s) {
      CAPTURE(s);
      Tensor ws = w.narrow(0, s * cout, cout);
      Tensor bs = k.bias ? b.narrow(0, s * cout, cout) : Tensor();
      Tensor ys = y.narrow(1, s * cout, cout);
      CHECK(equal(ys, run(x, ws, bs, k)));
      check_close(
          ys.contiguous(),
          ref_depthwise(x.to_vector<double>(), ws.contiguous().to_vector<double>(),
                        k.bias ? bs.contiguous().to_vector<double>() : std::vector<double>{}, k),
          1e-5);
    }
  }
}

TEST_CASE("depthwise conv2d: NaN and inf in the input reach the outputs whose windows hold them") {
  const Geom k{1, 2, 9, 21, 2, 3, 3, 1, 2, 1, 1, 1, 1, true};
  std::vector<double> xv = seq({k.n, k.c, k.h, k.w}, kFloat64, 0.31).to_vector<double>();
  const double inf = std::numeric_limits<double>::infinity();
  xv[3 * k.w + 4] = std::nan("");
  xv[7 * k.w + 18] = inf;
  xv[k.h * k.w + 0] = -inf;
  xv[k.h * k.w + 2 * k.w + 2] = inf;  // next to the -inf: windows holding both are NaN
  xv[k.h * k.w + 1 * k.w + 1] = -inf;
  Tensor x = tensor<double>(xv, {k.n, k.c, k.h, k.w}).to(kFloat32);
  Tensor w = seq({k.c * k.mult, 1, k.kh, k.kw}, kFloat32, 0.57);
  Tensor b = seq({k.c * k.mult}, kFloat32, 1.1);
  const auto ref =
      ref_depthwise(x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>(), k);
  const auto got = run(x, w, b, k).to_vector<double>();
  REQUIRE(got.size() == ref.size());
  int nans = 0, infs = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    CAPTURE(i);
    if (std::isnan(ref[i])) {
      ++nans;
      CHECK(std::isnan(got[i]));
    } else if (std::isinf(ref[i])) {
      ++infs;
      CHECK(got[i] == ref[i]);
    } else {
      CHECK(got[i] == doctest::Approx(ref[i]).epsilon(1e-5).scale(1.0));
    }
  }
  CHECK(nans > 0);
  CHECK(infs > 0);
}

TEST_CASE("depthwise conv2d gives the same bits on one thread and on two") {
  // enough work that two threads share the planes
  Tensor x = seq({8, 32, 32, 32}, kFloat32, 0.31);
  Tensor w = seq({64, 1, 3, 3}, kFloat32, 0.57), b = seq({64}, kFloat32, 1.1);
  Tensor one = conv2d(x, w, b, {1, 1}, {1, 1}, {1, 1}, 32);
  Tensor two;
  {
    Threads t(2);
    two = conv2d(x, w, b, {1, 1}, {1, 1}, {1, 1}, 32);
  }
  CHECK(equal(one, two));
  const Geom k{8, 32, 32, 32, 2, 3, 3, 1, 1, 1, 1, 1, 1, true};
  check_close(two,
              ref_depthwise(x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>(), k),
              1e-5);
}

TEST_CASE("a depthwise conv ensemble: vmap equals the loop over sets bit for bit, any chunks") {
  manual_seed(41);
  auto threads_and_chunks = [](nn::Module& m, const TensorDict& params, const Tensor& x,
                               const Tensor& xs) {
    check_shared_and_per_set(m, params, x, xs, 0, {1, 2, 3, 5});
    const nn::FunctionalVmapOptions shared{.params = params, .args = {x}};
    const Tensor whole = functional_vmap(m, shared).tensor();
    CHECK(equal(whole, loop_reference(m, params, {x}, {}, {})));
    Threads t(2);
    CHECK(equal(functional_vmap(m, shared).tensor(), whole));
    check_same_bits_chunked_and_looped(m, shared, whole, {1, 4});
  };
  SUBCASE("3x3, stride 1, multiplier 1") {
    auto nets = ensemble(5, [] { return std::make_shared<nn::Conv2d>(16, 16, 3, 1, 1, 1, 16); });
    TensorDict params = TensorDict::from_modules(nets);
    // enough work that two threads share the planes
    threads_and_chunks(*nets[0], params, randn({8, 16, 32, 32}), randn({5, 8, 16, 32, 32}));
  }
  SUBCASE("3x3, stride 2, multiplier 2, no bias") {
    auto nets =
        ensemble(4, [] { return std::make_shared<nn::Conv2d>(8, 16, 3, 2, 1, 1, 8, false); });
    TensorDict params = TensorDict::from_modules(nets);
    threads_and_chunks(*nets[0], params, randn({4, 8, 17, 17}), randn({4, 4, 8, 17, 17}));
  }
  SUBCASE("5x5, dilation 2, a network around it") {
    auto nets = ensemble(3, [] {
      return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
          std::make_shared<nn::Conv2d>(8, 8, 5, 1, 4, 2, 8), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Conv2d>(8, 12, 1)});
    });
    TensorDict params = TensorDict::from_modules(nets);
    threads_and_chunks(*nets[0], params, randn({2, 8, 12, 12}), randn({3, 2, 8, 12, 12}));
  }
}

TEST_CASE("float64 depthwise conv2d keeps the general path, within its tolerance of the loop") {
  const Geom k{2, 3, 10, 17, 2, 3, 3, 2, 1, 1, 1, 1, 2, true};
  Tensor x = seq({k.n, k.c, k.h, k.w}, kFloat64, 0.31);
  Tensor w = seq({k.c * k.mult, 1, k.kh, k.kw}, kFloat64, 0.57);
  Tensor b = seq({k.c * k.mult}, kFloat64, 1.1);
  Tensor y = run(x, w, b, k);
  CHECK(y.dtype() == kFloat64);
  check_close(y,
              ref_depthwise(x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>(), k),
              1e-12);
}
