// In-place ops (add_, mul_, copy_, fill_) writing through views, broadcasting and casting as
// PyTorch does, and the whole-tensor comparisons allclose and equal.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

TEST_CASE("add_ and mul_ write in place, broadcast the operand and return self") {
  Tensor x = tensor({1.f, 2.f, 3.f, 4.f}, {2, 2});
  auto* storage = x.storage().get();
  Tensor& r = add_(x, tensor({10.f, 20.f}));
  CHECK(&r == &x);
  CHECK(x.storage().get() == storage);
  CHECK(x.to_vector<float>() == std::vector<float>{11.f, 22.f, 13.f, 24.f});
  mul_(x, tensor({2.f}, {1, 1}));
  CHECK(x.to_vector<float>() == std::vector<float>{22.f, 44.f, 26.f, 48.f});
  x.add_(scalar_tensor(1.0, kFloat64));  // a float64 0-d operand into float32 self
  CHECK(x.dtype() == kFloat32);
  CHECK(x.to_vector<float>() == std::vector<float>{23.f, 45.f, 27.f, 49.f});
  x.mul_(tensor<int64_t>({1, 0}));
  CHECK(x.to_vector<float>() == std::vector<float>{23.f, 0.f, 27.f, 0.f});
  // Int self with int and bool operands.
  Tensor i = tensor<int64_t>({1, 2, 3});
  add_(i, tensor<int64_t>({5}));
  mul_(i, tensor<bool>({true, false, true}));
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{6, 0, 8});
}

TEST_CASE("in-place ops through non-contiguous views") {
  Tensor base = zeros({3, 4});
  Tensor col = base.select(1, 2);  // stride 4
  add_(col, tensor({1.f, 2.f, 3.f}));
  Tensor tr = base.t();  // [4, 3]
  mul_(tr, full({4, 3}, 2.0));
  tr.slice(0, 0, std::nullopt, 3).add_(ones({2, 3}));  // rows 0 and 3 of base^T
  std::vector<float> ref(12, 0.f);
  for (int r = 0; r < 3; ++r) {
    ref[r * 4 + 2] = 2.f * (r + 1);
    ref[r * 4 + 0] += 1.f;
    ref[r * 4 + 3] += 1.f;
  }
  CHECK(base.to_vector<float>() == ref);
  // An operand that is self, or a copy of a view of it.
  Tensor sq = tensor({1.f, 2.f, 3.f, 4.f}, {2, 2});
  add_(sq, sq.t().clone());
  CHECK(sq.to_vector<float>() == std::vector<float>{2.f, 5.f, 5.f, 8.f});
  Tensor sq2 = tensor({1.f, 2.f, 3.f, 4.f}, {2, 2});
  mul_(sq2, sq2);
  CHECK(sq2.to_vector<float>() == std::vector<float>{1.f, 4.f, 9.f, 16.f});
  // Empty self.
  Tensor e = zeros({0, 3});
  add_(e, ones({3}));
  CHECK(e.numel() == 0);
}

TEST_CASE("in-place ops through a temporary view or a const handle write the storage") {
  Tensor x = zeros({2, 3});
  add_(x[0], ones({3}));        // a temporary view, as libtorch's const in-place ops
  mul_(x.slice(1, 1, 2), 5.0);  // column 1 only
  x.select(0, 1).sub_(2.0);     // the member form on a temporary
  CHECK(x.to_vector<float>() == std::vector<float>{1.f, 5.f, 1.f, -2.f, -2.f, -2.f});
  const Tensor c = zeros({2});
  const Tensor& r = c.add_(3);
  CHECK(&r == &c);
  fill_(c, 1.5);
  copy_(c[1], scalar_tensor(4.0));
  div_(c, 2.0);
  CHECK(c.to_vector<float>() == std::vector<float>{0.75f, 2.f});
  // a module's parameter is a const handle: set by hand, as `lin->weight.fill_` in libtorch
  auto lin = std::make_shared<nn::Linear>(2, 1);
  lin->weight->fill_(0.5);
  lin->bias->copy_(tensor({1.f}));
  CHECK(lin->forward(tensor({2.f, 4.f}, {1, 2})).item<float>() == 4.f);  // 0.5 * 6 + 1
  // an expanded view takes fill_ (one value for all), as in torch, but not add_ or copy_
  const Tensor base = zeros({1, 3});
  const Tensor ex = base.expand({2, 3});
  ex.fill_(1.5);
  CHECK(base.to_vector<float>() == std::vector<float>{1.5f, 1.5f, 1.5f});
  CHECK(ex.to_vector<float>() == std::vector<float>(6, 1.5f));
  CHECK_THROWS_AS(ex.add_(1.0), RuntimeError);
  CHECK_THROWS_AS(ex.copy_(ones({2, 3})), RuntimeError);
  const Tensor s = scalar_tensor(0.0).expand({4, 0, 2});
  s.fill_(3.0);
  CHECK(s.numel() == 0);
}

