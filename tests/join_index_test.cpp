// cat, stack, split, chunk, index_select and gather: hand values, naive loops, views vs copies,
// dtype promotion, negative dims, empty tensors and every error path.
#include <doctest/doctest.h>

#include <string>

#include "engine/engine.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {


std::vector<int64_t> iv(const Tensor& t) { return t.to_vector<int64_t>(); }

}  // namespace

TEST_CASE("cat: hand values, negative dims, promotion, non-contiguous inputs") {
  Tensor a = arange(6).view({2, 3});
  Tensor b = arange(6, 8).view({2, 1});
  Tensor c = cat({a, b}, 1);
  CHECK(c.shape() == Shape{2, 4});
  CHECK(iv(c) == std::vector<int64_t>{0, 1, 2, 6, 3, 4, 5, 7});
  CHECK(iv(cat({a, b}, -1)) == iv(c));
  Tensor r = cat({a, a.slice(0, 1, 2)});
  CHECK(r.shape() == Shape{3, 3});
  CHECK(iv(r) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 3, 4, 5});
  // Transposed input and an expanded one.
  Tensor t = cat({a.t(), tensor<int64_t>({9, 8}).view({1, 2}).expand({2, 2})}, 0);
  CHECK(t.shape() == Shape{5, 2});
  CHECK(iv(t) == std::vector<int64_t>{0, 3, 1, 4, 2, 5, 9, 8, 9, 8});
  // Promotion int64 + float32 -> float32, + float64 -> float64.
  Tensor f = cat({tensor<int64_t>({1, 2}), tensor({0.5f})});
  CHECK(f.dtype() == kFloat32);
  CHECK(f.to_vector<float>() == std::vector<float>{1.f, 2.f, 0.5f});
  CHECK(cat({tensor({1.f}), tensor<double>({2.0})}).dtype() == kFloat64);
  // Empty pieces.
  Tensor e = cat({zeros({0, 3}), ones({2, 3}), zeros({0, 3})});
  CHECK(e.shape() == Shape{2, 3});
  CHECK(cat({zeros({2, 0}), zeros({2, 0})}, 1).shape() == Shape{2, 0});
  // The result is a copy.
  Tensor one = ones({2});
  Tensor single = cat({one});
  CHECK(!single.shares_storage(one));
}

TEST_CASE("cat errors") {
  CHECK_THROWS_AS(cat({}), ValueError);
  check_throws_mentioning<ValueError>([] { cat({ones({2, 3}), ones({2, 4})}, 0); }, "[cat]");
  check_throws_mentioning<ValueError>([] { cat({ones({2, 3}), ones({2, 4})}, 0); }, "index 1");
  check_throws_mentioning<ValueError>([] { cat({ones({2, 3}), ones({2, 4})}, 0); }, "[2, 4]");
  CHECK_THROWS_AS(cat({ones({2, 3}), ones({3})}), ValueError);
  CHECK_THROWS_AS(cat({scalar_tensor(1.0), scalar_tensor(2.0)}), ValueError);
  CHECK_THROWS_AS(cat({ones({2, 3})}, 2), IndexError);
}

TEST_CASE("cat skips 1-D empty tensors, as torch's legacy rule") {
  Tensor a = arange(6).view({2, 3});
  Tensor e = zeros({0}, kInt64);
  // [0] joins any shape, anywhere in the list, and the dim is wrapped by the first other tensor
  for (const auto& parts : {std::vector<Tensor>{e, a}, std::vector<Tensor>{a, e}}) {
    CHECK(iv(cat(parts, 1)) == iv(a));
    CHECK(cat(parts, -2).shape() == Shape{2, 3});
  }
  Tensor c = cat({a, e, arange(6, 8).view({2, 1})}, 1);
  CHECK(iv(c) == std::vector<int64_t>{0, 1, 2, 6, 3, 4, 5, 7});
  CHECK(cat({e, a}, 1).dtype() == kInt64);
  // its dtype still counts
  Tensor f = cat({a, zeros({0}, kFloat64)}, 0);
  CHECK(f.dtype() == kFloat64);
  CHECK(f.to_vector<double>() == std::vector<double>{0, 1, 2, 3, 4, 5});
  // all skipped: [0], any dim (torch.cat([torch.empty(0)], dim=5) is [0])
  CHECK(cat({e, e}, 5).shape() == Shape{0});
  CHECK(cat({e, zeros({0}, kFloat32)}, 0).dtype() == kFloat32);
  // the dim is still checked against the others, and a 0-d tensor anywhere is refused
  check_throws_naming_op<IndexError>([&] { cat({e, a}, 2); }, "cat");
  check_throws_mentioning<ValueError>([&] { cat({e, scalar_tensor(1.0)}); }, "index 1");
  // a [0, 3] is not skipped
  CHECK_THROWS_AS(cat({zeros({0, 3}), ones({2, 2})}, 0), ValueError);
  // under vmap: a per-set [0] (shared or per set) is skipped the same way
  auto join = [](Tensor x, Tensor y) { return cat({x, y}, -1); };
  Tensor xs = arange(12).view({2, 2, 3});
  Tensor v = vmap(join, {.in_dims = {0, std::nullopt}})(xs, zeros({0}, kFloat32));
  CHECK(v.shape() == Shape{2, 2, 3});
  CHECK(v.dtype() == kFloat32);
  CHECK(v.to_vector<float>() == xs.to(kFloat32).to_vector<float>());
  CHECK(iv(vmap(join)(zeros({2, 0}, kInt64), xs)) == iv(xs));
  CHECK(vmap(join)(zeros({2, 0}, kInt64), zeros({2, 0}, kInt64)).shape() == Shape{2, 0});
}

