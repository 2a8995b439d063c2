// conv2d's Winograd kernel (float32 3x3, stride 1, F(2x2, 3x3)): the kernel against a direct loop
// in double over many geometries, conv2d past the threshold, banks of filters on one input, NaN and
// inf, strided inputs, and the same bits batched, chunked, looped and on two threads.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/engine.h"
#include "engine/kernels/kernels.h"
#include "modules/modules.h"
#include "tests/functional_vmap_helpers.h"
#include "tests/tensor_values.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;
using nn::functional_vmap;

namespace {

struct Geom {
  int64_t n, cin, cout, h, w, p0, p1, groups;
  bool bias, relu;
  int64_t oh() const { return h + 2 * p0 - 2; }
  int64_t ow() const { return w + 2 * p1 - 2; }
  bool winograd() const { return kernels::winograd_pays(cin / groups, cout / groups, oh(), ow()); }
};

// y [n, cout, oh, ow] in double (before ReLU), and the sum of |w||x| over each output's taps:
// the scale of float32's rounding in any order of the sum, and of the transforms' (their
// coefficients are at most 1 in magnitude: a few ulps of it).
struct Ref {
  std::vector<double> y, mag;
};
Ref ref_conv(const std::vector<double>& x, const std::vector<double>& w,
             const std::vector<double>& b, const Geom& k) {
  const int64_t oh = k.oh(), ow = k.ow(), cg = k.cin / k.groups, og = k.cout / k.groups;
  Ref r{std::vector<double>(k.n * k.cout * oh * ow), std::vector<double>(k.n * k.cout * oh * ow)};
  for (int64_t in = 0; in < k.n; ++in)
    for (int64_t oc = 0; oc < k.cout; ++oc)
      for (int64_t yy = 0; yy < oh; ++yy)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double acc = b.empty() ? 0.0 : b[oc], mag = std::abs(acc);
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < 3; ++i)
              for (int64_t j = 0; j < 3; ++j) {
                const int64_t iy = yy - k.p0 + i, ix = xx - k.p1 + j;
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                const double xv = x[((in * k.cin + oc / og * cg + c) * k.h + iy) * k.w + ix];
                const double wv = w[((oc * cg + c) * 3 + i) * 3 + j];
                acc += xv * wv;
                mag += std::abs(xv * wv);
              }
          const int64_t at = ((in * k.cout + oc) * oh + yy) * ow + xx;
          r.y[at] = acc;
          r.mag[at] = mag;
        }
  return r;
}

Tensor run(const Tensor& x, const Tensor& w, const Tensor& b, const Geom& k) {
  return (k.relu ? conv2d_relu : conv2d)(x, w, b, {1, 1}, {k.p0, k.p1}, {1, 1}, k.groups);
}

// The kernel itself, on any channels (conv2d takes it past a threshold only): what conv2d's
// Winograd case does, all tasks at once.
Tensor run_kernel(const Tensor& x, const Tensor& w, const Tensor& b, const Geom& k) {
  kernels::ConvGeom g{};
  g.n = k.n, g.cin = k.cin, g.h = k.h, g.w = k.w, g.cout = k.cout, g.kh = 3, g.kw = 3;
  g.oh = k.oh(), g.ow = k.ow(), g.groups = k.groups;
  g.stride = {1, 1}, g.pad = {k.p0, k.p1}, g.dil = {1, 1};
  const int64_t cg = k.cin / k.groups;
  std::vector<float> u(16 * k.cout * cg);
  std::vector<uint8_t> finite(k.groups);
  const Tensor wc = w.contiguous();
  kernels::winograd_filters(wc.data<float>(), k.cout, cg, k.cout / k.groups, u.data(),
                            finite.data());
  Tensor out = Tensor::empty({k.n, k.cout, k.oh(), k.ow()}, kFloat32);
  const Tensor bc = b.defined() ? b.contiguous() : Tensor();
  kernels::conv_winograd(x, g, wc.data<float>(), u.data(), finite.data(),
                         b.defined() ? bc.data<float>() : nullptr, k.relu, out, 0, k.groups * k.n);
  return out;
}