TEST_CASE("copy_ broadcasts and casts, fill_ fills any dtype") {
  Tensor x = zeros({2, 3});
  copy_(x, tensor({1.f, 2.f, 3.f}));
  CHECK(x.to_vector<float>() == std::vector<float>{1.f, 2.f, 3.f, 1.f, 2.f, 3.f});
  Tensor i = zeros({3}, kInt64);
  Tensor& r = copy_(i, tensor({1.7f, -2.5f, 3.f}));  // float into int: truncates, as PyTorch
  CHECK(&r == &i);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, -2, 3});
  Tensor d = zeros({2, 2}, kFloat64);
  d.copy_(arange(4).view({2, 2}).t());
  CHECK(d.to_vector<double>() == std::vector<double>{0, 2, 1, 3});
  // copy_ into a strided view; a transposed copy of itself.
  Tensor base = zeros({2, 4});
  Tensor v = base.slice(1, 1, std::nullopt, 2);  // columns 1 and 3
  copy_(v, tensor({5.f, 6.f, 7.f, 8.f}, {2, 2}));
  CHECK(base.to_vector<float>() == std::vector<float>{0.f, 5.f, 0.f, 6.f, 0.f, 7.f, 0.f, 8.f});
  Tensor m = tensor({1.f, 2.f, 3.f, 4.f}, {2, 2});
  copy_(m, m.t().clone());
  CHECK(m.to_vector<float>() == std::vector<float>{1.f, 3.f, 2.f, 4.f});

  Tensor f = zeros({2, 2});
  fill_(f, 2.5);
  CHECK(f.to_vector<float>() == std::vector<float>(4, 2.5f));
  Tensor fi = zeros({3}, kInt64);
  fi.fill_(7);
  CHECK(fi.to_vector<int64_t>() == std::vector<int64_t>{7, 7, 7});
  // 2^53 + 1 has no double: the value must not pass through one
  const int64_t big = (int64_t{1} << 53) + 1;
  fi.fill_(big);
  CHECK(fi.to_vector<int64_t>() == std::vector<int64_t>(3, big));
  fill_(fi, -2.7);  // a float into an int tensor truncates, as PyTorch
  CHECK(fi.to_vector<int64_t>() == std::vector<int64_t>(3, -2));
  Tensor fb = zeros({2}, kBool);
  fill_(fb, 1);
  CHECK(fb.to_vector<bool>() == std::vector<bool>{true, true});
  Tensor fv = zeros({2, 3});
  fv.select(1, 1).fill_(-1);
  CHECK(fv.to_vector<float>() == std::vector<float>{0.f, -1.f, 0.f, 0.f, -1.f, 0.f});
  Tensor f0 = zeros({0});
  fill_(f0, 3);
  CHECK(f0.numel() == 0);
}