TEST_CASE("stack") {
  Tensor a = tensor({1.f, 2.f}), b = tensor({3.f, 4.f});
  Tensor s0 = stack({a, b});
  CHECK(s0.shape() == Shape{2, 2});
  CHECK(s0.to_vector<float>() == std::vector<float>{1.f, 2.f, 3.f, 4.f});
  Tensor s1 = stack({a, b}, 1);
  CHECK(s1.to_vector<float>() == std::vector<float>{1.f, 3.f, 2.f, 4.f});
  CHECK(stack({a, b}, -1).to_vector<float>() == s1.to_vector<float>());
  Tensor sc = stack({scalar_tensor(1.0), scalar_tensor(2.0)});
  CHECK(sc.shape() == Shape{2});
  Tensor m = arange(6).view({2, 3});
  Tensor st = stack({m, m.t().t(), m.slice(1, 0, std::nullopt, 1)}, 2);
  CHECK(st.shape() == Shape{2, 3, 3});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(iv(st[i][j]) == std::vector<int64_t>(3, i * 3 + j));
  CHECK(stack({zeros({0}), zeros({0})}).shape() == Shape{2, 0});
  CHECK_THROWS_AS(stack({}), ValueError);
  check_throws_mentioning<ValueError>([] { stack({ones({2}), ones({3})}); }, "[stack]");
  check_throws_mentioning<ValueError>([] { stack({ones({2}), ones({3})}); }, "[3]");
  CHECK_THROWS_AS(stack({ones({2})}, 3), IndexError);
}

TEST_CASE("split and chunk return views with PyTorch's sizes") {
  Tensor x = arange(10).view({5, 2});
  auto parts = split(x, 2);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].shape() == Shape{2, 2});
  CHECK(parts[2].shape() == Shape{1, 2});
  CHECK(iv(parts[2]) == std::vector<int64_t>{8, 9});
  for (auto& p : parts) CHECK(p.shares_storage(x));
  // Writing through a piece changes x.
  parts[1].fill_(-1);
  CHECK(iv(x)[4] == -1);

  auto cols = split(x, IntList{1, 1}, -1);
  REQUIRE(cols.size() == 2);
  CHECK(iv(cols[1]) == std::vector<int64_t>{1, 3, -1, -1, 9});  // rows 2-3 were filled
  // braces are sections, as torch.split(x, [2]): one section of the whole dim
  auto whole = split(arange(2), {2});
  REQUIRE(whole.size() == 1);
  CHECK(whole[0].to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  CHECK(split(arange(5), {2, 3}, -1).size() == 2);
  auto uneven = split(arange(6), IntList{1, 0, 5});
  CHECK(uneven[1].shape() == Shape{0});
  CHECK(iv(uneven[2]) == std::vector<int64_t>{1, 2, 3, 4, 5});
  CHECK(split(zeros({0}), 2).size() == 1);

  // chunk: ceil(5 / 3) = 2 -> sizes 2, 2, 1; ceil(6 / 4) = 2 -> 3 chunks.
  auto c = chunk(arange(5), 3);
  REQUIRE(c.size() == 3);
  CHECK(c[2].shape() == Shape{1});
  CHECK(chunk(arange(6), 4).size() == 3);
  CHECK(chunk(zeros({0}), 3).size() == 3);
  auto cc = chunk(x, 2, 1);
  CHECK(cc.size() == 2);
  CHECK(cc[0].shape() == Shape{5, 1});
}

