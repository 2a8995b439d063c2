// Oracle test of every op's batching rule: vmap(f)(x) equals f applied to each set, with the
// batch dim first, last, absent (shared) and mixed across inputs, and under two nested levels.
// The checks are here, the cases (every op, its inputs and function) in vmap_oracle_cases.h.
#include <doctest/doctest.h>

#include <sstream>

#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "engine/engine.h"
#include "tests/vmap_oracle_cases.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {

constexpr int64_t kB = 3;

void check_close(const Tensor& got, const Tensor& want, Kind kind, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  CHECK(got.dtype() == want.dtype());
  auto g = got.to_vector<double>();
  auto w = want.to_vector<double>();
  for (size_t k = 0; k < g.size(); ++k) {
    if (kind == Kind::Float) {
      bool ok = std::abs(g[k] - w[k]) <= 1e-6 * std::abs(w[k]) + 1e-12 ||
                (std::isnan(g[k]) && std::isnan(w[k]));
      CHECK_MESSAGE(ok, "element ", k, ": ", g[k], " vs ", w[k]);
    } else {
      CHECK_MESSAGE((g[k] == w[k] || (std::isnan(g[k]) && std::isnan(w[k]))), "element ", k, ": ",
                    g[k], " vs ", w[k]);
    }
  }
}

Value call_f(const Fn& f, const ValueList& l) {
  Tensors ts;
  for (const auto& v : l) ts.push_back(v.tensor());
  return Value(f(ts));
}

Tensor run(const Fn& f, const Tensors& args, const std::vector<std::optional<int64_t>>& dims,
           Randomness r = Randomness::Error) {
  ValueList vl(args.begin(), args.end());
  VmapOptions o;
  o.in_dims = dims;
  o.randomness = r;
  return vmap_call([&](const ValueList& l) { return call_f(f, l); }, vl, o).tensor();
}

// placement of each input's batch dim: 0 = first, 1 = last, 2 = shared
void check_placement(const Case& c, const std::vector<int>& place) {
  size_t n = c.gen(0).size();
  Tensors args;
  std::vector<std::optional<int64_t>> dims;
  for (size_t k = 0; k < n; ++k) {
    if (place[k] == 2) {
      args.push_back(c.gen(0)[k]);
      dims.push_back(std::nullopt);
      continue;
    }
    Tensors per;
    for (int64_t i = 0; i < kB; ++i) per.push_back(c.gen(i)[k]);
    int64_t d = place[k] == 0 ? 0 : per[0].dim();
    args.push_back(stack(per, d));
    dims.push_back(place[k] == 0 ? 0 : -1);
  }
  std::ostringstream what_os;
  what_os << c.name << " placement";
  for (int p : place) what_os << ' ' << p;
  const std::string what = what_os.str();
  bool first_shared = place[0] == 2;
  if (c.kind == Kind::InPlace && first_shared) {
    // self unbatched, other batched: the in-place error
    INFO(what);
    CHECK_THROWS_AS(run(c.f, args, dims), RuntimeError);
    return;
  }
  Tensor got = run(c.f, args, dims);
  REQUIRE(got.size(0) == kB);
  for (int64_t i = 0; i < kB; ++i) {
    Tensors xi;
    for (size_t k = 0; k < n; ++k) xi.push_back(c.gen(place[k] == 2 ? 0 : i)[k]);
    check_close(got.select(0, i), c.f(xi), c.kind, what + " set " + std::to_string(i));
  }
}

// a batch of size 0: the output is empty with the per-set shape of f's output
void check_empty_batch(const Case& c) {
  Tensors per = c.gen(0);
  Tensors args;
  for (const auto& t : per) args.push_back(t.unsqueeze(0).narrow(0, 0, 0));
  Tensor got = run(c.f, args, std::vector<std::optional<int64_t>>(per.size(), 0));
  Shape want = c.f(per).shape();
  want.insert(want.begin(), 0);
  CHECK_MESSAGE(got.shape() == want, c.name, ": got ", shape_str(got.shape()), " want ",
                shape_str(want));
}

