// Tensor basics: factories, views (shapes, strides, storage sharing), copies, data access and
// printing, with their error paths.
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "engine/engine.h"
#include "tests/test_util.h"

using namespace td;
using namespace td::test;

namespace {


std::string str(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

Tensor iota(const Shape& s) {
  return arange(0, static_cast<double>(shape_numel(s)), 1, kFloat32).view(s);
}

}  // namespace

TEST_CASE("Shape is a small vector that stands in for std::vector<int64_t>") {
  Shape s{4, 10, 1};
  std::vector<int64_t> v = s;  // implicit both ways
  Shape back = v;
  CHECK(back == s);
  CHECK(s == std::vector<int64_t>{4, 10, 1});
  CHECK(std::vector<int64_t>{4, 10} != s);
  CHECK(Shape(3, 2) == Shape{2, 2, 2});
  CHECK(Shape(v.rbegin(), v.rend()) == Shape{1, 10, 4});
  CHECK(Shape{1, 2} < Shape{1, 3});
  std::ostringstream os;
  os << s;
  CHECK(os.str() == "[4, 10, 1]");

  // past the inline capacity, and inserting a piece of itself (which may move the storage)
  Shape big;
  for (int64_t i = 0; i < 10; ++i) big.push_back(i);
  big.insert(big.begin() + 1, big.begin(), big.end());
  CHECK(big.size() == 20);
  CHECK(big[0] == 0);
  CHECK(big[1] == 0);
  CHECK(big[10] == 9);
  CHECK(big.back() == 9);
  big.erase(big.begin() + 1, big.begin() + 11);
  CHECK(big == Shape{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  big.insert(big.begin(), big.back());
  CHECK(big.front() == 9);
  Shape moved = std::move(big);
  CHECK(moved.size() == 11);
  CHECK(big.empty());
  big = moved;
  CHECK(big == moved);
  CHECK_THROWS_AS(big.at(11), std::out_of_range);
  big.resize(2);
  big.resize(4);
  CHECK(big == Shape{9, 0, 0, 0});
}

// GCC 12.2 with AVX-512 and -O3 built {a, a, 0, 0} and {a, a, a, 0} as four a's (its SLP
// vectoriser; CMakeLists.txt turns it off there): ones({1, 1, 0, 0}) had shape [1, 1, 1, 1]
TEST_CASE("a Shape holds the values it is built from, zeros after repeats included") {
  const Shape a{1, 1, 0, 0}, b{5, 5, 0, 0}, c{7, 7, 7, 0};
  CHECK(a.size() == 4);
  CHECK(a[0] == 1);
  CHECK(a[1] == 1);
  CHECK(a[2] == 0);
  CHECK(a[3] == 0);
  CHECK(b[1] == 5);
  CHECK(b[2] == 0);
  CHECK(c[2] == 7);
  CHECK(c[3] == 0);
  CHECK(ones({1, 1, 0, 0}).numel() == 0);
}
TEST_CASE("factories") {
  Tensor z = zeros({2, 3});
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.dtype() == kFloat32);
  CHECK(z.to_vector<float>() == std::vector<float>(6, 0.f));
  CHECK(ones({2}, kInt64).to_vector<int64_t>() == std::vector<int64_t>{1, 1});
  CHECK(full({2}, 2.5, kFloat64).to_vector<double>() == std::vector<double>{2.5, 2.5});
  CHECK(full({3}, 1, kBool).to_vector<bool>() == std::vector<bool>{true, true, true});
  CHECK(empty({4, 0}).numel() == 0);
  Tensor like = zeros({3}, kFloat64);
  CHECK(ones_like(like).dtype() == kFloat64);
  CHECK(zeros_like(like).to_vector<double>() == std::vector<double>{0, 0, 0});
  CHECK(full_like(like, 7).to_vector<double>() == std::vector<double>{7, 7, 7});
  CHECK(empty_like(like).shape() == Shape{3});
  CHECK(arange(4).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(arange(4).dtype() == kInt64);
  CHECK(arange(1, 2, 0.25, kFloat32).to_vector<float>() ==
        std::vector<float>{1.f, 1.25f, 1.5f, 1.75f});
  CHECK(arange(5, 0, -2).to_vector<int64_t>() == std::vector<int64_t>{5, 3, 1});
  CHECK(arange(0, 0).numel() == 0);
  CHECK_THROWS_AS(arange(0, 5, 0), ValueError);
  check_throws_naming_op<ValueError>([] { arange(0, 5, -1); }, "arange");
  CHECK_THROWS_AS(zeros({-1}), ValueError);
  Tensor t = tensor<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t.dtype() == kInt64);
  CHECK(t.shape() == Shape{2, 3});
  CHECK(tensor<double>({1.0}).dtype() == kFloat64);
  CHECK(tensor<bool>({true, false}).to_vector<bool>() == std::vector<bool>{true, false});
  CHECK(tensor({1.f, 2.f}).dtype() == kFloat32);
  CHECK_THROWS_AS(tensor<float>({1.f, 2.f, 3.f}, {2, 2}), ValueError);
  check_throws_naming_op<ValueError>([] { tensor({1.f, 2.f}, {3}); }, "tensor");
  Tensor s = scalar_tensor(3.5);
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.item<float>() == 3.5f);
  CHECK(scalar_tensor(2, kInt64).item<int64_t>() == 2);
}

TEST_CASE("view and reshape") {
  Tensor x = iota({2, 3, 4});
  Tensor v = x.view({6, 4});
  CHECK(v.shape() == Shape{6, 4});
  CHECK(v.shares_storage(x));
  CHECK(x.view({-1}).shape() == Shape{24});
  CHECK(x.view({4, -1}).shape() == Shape{4, 6});
  CHECK_THROWS_AS(x.view({5, -1}), ValueError);
  CHECK_THROWS_AS(x.view({-1, -1}), ValueError);
  CHECK_THROWS_AS(x.view({7}), ValueError);
  // a transposed tensor cannot be viewed flat, but can be reshaped (with a copy)
  Tensor t = x.transpose(0, 2);  // [4, 3, 2]
  CHECK_THROWS_AS(t.view({24}), RuntimeError);
  check_throws_naming_op<RuntimeError>([&] { t.view({24}); }, "view");
  Tensor r = t.reshape({24});
  CHECK(!r.shares_storage(x));
  auto rv = r.to_vector<float>();
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c)
        CHECK(rv[a * 6 + b * 2 + c] == static_cast<float>(c * 12 + b * 4 + a));
  // a reshape that a view can do does not copy
  Tensor r2 = x.reshape({2, 12});
  CHECK(r2.shares_storage(x));
  CHECK(x.reshape({3, 8}).shares_storage(x));
  // splitting a dim of a transposed tensor is still a view
  Tensor t2 = iota({4, 6}).t();  // [6, 4]
  CHECK(t2.reshape({2, 3, 4}).shares_storage(t2));
}