TEST_CASE("split and chunk errors") {
  check_throws_mentioning<ValueError>([] { split(arange(5), IntList{2, 2}); }, "[split]");
  CHECK_THROWS_AS(split(arange(5), IntList{6, -1}), ValueError);
  check_throws_mentioning<ValueError>([] { split(arange(5), {2}); }, "sum to 2");
  CHECK_THROWS_AS(split(arange(5), 0), ValueError);
  CHECK_THROWS_AS(split(arange(5), -1), ValueError);
  CHECK_THROWS_AS(split(scalar_tensor(1.0), 1), ValueError);
  CHECK_THROWS_AS(split(arange(5), 1, 1), IndexError);
  check_throws_mentioning<ValueError>([] { chunk(arange(5), 0); }, "[chunk]");
  CHECK_THROWS_AS(chunk(scalar_tensor(1.0), 2), ValueError);
}

TEST_CASE("index_select") {
  Tensor x = arange(12).view({3, 4});
  Tensor idx = tensor<int64_t>({2, 0, 2});
  Tensor r = index_select(x, 0, idx);
  CHECK(r.shape() == Shape{3, 4});
  CHECK(iv(r) == std::vector<int64_t>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11});
  Tensor c = index_select(x, -1, tensor<int64_t>({3, 1}));
  CHECK(c.shape() == Shape{3, 2});
  CHECK(iv(c) == std::vector<int64_t>{3, 1, 7, 5, 11, 9});
  // Non-contiguous input and index; float values; empty index.
  Tensor xt = x.t().to(kFloat32);  // [4, 3]
  Tensor si = tensor<int64_t>({1, 7, 3, 7}).slice(0, 0, std::nullopt, 2);
  Tensor rt = index_select(xt, 0, si);
  CHECK(rt.to_vector<float>() == std::vector<float>{1.f, 5.f, 9.f, 3.f, 7.f, 11.f});
  CHECK(index_select(x, 1, tensor<int64_t>({}, {0})).shape() == Shape{3, 0});
  // Naive loop on a 3-D tensor along the middle dim.
  Tensor y = arange(24).view({2, 3, 4}).permute({2, 0, 1});  // [4, 2, 3]
  Tensor yi = index_select(y, 2, tensor<int64_t>({2, 2, 0, 1}));
  auto yv = iv(y), got = iv(yi);
  std::vector<int64_t> ids{2, 2, 0, 1};
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t k = 0; k < 4; ++k)
        CHECK(got[(a * 2 + b) * 4 + k] == yv[(a * 2 + b) * 3 + ids[k]]);
}

TEST_CASE("index_select errors") {
  Tensor x = arange(12).view({3, 4});
  check_throws_mentioning<IndexError>([&] { index_select(x, 0, tensor<int64_t>({3})); }, "index 3");
  check_throws_mentioning<IndexError>([&] { index_select(x, 0, tensor<int64_t>({3})); }, "size 3");
  CHECK_THROWS_AS(index_select(x, 1, tensor<int64_t>({-1})), IndexError);
  CHECK_THROWS_AS(index_select(x, 2, tensor<int64_t>({0})), IndexError);
  check_throws_mentioning<TypeError>([&] { index_select(x, 0, tensor({0.f})); }, "[index_select]");
  CHECK_THROWS_AS(index_select(x, 0, tensor<int64_t>({0, 1}, {1, 2})), ValueError);
}