// two levels: outer B1 = 2, inner B2 = 3; with `inner_only_last`, the last input is batched only
// at the inner level (shared by the outer sets).
void check_nested(const Case& c, bool inner_only_last) {
  constexpr int64_t b1 = 2, b2 = 3;
  size_t n = c.gen(0).size();
  auto set_of = [&](size_t k, int64_t i, int64_t j) {
    return inner_only_last && k + 1 == n ? j : i * b2 + j;
  };
  Tensors args;
  std::vector<std::optional<int64_t>> outer_dims;
  for (size_t k = 0; k < n; ++k) {
    if (inner_only_last && k + 1 == n) {
      Tensors per;
      for (int64_t j = 0; j < b2; ++j) per.push_back(c.gen(j)[k]);
      args.push_back(stack(per, 0));
      outer_dims.push_back(std::nullopt);
      continue;
    }
    Tensors rows;
    for (int64_t i = 0; i < b1; ++i) {
      Tensors per;
      for (int64_t j = 0; j < b2; ++j) per.push_back(c.gen(i * b2 + j)[k]);
      rows.push_back(stack(per, 0));
    }
    args.push_back(stack(rows, 0));
    outer_dims.push_back(0);
  }
  ValueList vl(args.begin(), args.end());
  VmapOptions outer;
  outer.in_dims = outer_dims;
  Tensor got = vmap_call(
                   [&](const ValueList& l) {
                     return vmap_call([&](const ValueList& m) { return call_f(c.f, m); }, l, {});
                   },
                   vl, outer)
                   .tensor();
  REQUIRE(got.size(0) == b1);
  REQUIRE(got.size(1) == b2);
  for (int64_t i = 0; i < b1; ++i)
    for (int64_t j = 0; j < b2; ++j) {
      Tensors xij;
      for (size_t k = 0; k < n; ++k) xij.push_back(c.gen(set_of(k, i, j))[k]);
      check_close(got.select(0, i).select(0, j), c.f(xij), c.kind,
                  c.name + (inner_only_last ? " nested-mixed" : " nested") + " set " +
                      std::to_string(i) + "," + std::to_string(j));
    }
}

void check_random(const Case& c) {
  INFO(c.name);
  Tensors per;
  for (int64_t i = 0; i < kB; ++i) per.push_back(c.gen(i)[0]);
  Tensor x = stack(per, 0);
  CHECK_THROWS_AS(run(c.f, {x}, {0}, Randomness::Error), RuntimeError);
  Tensor same = run(c.f, {x}, {0}, Randomness::Same);
  Tensor diff = run(c.f, {x}, {0}, Randomness::Different);
  Tensor ref = c.f({per[0]});
  REQUIRE(same.shape()[0] == kB);
  REQUIRE(diff.shape()[0] == kB);
  for (int64_t i = 0; i < kB; ++i) {
    CHECK(same.select(0, i).shape() == ref.shape());
    CHECK(equal(same.select(0, i), same.select(0, 0)));
    for (int64_t j = 0; j < i; ++j) CHECK_FALSE(equal(diff.select(0, i), diff.select(0, j)));
  }
}

}  // namespace

TEST_CASE("vmap oracle: every op against a per-set loop") {
  auto cases = make_cases();
  std::map<int, int> count;
  for (const auto& c : cases) ++count[static_cast<int>(c.op)];
  for (int op = 0; op < static_cast<int>(OpId::kNumBuiltin); ++op)
    CHECK_MESSAGE(count[op] > 0, "op '", std::string(op_name(static_cast<OpId>(op))),
                  "' has no entry in the vmap oracle table");

  for (const auto& c : cases) {
    INFO("case ", c.name);
    try {
      if (c.kind == Kind::Random) {
        check_random(c);
        continue;
      }
      size_t n = c.gen(0).size();
      check_placement(c, std::vector<int>(n, 0));  // all first
      check_placement(c, std::vector<int>(n, 1));  // all last
      for (size_t k = 0; k < n && n > 1; ++k) {    // each input shared in turn
        std::vector<int> p(n, 0);
        p[k] = 2;
        check_placement(c, p);
      }
      for (size_t k = 0; k < n && n > 1; ++k) {  // only input k batched
        std::vector<int> p(n, 2);
        p[k] = 1;
        check_placement(c, p);
      }
      if (n > 1) {  // mixed: alternate first / last (and shared for a third input)
        std::vector<int> p(n);
        for (size_t k = 0; k < n; ++k) p[k] = static_cast<int>(k % 3 == 2 ? 2 : k % 2);
        check_placement(c, p);
      }
      check_nested(c, false);
      if (n > 1) check_nested(c, true);
      check_empty_batch(c);
    } catch (const std::exception& e) {
      std::string msg = "case " + c.name + " threw: " + e.what();
      FAIL_CHECK(msg);
    }
  }
}

TEST_CASE("vmap oracle: every built-in op has a native rule and never falls back") {
  ensure_batch_rules();
  for (int op = 0; op < static_cast<int>(OpId::kNumBuiltin); ++op) {
    OpId id = static_cast<OpId>(op);
    INFO(op_name(id));
    bool has_rule = batch_rule(id) != nullptr;
    CHECK(has_rule);
    CHECK(fallback_count(id) == 0);
  }
}