TEST_CASE("in-place errors") {
  Tensor x = zeros({2, 3});
  check_throws_mentioning<ValueError>([&] { add_(x, ones({3, 3})); }, "[add_]");
  check_throws_mentioning<ValueError>([&] { add_(x, ones({2, 2, 3})); }, "[2, 3]");
  // the ops check before their kernels (binary_inplace, copy_into), so errors name the op
  check_throws_mentioning<ValueError>([&] { mul_(x, ones({4})); }, "[mul_]");
  check_throws_mentioning<ValueError>([&] { copy_(x, ones({2, 1, 3})); }, "[copy_]");
  Tensor i = zeros({3}, kInt64);
  check_throws_mentioning<TypeError>([&] { add_(i, ones({3})); }, "can't be cast");
  CHECK_THROWS_AS(mul_(i, ones({3}, kFloat64)), TypeError);
  Tensor b = zeros({3}, kBool);
  CHECK_THROWS_AS(add_(b, ones({3}, kInt64)), TypeError);
  Tensor ex = zeros({1, 3}).expand({2, 3});
  check_throws_mentioning<RuntimeError>([&] { add_(ex, ones({2, 3})); }, "[add_]");
  CHECK_THROWS_AS(copy_(ex, ones({2, 3})), RuntimeError);
  // Nothing was written by the failed calls.
  CHECK(x.to_vector<float>() == std::vector<float>(6, 0.f));
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>(3, 0));
}

TEST_CASE("in-place ops whose input partly overlaps the written tensor raise, as torch") {
  // torch 1.13 raises "unsupported operation: some elements of the input tensor and the
  // written-to tensor refer to a single memory location" for x.add_(x.t()) (and mul_, sub_,
  // div_, copy_), x[1:].add_(x[:-1]), x.add_(x[0]), x.add_(x[0:1]), x.t().add_(x) and
  // v[1:].copy_(v[:-1]); td read a copy of the input and ran them
  const std::vector<float> start{0, 1, 2, 3, 4, 5, 6, 7, 8};
  Tensor x = arange(9).to(kFloat32).view({3, 3});
  check_throws_mentioning<RuntimeError>(
      [&] { add_(x, x.t()); },
      "[add_] unsupported operation: some elements of the input tensor of shape [3, 3] and the "
      "written-to tensor of shape [3, 3] refer to a single memory location");
  check_throws_naming_op<RuntimeError>([&] { mul_(x, x.t()); }, "mul_");
  check_throws_naming_op<RuntimeError>([&] { x.sub_(x.t()); }, "sub_");
  check_throws_naming_op<RuntimeError>([&] { x /= x.t(); }, "div_");
  check_throws_naming_op<RuntimeError>([&] { copy_(x, x.t()); }, "copy_");
  check_throws_mentioning<RuntimeError>([&] { x.slice(0, 1).add_(x.slice(0, 0, 2)); },
                                        "input tensor of shape [2, 3] and the written-to tensor "
                                        "of shape [2, 3]");
  CHECK_THROWS_AS(add_(x, x[0]), RuntimeError);
  CHECK_THROWS_AS(add_(x, x.slice(0, 0, 1)), RuntimeError);
  CHECK_THROWS_AS(add_(x.t(), x), RuntimeError);
  Tensor v = arange(5).to(kFloat32);
  check_throws_naming_op<RuntimeError>([&] { v.slice(0, 1).copy_(v.slice(0, 0, 4)); }, "copy_");
  // the checks come before any write
  CHECK(x.to_vector<float>() == start);
  CHECK(v.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4});

  // torch runs these: the same view (full overlap), disjoint views, and overlapping views that
  // are not dense, which it does not check (td reads a copy there: the old values)
  add_(x, x);
  x.t().add_(x.t());
  mul_(x, x.view({3, 3}));
  copy_(x[0], x.slice(0, 0, 1).view({3}));
  std::vector<float> want(9);
  for (size_t i = 0; i < 9; ++i) want[i] = (4 * start[i]) * (4 * start[i]);
  CHECK(x.to_vector<float>() == want);
  x[0].add_(x[1]);
  for (size_t j = 0; j < 3; ++j) want[j] += want[3 + j];
  CHECK(x.to_vector<float>() == want);
  std::vector<float> old = want;
  x.slice(1, 0, 2).add_(x.slice(1, 1, 3));  // columns 0, 1 += columns 1, 2 (the old values)
  for (size_t r = 0; r < 3; ++r)
    for (size_t c = 0; c < 2; ++c) want[r * 3 + c] = old[r * 3 + c] + old[r * 3 + c + 1];
  CHECK(x.to_vector<float>() == want);

  // a written tensor whose elements share memory (stride 0): torch's "more than one element of
  // the written-to tensor refers to a single memory location", for every in-place op but fill_
  Tensor ex = zeros({1, 3}).expand({2, 3});
  for (const char* op : {"add_", "mul_", "sub_", "div_", "copy_"}) {
    CAPTURE(op);
    check_throws_mentioning<RuntimeError>(
        [&] {
          std::string o = op;
          Tensor y = ones({2, 3});
          if (o == "add_") add_(ex, y);
          if (o == "mul_") mul_(ex, y);
          if (o == "sub_") sub_(ex, y);
          if (o == "div_") div_(ex, y);
          if (o == "copy_") copy_(ex, y);
        },
        std::string("[") + op + "] cannot write into an expanded tensor of shape [2, 3]");
  }
}