TEST_CASE("index_select and gather on a 0-d input: dim 0 or -1 of size 1, as torch") {
  Tensor s = scalar_tensor(5.0);
  Tensor y = index_select(s, 0, tensor<int64_t>({0}));
  CHECK(y.shape() == Shape{});
  CHECK(y.item<float>() == 5.f);
  CHECK_FALSE(y.shares_storage(s));
  CHECK(index_select(s, -1, full({}, int64_t{0})).item<float>() == 5.f);
  CHECK_THROWS_AS(index_select(s, 1, tensor<int64_t>({0})), IndexError);
  check_throws_mentioning<IndexError>([&] { index_select(s, 0, tensor<int64_t>({1})); }, "index 1");
  // one value, one index: torch 1.13 wrote past the 0-d result for more (newer torch raises);
  // td gave a 0-d copy of s for any count, none included
  for (int64_t n : {0, 2, 3}) {
    const Tensor idx = zeros({n}, kInt64);
    check_throws_mentioning<IndexError>([&] { index_select(s, 0, idx); },
                                        "[index_select] a 0-d input takes exactly one index");
    check_throws_mentioning<IndexError>([&] { index_select(s, 0, idx); },
                                        "index of shape [" + std::to_string(n) + "]");
    // under vmap too, with the index shared or per set
    auto pick = [](Tensor t, Tensor i) { return index_select(t, 0, i); };
    CHECK_THROWS_AS(vmap(pick, {.in_dims = {0, std::nullopt}})(randn({2}), idx), IndexError);
    CHECK_THROWS_AS(vmap(pick)(randn({2}), zeros({2, n}, kInt64)), IndexError);
  }
  auto pick = [](Tensor t, Tensor i) { return index_select(t, 0, i); };
  Tensor xs = tensor({4.f, 6.f});
  CHECK(vmap(pick)(xs, zeros({2, 1}, kInt64)).to_vector<float>() == std::vector<float>{4.f, 6.f});
  CHECK(gather(s, -1, full({}, int64_t{0})).item<float>() == 5.f);
  check_throws_mentioning<IndexError>([&] { gather(s, 1000000, full({}, int64_t{0})); },
                                      "[gather]");
  CHECK_THROWS_AS(gather(s, 0, full({}, int64_t{1})), IndexError);
}

TEST_CASE("a dim out of range for a 0-d input says 0 dims, with the range torch takes") {
  const Tensor s = scalar_tensor(5.0);
  const std::string range = "out of range for a tensor of 0 dims (expected -1 <= dim < 1)";
  check_throws_mentioning<IndexError>([&] { index_select(s, 2, tensor<int64_t>({0})); },
                                      "[index_select] dim 2 " + range);
  check_throws_mentioning<IndexError>([&] { gather(s, 2, full({}, int64_t{0})); },
                                      "[gather] dim 2 " + range);
  check_throws_mentioning<IndexError>([&] { gather(s, -2, zeros({3}, kInt64)); },
                                      "[gather] dim -2 " + range);
  check_throws_mentioning<IndexError>([&] { s.flatten(1); }, "[flatten] dim 1 " + range);
  check_throws_mentioning<IndexError>([&] { softmax(s, 1); }, "[softmax] dim 1 " + range);
  check_throws_mentioning<IndexError>([&] { log_softmax(s, -2); }, "[log_softmax] dim -2 " + range);
  check_throws_mentioning<IndexError>([&] { s.sum(1); }, "[sum] dim 1 " + range);
  check_throws_mentioning<IndexError>([&] { s.amax(-2); }, "dim -2 " + range);
  CHECK(s.sum(-1).item<float>() == 5.f);  // the dims torch takes still work
  CHECK(softmax(s, 0).item<float>() == 1.f);
}

TEST_CASE("gather takes a 0-d input or index as 1-D of size 1, as torch") {
  Tensor s = scalar_tensor(5.0);
  Tensor x = tensor({3.f, 4.f, 5.f});
  // torch.gather(tensor(5.), 0, tensor([0, 0, 0])) = [5, 5, 5]; it was a ValueError
  Tensor g = gather(s, 0, zeros({3}, kInt64));
  CHECK(g.shape() == Shape{3});
  CHECK(g.to_vector<float>() == std::vector<float>{5.f, 5.f, 5.f});
  CHECK(gather(s, -1, zeros({0}, kInt64)).shape() == Shape{0});
  // torch.gather(tensor([3., 4., 5.]), 0, tensor(2)) = tensor(5.)
  Tensor g0 = gather(x, 0, full({}, int64_t{2}));
  CHECK(g0.shape() == Shape{});
  CHECK(g0.item<float>() == 5.f);
  CHECK_THROWS_AS(gather(x, 0, full({}, int64_t{3})), IndexError);
  CHECK_THROWS_AS(gather(s, 0, tensor<int64_t>({0, 1})), IndexError);
  CHECK_THROWS_AS(gather(s, 1, zeros({2}, kInt64)), IndexError);
  // more dims than 1 still have to match
  check_throws_mentioning<ValueError>(
      [&] {
        gather(s, 0, zeros({2, 1}, kInt64));
      },
      "index of shape [2, 1]");
  CHECK_THROWS_AS(gather(ones({2, 1}), 0, full({}, int64_t{0})), ValueError);
  // under vmap, with either side per set or shared
  auto pick = [](Tensor t, Tensor i) { return gather(t, 0, i); };
  Tensor xs = tensor({1.f, 2.f});  // two per-set 0-d inputs
  Tensor v = vmap(pick, {.in_dims = {0, std::nullopt}})(xs, zeros({3}, kInt64));
  CHECK(v.shape() == Shape{2, 3});
  CHECK(v.to_vector<float>() == std::vector<float>{1, 1, 1, 2, 2, 2});
  Tensor rows = tensor({3.f, 4.f, 5.f, 6.f, 7.f, 8.f}, {2, 3});
  Tensor w = vmap(pick)(rows, tensor<int64_t>({2, 0}));  // per-set 0-d index
  CHECK(w.shape() == Shape{2});
  CHECK(w.to_vector<float>() == std::vector<float>{5.f, 6.f});
  check_throws_mentioning<ValueError>(
      [&] {
        vmap(pick)(xs, zeros({2, 2, 1}, kInt64));
      },
      "per-set shape [2, 1]");
}