// The direct register-blocked kernel on the same convolution.
Tensor run_planes(const Tensor& x, const Tensor& w, const Tensor& b, const Geom& k) {
  kernels::ConvGeom g{};
  g.n = k.n, g.cin = k.cin, g.h = k.h, g.w = k.w, g.cout = k.cout, g.kh = 3, g.kw = 3;
  g.oh = k.oh(), g.ow = k.ow(), g.groups = k.groups;
  g.stride = {1, 1}, g.pad = {k.p0, k.p1}, g.dil = {1, 1};
  const Tensor wc = w.contiguous(), bc = b.contiguous();
  Tensor out = Tensor::empty({k.n, k.cout, k.oh(), k.ow()}, kFloat32);
  kernels::conv_planes(x, g, wc.data<float>(), bc.data<float>(), nullptr, nullptr, k.relu, out, 0,
                       k.groups * k.n);
  return out;
}

// Same shape and the same bits, NaN included.
bool equal_nan_bits(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.contiguous().to_vector<float>(),
                           y = b.contiguous().to_vector<float>();
  return a.shape() == b.shape() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Within 1e-5 of sum |w||x| (float32's epsilon is 6e-8: the GEMM's sum over channels and the
// transforms' few adds stay far below it; a wrong coefficient or tile is off by O(1) of it).
void check_near(const Tensor& y, const Ref& r, bool relu) {
  const std::vector<double> got = y.contiguous().to_vector<double>();
  REQUIRE(got.size() == r.y.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    const double want = relu ? std::max(r.y[i], 0.0) : r.y[i];
    if (!(std::abs(got[i] - want) <= 1e-5 * r.mag[i] + 1e-30)) {
      CAPTURE(i);
      CHECK(got[i] == want);
      ++bad;
    }
  }
  CHECK(bad == 0);
}

// A deterministic spread of geometries for the kernel: channels 1-40, odd and even output
// sizes, planes of 1-3 rows or columns, paddings 0-2, groups, bias, ReLU.
std::vector<Geom> geometries() {
  std::vector<Geom> out;
  uint64_t r = 2024;
  auto pick = [&](int64_t lo, int64_t hi) {
    r = r * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + static_cast<int64_t>((r >> 33) % static_cast<uint64_t>(hi - lo + 1));
  };
  const int64_t sizes[] = {1, 2, 3, 4, 5, 8, 9, 10, 15, 16, 17, 18, 19, 33, 34};
  const int64_t chans[] = {1, 3, 8, 16, 17, 19, 24, 32, 40};
  while (out.size() < 60) {
    const int64_t groups = pick(1, 2);
    Geom k{pick(1, 2),
           groups * chans[pick(0, 8)],
           groups * chans[pick(0, 8)],
           sizes[pick(0, 14)],
           sizes[pick(0, 14)],
           pick(0, 2),
           pick(0, 2),
           groups,
           pick(0, 1) == 1,
           pick(0, 2) == 0};
    if (k.oh() < 1 || k.ow() < 1) continue;
    out.push_back(k);
  }
  out.push_back({2, 64, 64, 16, 16, 1, 1, 1, true, true});   // conv64_8's layers
  out.push_back({3, 32, 48, 2, 66, 1, 0, 1, false, false});  // two rows of input
  out.push_back({1, 32, 32, 70, 3, 0, 1, 1, true, false});   // three columns
  out.push_back({1, 48, 16, 45, 47, 1, 2, 1, true, true});   // blocks of tiles end inside rows
  return out;
}

}  // namespace

TEST_CASE("the Winograd kernel against a direct loop in double over many geometries") {
  for (const Geom& k : geometries()) {
    CAPTURE(k.n);
    CAPTURE(k.cin);
    CAPTURE(k.cout);
    CAPTURE(k.h);
    CAPTURE(k.w);
    CAPTURE(k.p0);
    CAPTURE(k.p1);
    CAPTURE(k.groups);
    CAPTURE(k.bias);
    CAPTURE(k.relu);
    Tensor x = seq({k.n, k.cin, k.h, k.w}, kFloat32, 0.31);
    Tensor w = seq({k.cout, k.cin / k.groups, 3, 3}, kFloat32, 0.57);
    Tensor b = k.bias ? seq({k.cout}, kFloat32, 1.1) : Tensor();
    check_near(run_kernel(x, w, b, k),
               ref_conv(x.to_vector<double>(), w.to_vector<double>(),
                        k.bias ? b.to_vector<double>() : std::vector<double>{}, k),
               k.relu);
  }
}

TEST_CASE("conv2d takes the Winograd kernel past its threshold, same bits as the kernel") {
  for (const Geom& k : {Geom{2, 64, 64, 16, 16, 1, 1, 1, true, true},
                        Geom{1, 128, 128, 17, 18, 1, 2, 2, false, false},
                        Geom{1, 64, 64, 33, 15, 0, 1, 1, true, false}}) {
    CAPTURE(k.cin);
    CAPTURE(k.h);
    REQUIRE(k.winograd());
    Tensor x = seq({k.n, k.cin, k.h, k.w}, kFloat32, 0.31);
    Tensor w = seq({k.cout, k.cin / k.groups, 3, 3}, kFloat32, 0.57);
    Tensor b = k.bias ? seq({k.cout}, kFloat32, 1.1) : Tensor();
    Tensor y = run(x, w, b, k);
    REQUIRE(y.shape() == Shape{k.n, k.cout, k.oh(), k.ow()});
    CHECK(equal(y, run_kernel(x, w, b, k)));
    check_near(y,
               ref_conv(x.to_vector<double>(), w.to_vector<double>(),
                        k.bias ? b.to_vector<double>() : std::vector<double>{}, k),
               k.relu);
  }
}

TEST_CASE("Winograd conv2d counts the direct convolution's multiply-adds") {
  const Geom k{2, 64, 64, 16, 18, 1, 0, 1, true, false};
  REQUIRE(k.winograd());
  Tensor x = seq({k.n, k.cin, k.h, k.w}, kFloat32, 0.31);
  Tensor w = seq({k.cout, k.cin, 3, 3}, kFloat32, 0.57);
  reset_kernel_counts();
  run(x, w, Tensor(), k);
  CHECK(multiply_add_count() == k.n * k.cout * k.oh() * k.ow() * k.cin * 9);
  CHECK(kernel_count(KernelKind::Conv) == 1);
}

TEST_CASE("Winograd conv2d from strided inputs and unbatched, same values as contiguous") {
  const Geom k{2, 128, 128, 15, 19, 1, 2, 2, true, false};
  REQUIRE(k.winograd());
  Tensor x = seq({k.n, k.h, k.w, k.cin}, kFloat32, 0.31).permute({0, 3, 1, 2});  // channels-last
  Tensor w = seq({k.cout, k.cin / k.groups, 3, 3}, kFloat32, 0.57);
  Tensor b = seq({k.cout}, kFloat32, 1.1);
  Tensor y = run(x, w, b, k);
  CHECK(equal(y, run(x.contiguous(), w, b, k)));
  check_near(
      y,
      ref_conv(x.contiguous().to_vector<double>(), w.to_vector<double>(), b.to_vector<double>(), k),
      false);
  // a [C, H, W] input is image 0 of the batch
  CHECK(equal(run(x[1], w, b, k), y[1]));
  // an expanded weight (stride 0 along the filters)
  Tensor we =
      seq({1, k.cin / k.groups, 3, 3}, kFloat32, 0.57).expand({k.cout, k.cin / k.groups, 3, 3});
  CHECK(equal(run(x, we, b, k), run(x, we.contiguous(), b, k)));
}

TEST_CASE("Winograd conv2d with banks of filters on one input: each bank's bits alone") {
  // vmap's ensemble on a shared input: output channel = bank * cout + group * og + k
  for (const Geom& k : {Geom{2, 64, 64, 16, 17, 1, 1, 1, true, false},
                        Geom{1, 128, 128, 18, 16, 0, 2, 2, false, true}}) {
    REQUIRE(k.winograd());
    const int64_t sets = 3;
    Tensor x = seq({k.n, k.cin, k.h, k.w}, kFloat32, 0.31);
    Tensor w = seq({sets * k.cout, k.cin / k.groups, 3, 3}, kFloat32, 0.57);
    Tensor b = k.bias ? seq({sets * k.cout}, kFloat32, 1.1) : Tensor();
    ConvAttrs a{.stride = {1, 1},
                .padding = {k.p0, k.p1},
                .dilation = {1, 1},
                .groups = k.groups,
                .sets = sets,
                .fused_relu = k.relu};
    Tensor y = call_op1(OpId::conv2d, {x, w, b}, a);
    for (int64_t s = 0; s < sets; ++s) {
      CAPTURE(s);
      Tensor ws = w.narrow(0, s * k.cout, k.cout);
      Tensor bs = k.bias ? b.narrow(0, s * k.cout, k.cout) : Tensor();
      Tensor ys = y.narrow(1, s * k.cout, k.cout);
      CHECK(equal(ys, run(x, ws, bs, k)));
      check_near(ys,
                 ref_conv(x.to_vector<double>(), ws.contiguous().to_vector<double>(),
                          k.bias ? bs.contiguous().to_vector<double>() : std::vector<double>{}, k),
                 k.relu);
    }
  }
}

// Where the direct sum is inf the transforms' differences could make inf - inf = NaN: an image
// or a bank of filters holding an inf or NaN takes the direct kernel, the others Winograd.
TEST_CASE("Winograd conv2d: inf and NaN give the direct convolution's inf and NaN") {
  const Geom k{2, 64, 64, 15, 21, 1, 1, 1, true, false};
  REQUIRE(k.winograd());
  const int64_t sets = 3;
  std::vector<double> xv = seq({k.n, k.cin, k.h, k.w}, kFloat64, 0.31).to_vector<double>();
  const double inf = std::numeric_limits<double>::infinity();
  xv[3 * k.w + 4] = std::nan("");  // image 0 only
  xv[7 * k.w + 18] = inf;
  xv[5 * k.h * k.w + 0] = -inf;
  xv[5 * k.h * k.w + 2 * k.w + 2] = inf;
  xv[9 * k.h * k.w + 14 * k.w + 20] = -inf;  // the last tile's corner
  Tensor x = tensor<double>(xv, {k.n, k.cin, k.h, k.w}).to(kFloat32);
  std::vector<double> wv = seq({sets * k.cout, k.cin, 3, 3}, kFloat32, 0.57).to_vector<double>();
  wv[(k.cout + 5) * k.cin * 9 + 4] = -inf;  // bank 1, its filter 5
  Tensor w = tensor<double>(wv, {sets * k.cout, k.cin, 3, 3}).to(kFloat32);
  Tensor b = seq({sets * k.cout}, kFloat32, 1.1);
  ConvAttrs a{.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1, .sets = sets};
  const Tensor y = call_op1(OpId::conv2d, {x, w, b}, a);
  int nans = 0, infs = 0;
  for (int64_t s = 0; s < sets; ++s) {
    CAPTURE(s);
    const Tensor ws = w.narrow(0, s * k.cout, k.cout), bs = b.narrow(0, s * k.cout, k.cout);
    const Tensor ys = y.narrow(1, s * k.cout, k.cout);
    CHECK(equal_nan_bits(ys, run(x, ws, bs, k)));  // each bank as alone
    const Ref ref = ref_conv(x.to_vector<double>(), ws.contiguous().to_vector<double>(),
                             bs.to_vector<double>(), k);
    const auto got = ys.contiguous().to_vector<double>();
    for (size_t i = 0; i < ref.y.size(); ++i) {
      CAPTURE(i);
      if (std::isnan(ref.y[i])) {
        ++nans;
        CHECK(std::isnan(got[i]));
      } else if (std::isinf(ref.y[i])) {
        ++infs;
        CHECK(got[i] == ref.y[i]);  // the same inf, not NaN
      } else {
        REQUIRE(std::isfinite(got[i]));
        CHECK(std::abs(got[i] - ref.y[i]) <= 1e-5 * ref.mag[i]);
      }
    }
  }
  CHECK(nans > 0);
  CHECK(infs > 0);
  // which kernel ran: the direct one's bits for image 0 and for bank 1, Winograd's (which differ
  // from the direct ones in the last bits) for image 1 with banks 0 and 2
  const Geom one{1, k.cin, k.cout, k.h, k.w, 1, 1, 1, true, false};
  for (int64_t s = 0; s < sets; ++s)
    for (int64_t i = 0; i < k.n; ++i) {
      CAPTURE(s);
      CAPTURE(i);
      const Tensor xi = x.narrow(0, i, 1), ws = w.narrow(0, s * k.cout, k.cout);
      const Tensor bs = b.narrow(0, s * k.cout, k.cout);
      const Tensor yi = y.narrow(0, i, 1).narrow(1, s * k.cout, k.cout);
      const bool direct = i == 0 || s == 1;
      CHECK(equal_nan_bits(yi, run_planes(xi, ws, bs, one)) == direct);
      if (!direct) CHECK(equal(yi, run_kernel(xi, ws, bs, one)));
    }
}

TEST_CASE("Winograd conv2d gives the same bits on one thread and on two") {
  // enough work that two threads share the tasks, and banks split between them
  const Geom k{3, 64, 64, 16, 16, 1, 1, 1, true, false};
  REQUIRE(k.winograd());
  Tensor x = seq({k.n, k.cin, k.h, k.w}, kFloat32, 0.31);
  Tensor w = seq({3 * k.cout, k.cin, 3, 3}, kFloat32, 0.57), b = seq({3 * k.cout}, kFloat32, 1.1);
  ConvAttrs a{.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1, .sets = 3};
  Tensor one = call_op1(OpId::conv2d, {x, w, b}, a);
  Tensor two;
  {
    Threads t(2);
    two = call_op1(OpId::conv2d, {x, w, b}, a);
  }
  CHECK(equal(one, two));
  check_near(two.narrow(1, 0, k.cout),
             ref_conv(x.to_vector<double>(), w.narrow(0, 0, k.cout).to_vector<double>(),
                      b.narrow(0, 0, k.cout).to_vector<double>(), k),
             false);
}

TEST_CASE("a Winograd conv ensemble: vmap equals the loop over sets bit for bit, any chunks") {
  manual_seed(43);
  auto threads_and_chunks = [](nn::Module& m, const TensorDict& params, const Tensor& x,
                               const Tensor& xs) {
    check_shared_and_per_set(m, params, x, xs, 0, {1, 2});
    const nn::FunctionalVmapOptions shared{.params = params, .args = {x}};
    const Tensor whole = functional_vmap(m, shared).tensor();
    CHECK(equal(whole, loop_reference(m, params, {x}, {}, {})));
    Threads t(2);
    CHECK(equal(functional_vmap(m, shared).tensor(), whole));
    check_same_bits_chunked_and_looped(m, shared, whole, {1, 4});
    const nn::FunctionalVmapOptions per_set{
        .params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}};
    const Tensor whole_per_set = functional_vmap(m, per_set).tensor();
    check_same_bits_chunked_and_looped(m, per_set, whole_per_set, {2});
  };
  SUBCASE("64 to 64 channels, a ReLU fused") {
    REQUIRE(Geom{2, 64, 64, 16, 16, 1, 1, 1, true, true}.winograd());
    auto nets = ensemble(3, [] {
      return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
          std::make_shared<nn::Conv2d>(64, 64, 3, 1, 1), std::make_shared<nn::ReLU>()});
    });
    TensorDict params = TensorDict::from_modules(nets);
    threads_and_chunks(*nets[0], params, randn({2, 64, 16, 16}), randn({3, 2, 64, 16, 16}));
  }
  SUBCASE("64 to 64 channels in 2 groups, odd planes, no bias") {
    REQUIRE(Geom{2, 128, 128, 17, 17, 1, 1, 2, false, false}.winograd());
    auto nets =
        ensemble(3, [] { return std::make_shared<nn::Conv2d>(128, 128, 3, 1, 1, 1, 2, false); });
    TensorDict params = TensorDict::from_modules(nets);
    threads_and_chunks(*nets[0], params, randn({1, 128, 17, 17}), randn({3, 1, 128, 17, 17}));
  }
}