TEST_CASE("vmap: in-place ops with overlapping operands raise where torch's vmap does") {
  auto data = [] { return arange(27).to(kFloat32).view({3, 3, 3}); };
  auto twice = [](const Tensor& t) {
    std::vector<float> v = t.to_vector<float>();
    for (float& e : v) e *= 2;
    return v;
  };
  // the same tensor: each set doubled, whatever its batch dim
  Tensor a = data();
  std::vector<float> want = twice(a);
  vmap([](Tensor t) { return add_(t, t); })(a);
  CHECK(a.to_vector<float>() == want);
  vmap([](Tensor t) { return t.add_(t); }, {.in_dims = {1}})(a);
  vmap([](Tensor s, Tensor t) { return s.mul_(t); })(a, ones({3, 3, 3}));
  CHECK(a.to_vector<float>() == twice(tensor<float>(want, {27})));
  Tensor b = data();
  vmap([](Tensor s, Tensor t) { return add_(s, t); })(b, b);
  CHECK(b.to_vector<float>() == twice(data()));
  // torch's vmap raises for each set's transpose, and for one tensor mapped along two dims
  Tensor c = data();
  for (auto f : {std::function<Tensor(Tensor)>([](Tensor t) { return add_(t, t.t()); }),
                 std::function<Tensor(Tensor)>([](Tensor t) { return t.sub_(t.t()); }),
                 std::function<Tensor(Tensor)>([](Tensor t) { return copy_(t, t.t()); })})
    check_throws_mentioning<RuntimeError>([&] { vmap(f)(c); }, "unsupported operation");
  CHECK_THROWS_AS(vmap([](Tensor s, Tensor t) { return add_(s, t); }, {.in_dims = {0, 1}})(c, c),
                  RuntimeError);
  CHECK_THROWS_AS(vmap([&](Tensor t) { return add_(t, c[0]); })(c), RuntimeError);
  CHECK(c.to_vector<float>() == data().to_vector<float>());
  // each set's x.add_(x[0]) is not dense in the stacked layout: torch's vmap runs it (in its
  // iteration order); td reads a copy, as a call per set would if it ran
  Tensor d = data();
  vmap([](Tensor t) { return add_(t, t[0]); })(d);
  std::vector<float> dv = data().to_vector<float>(), got = d.to_vector<float>();
  for (size_t s = 0; s < 3; ++s)
    for (size_t i = 0; i < 9; ++i) CHECK(got[s * 9 + i] == dv[s * 9 + i] + dv[s * 9 + i % 3]);
}