TEST_CASE("gather") {
  // PyTorch docs: gather([[1, 2], [3, 4]], 1, [[0, 0], [1, 0]]) = [[1, 1], [4, 3]]
  Tensor t = tensor({1.f, 2.f, 3.f, 4.f}, {2, 2});
  Tensor g = gather(t, 1, tensor<int64_t>({0, 0, 1, 0}, {2, 2}));
  CHECK(g.to_vector<float>() == std::vector<float>{1.f, 1.f, 4.f, 3.f});
  Tensor g0 = gather(t, 0, tensor<int64_t>({1, 0}, {1, 2}));
  CHECK(g0.shape() == Shape{1, 2});
  CHECK(g0.to_vector<float>() == std::vector<float>{3.f, 2.f});
  // Naive loop, 3-D, non-contiguous x, index smaller than x on the other dims.
  Tensor x = arange(60).view({3, 4, 5}).transpose(0, 2);  // [5, 4, 3]
  std::vector<int64_t> idv;
  for (int i = 0; i < 2 * 4 * 2; ++i) idv.push_back((i * 7) % 4);
  Tensor idx = tensor<int64_t>(idv, {2, 4, 2});
  Tensor r = gather(x, -2, idx);
  CHECK(r.shape() == Shape{2, 4, 2});
  auto xv = iv(x), rv = iv(r);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 2; ++k)
        CHECK(rv[(i * 4 + j) * 2 + k] == xv[(i * 4 + idv[(i * 4 + j) * 2 + k]) * 3 + k]);
  CHECK(gather(t, 0, tensor<int64_t>({}, {0, 2})).shape() == Shape{0, 2});
}

TEST_CASE("gather errors") {
  Tensor t = ones({2, 2});
  check_throws_mentioning<IndexError>(
      [&] {
        gather(t, 1, tensor<int64_t>({0, 2}, {1, 2}));
      },
      "index 2");
  CHECK_THROWS_AS(gather(t, 0, tensor<int64_t>({-1}, {1, 1})), IndexError);
  check_throws_mentioning<ValueError>([&] { gather(t, 0, tensor<int64_t>({0, 0})); }, "[gather]");
  CHECK_THROWS_AS(gather(t, 0, zeros({3, 3}, kInt64)), ValueError);
  CHECK_THROWS_AS(gather(t, 0, zeros({1, 1})), TypeError);
  CHECK_THROWS_AS(gather(t, 2, zeros({1, 1}, kInt64)), IndexError);
}

TEST_CASE("chunk and split with huge counts and sizes do not overflow") {
  const int64_t max = INT64_MAX;
  auto pieces = chunk(arange(10), max);  // ceil(10 / max) = 1 per piece, as torch.chunk's rule
  REQUIRE(pieces.size() == 10);
  CHECK(pieces[9].to_vector<int64_t>() == std::vector<int64_t>{9});
  CHECK(split(arange(10), max).size() == 1);
  check_throws_naming_op<ValueError>([&] { split(arange(10), IntList{max, 11}); }, "split");
  CHECK(chunk(zeros({0}), 3).size() == 3);  // an empty dim gives `chunks` empty pieces
  check_throws_naming_op<RuntimeError>([] { chunk(zeros({0}), int64_t{1} << 40); }, "chunk");
}