TEST_CASE("permute transpose t unsqueeze squeeze") {
  Tensor x = iota({2, 3, 4});
  Tensor p = x.permute({2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.strides() == Strides{1, 12, 4});
  CHECK(p.shares_storage(x));
  CHECK(x.permute({-1, 0, 1}).shape() == Shape{4, 2, 3});
  CHECK_THROWS_AS(x.permute({0, 1}), ValueError);
  CHECK_THROWS_AS(x.permute({0, 0, 1}), ValueError);
  CHECK_THROWS_AS(x.permute({0, 1, 3}), IndexError);
  Tensor tr = x.transpose(0, -1);
  CHECK(tr.shape() == Shape{4, 3, 2});
  CHECK(tr.strides() == Strides{1, 4, 12});
  CHECK_THROWS_AS(x.transpose(0, 3), IndexError);
  Tensor m = iota({2, 3});
  CHECK(m.t().shape() == Shape{3, 2});
  CHECK(m.t().to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  Tensor u = m.unsqueeze(1);
  CHECK(u.shape() == Shape{2, 1, 3});
  CHECK(m.unsqueeze(-1).shape() == Shape{2, 3, 1});
  CHECK(m.unsqueeze(2).shape() == Shape{2, 3, 1});
  CHECK_THROWS_AS(m.unsqueeze(3), IndexError);
  check_throws_naming_op<IndexError>([&] { m.unsqueeze(-4); }, "unsqueeze");
  Tensor s = zeros({1, 2, 1});
  CHECK(s.squeeze().shape() == Shape{2});
  CHECK(s.squeeze(0).shape() == Shape{2, 1});
  CHECK(s.squeeze(1).shape() == Shape{1, 2, 1});  // size 2: unchanged
  CHECK(s.squeeze(-1).shape() == Shape{1, 2});
  CHECK_THROWS_AS(s.squeeze(3), IndexError);
}

TEST_CASE("expand select slice narrow") {
  Tensor c = tensor({1.f, 2.f, 3.f}).unsqueeze(0);  // [1, 3]
  Tensor e = c.expand({4, 3});
  CHECK(e.shape() == Shape{4, 3});
  CHECK(e.strides()[0] == 0);
  CHECK(e.shares_storage(c));
  CHECK(e.to_vector<float>() == std::vector<float>{1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3});
  CHECK(c.expand({2, -1, 3}).shape() == Shape{2, 1, 3});
  CHECK(c.expand({5, 2, 3}).shape() == Shape{5, 2, 3});
  CHECK(!e.is_contiguous());
  CHECK(e.contiguous().is_contiguous());
  CHECK_THROWS_AS(c.expand({4, 2}), ValueError);
  CHECK_THROWS_AS(c.expand({3}), ValueError);
  check_throws_naming_op<ValueError>([&] { c.expand({4, 4}); }, "expand");

  Tensor x = iota({3, 4});
  CHECK(x.select(0, 1).to_vector<float>() == std::vector<float>{4, 5, 6, 7});
  CHECK(x.select(1, -1).to_vector<float>() == std::vector<float>{3, 7, 11});
  CHECK(x[2].to_vector<float>() == std::vector<float>{8, 9, 10, 11});
  CHECK(x[1].shares_storage(x));
  CHECK_THROWS_AS(x.select(0, 3), IndexError);
  CHECK_THROWS_AS(x.select(0, -4), IndexError);
  CHECK_THROWS_AS(x.select(2, 0), IndexError);
  CHECK_THROWS_AS(scalar_tensor(1).select(0, 0), IndexError);

  CHECK(x.slice(1, 1, 3).to_vector<float>() == std::vector<float>{1, 2, 5, 6, 9, 10});
  CHECK(x.slice(1, std::nullopt, std::nullopt, 2).to_vector<float>() ==
        std::vector<float>{0, 2, 4, 6, 8, 10});
  CHECK(x.slice(1, -2).to_vector<float>() == std::vector<float>{2, 3, 6, 7, 10, 11});
  CHECK(x.slice(0, 0, -1).shape() == Shape{2, 4});
  CHECK(x.slice(0, 1, 100).shape() == Shape{2, 4});
  CHECK(x.slice(0, 3, 1).shape() == Shape{0, 4});
  CHECK(x.slice(1, 1, std::nullopt, 2).strides() == Strides{4, 2});
  CHECK_THROWS_AS(x.slice(1, 0, 2, 0), ValueError);
  CHECK_THROWS_AS(x.slice(1, 0, 2, -1), ValueError);
  CHECK_THROWS_AS(x.slice(2), IndexError);

  CHECK(x.narrow(0, 1, 2).to_vector<float>() == std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(x.narrow(1, -2, 1).to_vector<float>() == std::vector<float>{2, 6, 10});
  CHECK_THROWS_AS(x.narrow(0, 2, 2), IndexError);
  check_throws_mentioning<IndexError>([&] { x.narrow(2, 0, 1); }, "[narrow] dim 2 out of range");
  CHECK(x.narrow(-1, 1, 1).to_vector<float>() == std::vector<float>{1, 5, 9});
  CHECK_THROWS_AS(scalar_tensor(1.0).narrow(0, 0, 1), IndexError);
  CHECK_THROWS_AS(x.narrow(0, 0, -1), IndexError);
}

TEST_CASE("flatten unflatten") {
  Tensor x = iota({2, 3, 4});
  CHECK(x.flatten().shape() == Shape{24});
  CHECK(x.flatten(1).shape() == Shape{2, 12});
  CHECK(x.flatten(0, 1).shape() == Shape{6, 4});
  CHECK(x.flatten().shares_storage(x));
  CHECK(scalar_tensor(1).flatten().shape() == Shape{1});
  CHECK(scalar_tensor(1).flatten(-1, 0).shape() == Shape{1});
  // a 0-d tensor's dims are 0 and -1: nn.Flatten's start_dim 1 is out of range, as in torch
  check_throws_naming_op<IndexError>([] { scalar_tensor(1).flatten(1); }, "flatten");
  CHECK_THROWS_AS(x.flatten(2, 1), ValueError);
  CHECK_THROWS_AS(x.flatten(0, 3), IndexError);
  Tensor f = x.transpose(0, 1).flatten();  // needs a copy
  CHECK(f.to_vector<float>()[4] == 12.f);  // element [0][1][0] of the transposed = x[1][0][0]
  CHECK(x.unflatten(2, {2, 2}).shape() == Shape{2, 3, 2, 2});
  CHECK(x.unflatten(-1, {-1, 2}).shape() == Shape{2, 3, 2, 2});
  CHECK_THROWS_AS(x.unflatten(2, {3, 2}), ValueError);
  CHECK_THROWS_AS(x.unflatten(2, {}), ValueError);
}

TEST_CASE("contiguous clone to item to_vector") {
  Tensor x = iota({2, 3});
  CHECK(x.contiguous().is_same(x));
  Tensor t = x.t();
  CHECK(!t.is_contiguous());
  Tensor tc = t.contiguous();
  CHECK(tc.is_contiguous());
  CHECK(!tc.shares_storage(x));
  CHECK(tc.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  Tensor cl = x.clone();
  CHECK(!cl.shares_storage(x));
  CHECK(cl.to_vector<float>() == x.to_vector<float>());
  Tensor xi = x.to(kInt64);
  CHECK(xi.dtype() == kInt64);
  CHECK(xi.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  CHECK(x.to_vector<int64_t>()[5] == 5);
  CHECK(x[1][2].item<float>() == 5.f);
  CHECK(x[1][2].item<int64_t>() == 5);
  CHECK(x[1][2].item<double>() == 5.0);
  CHECK_THROWS_AS(x.item<float>(), RuntimeError);
  CHECK_THROWS_AS(x.data<double>(), TypeError);
  CHECK(*x.data<float>() == 0.f);
  CHECK(t.slice(0, 1).to_vector<float>() == std::vector<float>{1, 4, 2, 5});
}

TEST_CASE("printing like PyTorch") {
  CHECK(str(tensor({1.f, 2.f, 3.f, 4.f}, {2, 2})) == "tensor([[1., 2.],\n        [3., 4.]])");
  CHECK(str(tensor<double>({1.0, 2.0, 3.0, 4.0}, {2, 2})) ==
        "tensor([[1., 2.],\n        [3., 4.]], dtype=td.float64)");
  CHECK(str(scalar_tensor(3.5)) == "tensor(3.5000)");
  CHECK(str(zeros({0, 3})) == "tensor([], size=(0, 3))");
  CHECK(str(zeros({0})) == "tensor([])");
  CHECK(str(tensor<int64_t>({1, 2})) == "tensor([1, 2])");
  CHECK(str(scalar_tensor(2, kInt64)) == "tensor(2)");
  CHECK(str(tensor<int64_t>({1, -100})) == "tensor([   1, -100])");
  CHECK(str(tensor<int64_t>({9007199254740993})) == "tensor([9007199254740993])");
  CHECK(str(tensor<bool>({true, false})) == "tensor([ True, False])");
  CHECK(str(tensor({1e-5f, 1.f})) == "tensor([1.0000e-05, 1.0000e+00])");
  CHECK(str(tensor({1.5f, 100000.f})) == "tensor([1.5000e+00, 1.0000e+05])");
  CHECK(str(tensor({NAN, INFINITY, -1.5f})) == "tensor([    nan,     inf, -1.5000])");
  CHECK(str(tensor({0.5f, -2.25f})) == "tensor([ 0.5000, -2.2500])");
  CHECK(str(iota({2, 3}).t()) == "tensor([[0., 3.],\n        [1., 4.],\n        [2., 5.]])");
  CHECK(str(iota({2, 1, 2})) == "tensor([[[0., 1.]],\n\n        [[2., 3.]]])");
  // summarised above 1000 elements (golden text from PyTorch 1.13)
  CHECK(str(iota({2, 1000})) ==
        "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 9.9700e+02, 9.9800e+02,\n"
        "         9.9900e+02],\n"
        "        [1.0000e+03, 1.0010e+03, 1.0020e+03,  ..., 1.9970e+03, 1.9980e+03,\n"
        "         1.9990e+03]])");
  CHECK(str(Tensor()) == "tensor(undefined)");
}

TEST_CASE("printing a batched tensor") {
  VmapLevelScope outer(2, Randomness::Error);
  Tensor b = add_batch_tag(tensor({1.f, 2.f, 3.f, 4.f}, {2, 2}), outer.level(), 1);
  CHECK(b.shape() == Shape{2});
  std::string s = str(b);
  CHECK(s == "BatchedTensor(lvl=" + std::to_string(outer.level()) +
                 ", bdim=1, value=tensor([[1., 2.],\n        [3., 4.]]))");
}

TEST_CASE("add_batch_tag with a range tags that part of the dim, under an outer level too") {
  VmapLevelScope outer(2, Randomness::Error);
  Tensor x = arange(30).reshape({2, 5, 3});  // x[o][i][j] = 15 o + 3 i + j
  Tensor b = add_batch_tag(x, outer.level(), 0);
  VmapLevelScope inner(3, Randomness::Error);
  Tensor c = add_batch_tag(b, inner.level(), 0, 1, 3);  // rows 1..3 of each outer set
  CHECK(c.shape() == Shape{3});
  Batched in = remove_batch_tag(c, inner.level());
  Batched out = remove_batch_tag(in.value, outer.level());
  REQUIRE(out.value.shape() == Shape{2, 3, 3});
  std::vector<int64_t> want;
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t i = 1; i < 4; ++i)
      for (int64_t j = 0; j < 3; ++j) want.push_back(15 * o + 3 * i + j);
  CHECK(out.value.contiguous().to_vector<int64_t>() == want);
  CHECK(add_batch_tag(x, inner.level(), 2, 3, 0).shape() == Shape{2, 5});  // empty part
  CHECK_THROWS_WITH_AS(add_batch_tag(x, inner.level(), 1, 3, 3),
                       doctest::Contains("[add_batch_tag] range [3, 6) out of range for dim 1"),
                       IndexError);
}

TEST_CASE("arange infers its dtype from the bound types, as torch.arange") {
  Tensor q = arange(0, 1, 0.25);
  CHECK(q.dtype() == kFloat32);
  CHECK(q.to_vector<float>() == std::vector<float>{0, 0.25f, 0.5f, 0.75f});
  CHECK(arange(2.5).dtype() == kFloat32);
  CHECK(arange(2.5).to_vector<float>() == std::vector<float>{0, 1, 2});
  CHECK(arange(0.0, 3.0).dtype() == kFloat32);  // floating types even with integral values
  CHECK(arange(5).dtype() == kInt64);
  CHECK(arange(int64_t{2}, int64_t{7}, int64_t{2}).to_vector<int64_t>() ==
        std::vector<int64_t>{2, 4, 6});
  CHECK(arange(0, 10, 2).dtype() == kInt64);
  CHECK(arange(3, kFloat32).dtype() == kFloat32);
  CHECK(arange(0, 1, 0.5, kFloat64).dtype() == kFloat64);
  CHECK(arange(0.0, 3.0, 1.0, kInt64).dtype() == kInt64);  // an explicit dtype wins
}

TEST_CASE("an int64 arange truncates its bounds and step to int64 first, as torch") {
  auto iv = [](const Tensor& t) { return t.to_vector<int64_t>(); };
  using V = std::vector<int64_t>;
  // torch.arange(3.7, dtype=torch.int64) is [0, 1, 2]: end 3, not ceil(3.7) = 4 elements
  CHECK(iv(arange(3.7, kInt64)) == V{0, 1, 2});
  CHECK(arange(0.5, kInt64).numel() == 0);                 // end 0
  CHECK(iv(arange(0.5, -2.25, -1, kInt64)) == V{0, -1});   // 0 down to -2
  CHECK(iv(arange(0.5, 3.9, 1.5, kInt64)) == V{0, 1, 2});  // step 1
  CHECK(arange(0.5, 0.2, 1, kInt64).numel() == 0);         // 0 to 0: empty, not a sign error
  // a step that truncates to 0 is refused (it gave 30 elements of -3 + 0.1 i)
  check_throws_mentioning<ValueError>([] { arange(-3, 0, 0.1, kInt64); }, "[arange] step");
  CHECK_THROWS_AS(arange(0.0, 1e19, 1.0, kInt64), ValueError);  // beyond int64
  // stepped in int64: exact beyond 2^53 (through a double, 2^62 + 1 came back as 2^62)
  const int64_t big = int64_t{1} << 62;
  CHECK(iv(arange(big, big + 3)) == V{big, big + 1, big + 2});
  const int64_t top = std::numeric_limits<int64_t>::max();
  CHECK(iv(arange(top - 2, top, 1)) == V{top - 2, top - 1});
  CHECK(iv(arange(top, top - 5, -2)) == V{top, top - 2, top - 4});
  // float dtypes keep the floating bounds
  CHECK(arange(3.7, kFloat32).to_vector<float>() == std::vector<float>{0, 1, 2, 3});
  check_throws_naming_op<ValueError>([] { arange(0.0, INFINITY); }, "arange");
}

TEST_CASE("item and to_vector convert to any arithmetic type") {
  CHECK(arange(3).sum().item<int>() == 3);
  CHECK(arange(3).sum().item<uint8_t>() == 3);
  CHECK(arange(3).sum().item<long long>() == 3);
  CHECK(scalar_tensor(2.75).item<int32_t>() == 2);  // C++ conversion truncates
  CHECK(scalar_tensor(2.5, kFloat64).item<long double>() == 2.5L);
  CHECK(scalar_tensor(0.0).item<bool>() == false);
  CHECK(arange(4).to_vector<int>() == std::vector<int>{0, 1, 2, 3});
  CHECK(arange(3).to_vector<uint8_t>() == std::vector<uint8_t>{0, 1, 2});
  CHECK(tensor({0.5f, 1.5f}).to_vector<long double>() == std::vector<long double>{0.5L, 1.5L});
  CHECK(tensor(std::vector<bool>{true, false}).to_vector<short>() == std::vector<short>{1, 0});
  check_throws_naming_op<RuntimeError>([] { (void)arange(3).item<int>(); }, "item");
  // a value the requested type cannot hold raises, as libtorch's item<T> does; the edges fit
  check_throws_mentioning<RuntimeError>([] { (void)scalar_tensor(3e9).item<int>(); },
                                        "[item] value 3e+09 cannot be converted to int32");
  CHECK_THROWS_AS((void)full({}, int64_t{1} << 40).item<int>(), RuntimeError);
  CHECK_THROWS_AS((void)scalar_tensor(300.).item<uint8_t>(), RuntimeError);
  CHECK_THROWS_AS((void)scalar_tensor(-1.0).item<unsigned>(), RuntimeError);
  CHECK_THROWS_AS((void)scalar_tensor(std::nan(""), kFloat64).item<int64_t>(), RuntimeError);
  CHECK_THROWS_AS((void)scalar_tensor(1e300, kFloat64).item<float>(), RuntimeError);
  CHECK(scalar_tensor(-0.5).item<unsigned>() == 0u);  // truncates to 0, which fits
  CHECK(full({}, std::numeric_limits<int>::min()).item<int>() == std::numeric_limits<int>::min());
  CHECK(scalar_tensor(255.9).item<uint8_t>() == 255);
  CHECK(std::isnan(scalar_tensor(std::nan(""), kFloat64).item<float>()));
  check_throws_mentioning<RuntimeError>([] { (void)arange(254, 257).to_vector<uint8_t>(); },
                                        "[to_vector] value 256");
  // to_vector checks every element as item() checks its one: from a float tensor to int64 or
  // float too (it went through to(dtype), which wraps), naming the stored value
  check_throws_mentioning<RuntimeError>([] { (void)full({2}, 1e20).to_vector<int64_t>(); },
                                        "[to_vector] value 1e+20 cannot be converted to int64");
  CHECK_THROWS_AS((void)full({2}, std::nan("")).to_vector<int64_t>(), RuntimeError);
  CHECK_THROWS_AS((void)full({2}, 1e300, kFloat64).to_vector<float>(), RuntimeError);
  check_throws_mentioning<RuntimeError>([] { (void)full({2}, 1e20).to_vector<int8_t>(); },
                                        "value 1e+20");
  CHECK(full({2}, 1e19).to_vector<uint64_t>()[1] == full({}, 1e19).item<uint64_t>());
  CHECK(full({2}, 2.75).to_vector<int64_t>() == std::vector<int64_t>{2, 2});  // truncates
  CHECK(std::isnan(full({1}, std::nan(""), kFloat64).to_vector<float>()[0]));
  CHECK(tensor({0.f, 2.f}).to_vector<bool>() == std::vector<bool>{false, true});
}

TEST_CASE("from_storage refuses a layout outside its storage") {
  auto st = make_storage(16);  // room for 4 floats
  const Tensor ok = Tensor::from_storage(st, kFloat32, {2, 2}, {1, 2});
  CHECK(ok.shape() == Shape{2, 2});
  CHECK(Tensor::from_storage(st, kFloat32, {2}, {-1}, 1).numel() == 2);  // elements 1 and 0
  CHECK(Tensor::from_storage(st, kFloat32, {0, 7}, {100, 1}, 0).numel() == 0);
  CHECK(Tensor::from_storage(st, kFloat32, {4}, {0}, 3).numel() == 4);  // one element, repeated
  check_throws_mentioning<ValueError>(
      [&] { Tensor::from_storage(st, kFloat32, {2}, {-1}, 0); },
      "[from_storage] shape [2], strides [-1] and offset 0 of float32 reach outside a storage "
      "of 16 bytes");
  CHECK_THROWS_AS(Tensor::from_storage(st, kFloat32, {10}, {1}), ValueError);
  CHECK_THROWS_AS(Tensor::from_storage(st, kFloat64, {3}, {1}), ValueError);  // 24 bytes
  CHECK_THROWS_AS(Tensor::from_storage(st, kFloat32, {1}, {1}, 4), ValueError);
  CHECK_THROWS_AS(Tensor::from_storage(st, kFloat32, {1}, {1}, -1), ValueError);
  CHECK_THROWS_AS(Tensor::from_storage(st, kFloat32, {2, int64_t{1} << 62}, {int64_t{1} << 62, 1}),
                  ValueError);
  check_throws_mentioning<ValueError>(
      [&] {
        Tensor::from_storage(st, kFloat32, {2, 2}, {1});
      },
      "have different lengths");
  check_throws_mentioning<ValueError>([&] { Tensor::from_storage(st, kFloat32, {-2}, {1}); },
                                      "negative size");
  check_throws_mentioning<ValueError>([] { Tensor::from_storage(nullptr, kFloat32, {2}, {1}); },
                                      "the storage is null");
}

TEST_CASE("shapes whose element count overflows, or too large to allocate, raise") {
  check_throws_mentioning<ValueError>([] { zeros({int64_t{1} << 62, 4}); }, "[zeros]");
  check_throws_mentioning<ValueError>(
      [] {
        empty({int64_t{1} << 32, int64_t{1} << 32});
      },
      "overflows");
  check_throws_naming_op<ValueError>([] { ones({3, int64_t{1} << 62, 8}); }, "ones");
  // a zero dim makes the count 0 whatever the others
  CHECK(zeros({0, int64_t{1} << 62, 4}).numel() == 0);
  // 2^55 float32 elements (128 PiB) cannot be allocated: RuntimeError naming the size
  check_throws_mentioning<RuntimeError>([] { zeros({int64_t{1} << 55}); }, "[alloc]");
  check_throws_mentioning<RuntimeError>([] { zeros({int64_t{1} << 61}, kFloat64); }, "[alloc]");
  check_throws_naming_op<ValueError>(
      [] {
        ones({1}).expand({int64_t{1} << 62, 4}).numel();
      },
      "numel");
}

TEST_CASE("empty tensors print their dtype unless float32, as PyTorch") {
  auto str = [](const Tensor& t) {
    std::ostringstream os;
    os << t;
    return os.str();
  };
  CHECK(str(zeros({0}, kInt64)) == "tensor([], dtype=td.int64)");
  CHECK(str(zeros({0}, kBool)) == "tensor([], dtype=td.bool)");
  CHECK(str(zeros({0}, kFloat64)) == "tensor([], dtype=td.float64)");
  CHECK(str(zeros({2, 0}, kFloat64)) == "tensor([], size=(2, 0), dtype=td.float64)");
  CHECK(str(zeros({0, 3})) == "tensor([], size=(0, 3))");
  CHECK(str(arange(2)) == "tensor([0, 1])");  // non-empty int64 still implied
}

TEST_CASE("full infers its dtype from the value's type, as torch.full") {
  CHECK(full({2}, 3).dtype() == kInt64);
  CHECK(full({2}, 3).to_vector<int64_t>() == std::vector<int64_t>{3, 3});
  CHECK(full({2}, 3.0).dtype() == kFloat32);
  CHECK(full({2}, true).dtype() == kBool);
  CHECK(full({2}, 3, kFloat64).dtype() == kFloat64);
  const int64_t big = (int64_t{1} << 60) + 1;  // not representable in a double
  CHECK(full({1}, big).item<int64_t>() == big);
  CHECK(full_like(arange(2), 1.5).dtype() == kInt64);  // like's dtype wins, as in PyTorch
  CHECK(full_like(arange(2), 1.5).to_vector<int64_t>() == std::vector<int64_t>{1, 1});
}

TEST_CASE("full and fill_ refuse a value their dtype cannot hold, as torch") {
  check_throws_mentioning<RuntimeError>([] { full({1}, 1e30, kInt64); },
                                        "[full] value 1e+30 cannot be converted to td.int64");
  CHECK_THROWS_AS(full({1}, std::nan(""), kInt64), RuntimeError);
  CHECK_THROWS_AS(full({1}, 9.3e18, kInt64), RuntimeError);
  check_throws_mentioning<RuntimeError>([] { full({1}, 1e300); }, "to td.float32");
  Tensor i = zeros({2}, kInt64);
  check_throws_mentioning<RuntimeError>([&] { i.fill_(1e30); }, "[fill_]");
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{0, 0});
  // what fits still converts: -9.2e18 (int64 from -2^63), infinity and 2^63 - 1 (float32)
  CHECK(full({1}, -9.2e18, kInt64).item<int64_t>() == -9200000000000000000);
  CHECK(std::isinf(full({1}, INFINITY).item<float>()));
  CHECK(full({1}, std::numeric_limits<int64_t>::max(), kFloat32).item<float>() == 0x1p63f);
  Tensor f = zeros({1});
  CHECK_THROWS_AS(f.fill_(-1e300), RuntimeError);  // float64 would hold it, float32 does not
  CHECK(f.item<float>() == 0.f);
  Tensor d = zeros({1}, kFloat64);
  d.fill_(-1e300);
  CHECK(d.item<double>() == -1e300);
}

TEST_CASE("unflatten of a 0-d tensor is an IndexError, as in PyTorch") {
  check_throws_naming_op<IndexError>([] { scalar_tensor(3.0).unflatten(0, {2, -1}); }, "unflatten");
  check_throws_naming_op<IndexError>([] { scalar_tensor(3.0).unflatten(0, {1}); }, "unflatten");
}

TEST_CASE("views with sizes whose product overflows int64 are errors, not UB") {
  const int64_t big = int64_t{1} << 62, huge = int64_t{1} << 40;
  check_throws_mentioning<ValueError>([&] { zeros({0}).view({big, big, 0}); }, "[view]");
  check_throws_mentioning<ValueError>([&] { zeros({4}).view({-1, huge, huge}); }, "[view]");
  check_throws_mentioning<ValueError>([&] { zeros({0}).reshape({big, big, 0}); }, "[reshape]");
  check_throws_mentioning<ValueError>([&] { zeros({4}).reshape({-1, huge, huge}); }, "[reshape]");
  check_throws_mentioning<ValueError>(
      [&] {
        ones({1, 1, 0}).expand({huge, huge, 0}).flatten(0, 1);
      },
      "[flatten]");
  CHECK(zeros({0}).view({0, big, big}).shape() == Shape{0, big, big});  // PyTorch's order rule
}

TEST_CASE("slice with a huge step and narrow with a huge length do not overflow") {
  const int64_t max = INT64_MAX;
  // Python's slice: [0:5:max] is one element (PyTorch 1.13 overflows to none)
  CHECK(arange(10).slice(0, 0, 5, max).to_vector<int64_t>() == std::vector<int64_t>{0});
  CHECK(arange(10).slice(0, 3, max, max).to_vector<int64_t>() == std::vector<int64_t>{3});
  CHECK(arange(10).slice(0, max, max, max).numel() == 0);
  CHECK(arange(10).slice(0, -max - 1, max, 4).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 4, 8});
  check_throws_naming_op<IndexError>([&] { arange(5).narrow(0, 2, max); }, "narrow");
  check_throws_naming_op<IndexError>([&] { arange(5).narrow(0, max, 1); }, "narrow");
  check_throws_naming_op<IndexError>([&] { arange(5).narrow(0, -2, max); }, "narrow");
  CHECK(arange(5).narrow(0, 2, 3).to_vector<int64_t>() == std::vector<int64_t>{2, 3, 4});
}

TEST_CASE("an undefined tensor where an op needs one is an error naming the op") {
  const Tensor u, x = randn({2, 3});
  // the dispatcher names the op and where the absent input was
  check_throws_mentioning<UndefinedTensorError>(
      [&] {
        cat({x, u});
      },
      "[cat] got an undefined tensor where it needs one (inputs: [2, 3], undefined)");
  check_throws_mentioning<RuntimeError>([&] { matmul(x, u); }, "[matmul] got an undefined");
  check_throws_mentioning<RuntimeError>([&] { max_pool2d(u, 2); }, "[max_pool2d]");
  check_throws_mentioning<RuntimeError>([&] { copy_(x, u); }, "[copy_]");
  check_throws_mentioning<RuntimeError>([&] { u.to(kFloat64); }, "[to] of an undefined tensor");
  check_throws_mentioning<RuntimeError>([&] { allclose(x, u); }, "[allclose] got an undefined");
  // an absent optional input is fine
  CHECK(linear(x, randn({4, 3}), Tensor()).shape() == Shape{2, 4});
}

// ASan's and TSan's shadow memory need more address space than this
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
TEST_CASE("running out of memory unwinds with an exception, also while tensors are freed") {
  // In a child process limited to its present address space plus 256 MiB: fill it with small
  // tensors until an allocation fails, then free them all while the exception unwinds. Freeing
  // put blocks on a free list whose growth could throw inside ~Storage (std::terminate).
  if (std::getenv("TD_UNDER_EMULATOR")) {
    // qemu-user accepts setrlimit(RLIMIT_AS) but does not apply it (it would limit qemu too):
    // the child would fill the host's memory instead
    MESSAGE("skipped under emulation: qemu-user ignores RLIMIT_AS");
    return;
  }
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlim_t limit = static_cast<rlim_t>(pages) * 4096 + (rlim_t{256} << 20);
    const rlimit r{limit, limit};
    if (setrlimit(RLIMIT_AS, &r) != 0) _exit(3);
    bool caught = false;
    try {
      std::vector<Tensor> keep;
      keep.reserve(1 << 20);
      for (;;) keep.push_back(zeros({16}));
    } catch (const std::exception&) {
      caught = true;
    }
    _exit(caught ? 0 : 4);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK_MESSAGE(WIFEXITED(status), "the child died of signal ", WTERMSIG(status));
  CHECK(WEXITSTATUS(status) == 0);
}
#endif