TEST_CASE("in-place ops into an empty expanded view are no-ops, as torch") {
  // [3, 0] expanded from [1, 0] has stride 0 on a dim of size 3 but no element to share: torch
  // writes nothing; td raised "several elements share one memory location"
  Tensor base = zeros({1, 0});
  Tensor ex = base.expand({3, 0});
  CHECK(add_(ex, ones({3, 0})).shape() == Shape{3, 0});
  CHECK(mul_(ex, 2.0).shape() == Shape{3, 0});
  CHECK(copy_(ex, ones({0})).shape() == Shape{3, 0});
  CHECK(fill_(ex, 1.0).shape() == Shape{3, 0});
  Tensor v = zeros({2, 2}).narrow(1, 2, 0).unsqueeze(0).expand({4, 2, 0});
  CHECK(sub_(v, ones({2, 0})).shape() == Shape{4, 2, 0});
  CHECK(div_(v, 3).shape() == Shape{4, 2, 0});
  // an empty view still checks the operand's shape and the cast
  CHECK_THROWS_AS(add_(ex, ones({2, 0})), ValueError);
  CHECK_THROWS_AS(add_(zeros({0}, kInt64).expand({0}), ones({0})), TypeError);
}

TEST_CASE("allclose and equal") {
  Tensor a = tensor({1.f, 2.f, 100.f});
  // torch: "rtol must be greater than or equal to zero, but got -1"
  check_throws_mentioning<ValueError>([&] { allclose(a, a, -1.0); },
                                      "[allclose] rtol must be greater than or equal to zero");
  check_throws_mentioning<ValueError>([&] { allclose(a, a, 1e-5, -1.0); }, "[allclose] atol");
  CHECK_THROWS_AS(allclose(a, a, std::nan("")), ValueError);
  CHECK(allclose(a, a));
  CHECK(allclose(a, tensor({1.f, 2.f, 100.0009f})));  // within rtol 1e-5 * 100
  CHECK(!allclose(a, tensor({1.f, 2.f, 100.01f})));
  CHECK(allclose(a, tensor({1.1f, 2.f, 100.f}), 0.0, 0.11));
  CHECK(!allclose(a, tensor({1.1f, 2.f, 100.f}), 0.0, 0.05));
  // |a - b| <= atol + rtol * |b|: asymmetric in b.
  CHECK(allclose(tensor({1.f}), tensor({2.f}), 0.5, 0.0));
  CHECK(!allclose(tensor({2.f}), tensor({1.f}), 0.5, 0.0));
  // Broadcasting, non-contiguous operands.
  CHECK(allclose(full({2, 3}, 1.0), ones({3})));
  CHECK(!allclose(full({2, 3}, 1.0), tensor({1.f, 1.f, 2.f})));
  Tensor m = arange(6).view({2, 3}).to(kFloat32);
  CHECK(allclose(m.t(), m.t().contiguous()));
  // NaN is never close; equal infinities are.
  float inf = std::numeric_limits<float>::infinity();
  CHECK(!allclose(tensor({std::nanf("")}), tensor({std::nanf("")})));
  CHECK(allclose(tensor({inf}), tensor({inf})));
  CHECK(!allclose(tensor({inf}), tensor({-inf})));
  CHECK(allclose(zeros({0}), zeros({0})));
  check_throws_mentioning<ValueError>([] { allclose(ones({2}), ones({3})); }, "[allclose]");
  check_throws_mentioning<TypeError>([] { allclose(ones({2}), ones({2}, kFloat64)); },
                                     "[allclose]");

  CHECK(equal(m, m.t().t()));
  CHECK(equal(tensor<int64_t>({1, 2}), tensor({1.f, 2.f})));  // values compare, as PyTorch
  CHECK(!equal(ones({2}), ones({1, 2})));
  CHECK(!equal(ones({3}), ones({3}).expand({2, 3})));
  CHECK(!equal(tensor({1.f, 2.f}), tensor({1.f, 2.0001f})));
  CHECK(!equal(tensor({std::nanf("")}), tensor({std::nanf("")})));
  CHECK(
      equal(tensor<int64_t>({(int64_t{1} << 60) + 1}), tensor<int64_t>({(int64_t{1} << 60) + 1})));
  CHECK(!equal(tensor<int64_t>({(int64_t{1} << 60) + 1}), tensor<int64_t>({int64_t{1} << 60})));
  CHECK(equal(zeros({0, 2}), zeros({0, 2})));
}

TEST_CASE("compound assignment and scalar in-place ops") {
  Tensor x = tensor({1.f, 2.f, 3.f});
  Tensor* before = &x;
  x += tensor({1.f, 1.f, 1.f});
  CHECK(x.to_vector<float>() == std::vector<float>{2, 3, 4});
  x -= tensor({0.5f});  // broadcast
  CHECK(x.to_vector<float>() == std::vector<float>{1.5f, 2.5f, 3.5f});
  x *= 2.0;
  CHECK(x.to_vector<float>() == std::vector<float>{3, 5, 7});
  x /= tensor({3.f, 5.f, 7.f});
  CHECK(x.to_vector<float>() == std::vector<float>{1, 1, 1});
  x += 1;
  x -= 0.5;
  x /= 2;
  CHECK(x.to_vector<float>() == std::vector<float>{0.75f, 0.75f, 0.75f});
  CHECK(before == &x);
  CHECK(x.dtype() == kFloat32);

  // in place on a view writes through to the base
  Tensor base = zeros({2, 2});
  base[1] += 3.0;
  CHECK(base.to_vector<float>() == std::vector<float>{0, 0, 3, 3});

  Tensor y = tensor({1.f, 2.f});
  y.add_(1.0).mul_(0.5);
  CHECK(y.to_vector<float>() == std::vector<float>{1, 1.5f});
  add_(y, 1.0);
  mul_(y, 2);
  CHECK(y.to_vector<float>() == std::vector<float>{4, 5});
  y.sub_(1).div_(2.0);
  CHECK(y.to_vector<float>() == std::vector<float>{1.5f, 2});
  sub_(y, tensor({0.5f, 1.f}));
  div_(y, 2);
  CHECK(y.to_vector<float>() == std::vector<float>{0.5f, 0.5f});

  // integer tensors: integral operands keep int64; a float result can't be cast back (torch:
  // "result type Float can't be cast to the desired output type Long")
  Tensor i = arange(3);
  i += 2;
  i *= arange(3);
  i -= 1;
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{-1, 2, 7});
  check_throws_mentioning<TypeError>([&] { i += ones({3}); }, "can't be cast");
  check_throws_naming_op<TypeError>([&] { i *= 2.0; }, "mul_");
  check_throws_naming_op<TypeError>([&] { i -= 0.5; }, "sub_");
  check_throws_naming_op<TypeError>([&] { i /= 2; }, "div_");  // true division gives float
  check_throws_naming_op<TypeError>([&] { i /= arange(3); }, "div_");
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{-1, 2, 7});  // untouched
  // other must broadcast to self's shape
  Tensor z = zeros({3});
  check_throws_naming_op<ValueError>([&] { z -= zeros({2, 3}); }, "sub_");
  check_throws_naming_op<ValueError>([&] { z /= ones({2, 3}); }, "div_");
  // float64 into float32 is castable (computed as result_type, stored as float32)
  Tensor f = ones({2});
  f += scalar_tensor(0.5, kFloat64);
  CHECK(f.dtype() == kFloat32);
  CHECK(f.to_vector<float>() == std::vector<float>{1.5f, 1.5f});
  fill_(f, 3);
  CHECK(f.to_vector<float>() == std::vector<float>{3, 3});
}

TEST_CASE("compound assignment inside vmap acts on each set") {
  auto f = vmap([](Tensor x, Tensor y) {
    Tensor c = x.clone();
    c -= y;
    c *= 2;
    c /= tensor({2.f, 4.f});
    c += 1.0;
    return c;
  });
  // set 0: ([1, 2] - [1, 1]) * 2 / [2, 4] + 1 = [1, 1.5]; set 1: ([3, 4] - [0, 2]) * 2 / [2, 4] + 1
  // = [4, 2]
  Tensor r = f(tensor({1.f, 2.f, 3.f, 4.f}, {2, 2}), tensor({1.f, 1.f, 0.f, 2.f}, {2, 2}));
  CHECK(r.to_vector<float>() == std::vector<float>{1, 1.5f, 4, 2});
  auto g = vmap([](Tensor x) {
    Tensor c = x.clone();
    c /= 2;
    return c;
  });
  check_throws_naming_op<TypeError>([&] { g(arange(4).view({2, 2})); }, "div_");
}
