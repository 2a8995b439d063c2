// Work whose size an input decides is checked against the memory budget before it starts: a loop
// or chunks over 10^9 sets are refused at once, as RuntimeErrors naming the budget.
#include <doctest/doctest.h>

#include <string>

#include "engine/engine.h"
#include "engine/limits.h"
#include "modules/modules.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {
// A Linear(0, 0) ensemble of `sets` sets: every tensor is empty, whatever the number of sets.
TensorDict empty_sets(int64_t sets) {
  TensorDict p({sets});
  p.set("weight", zeros({sets, 0, 0}));
  p.set("bias", zeros({sets, 0}));
  return p;
}
}  // namespace

TEST_CASE("memory budget: 10^9 sets in a loop or in chunks of one are refused up front") {
  // these grew without bound (loop) or ended in std::bad_alloc after 2 GB (chunk_size 1)
  nn::Linear lin(0, 0);
  const TensorDict params = empty_sets(1'000'000'000);
  const Tensor x = zeros({3, 0});
  check_throws_mentioning<RuntimeError>(
      [&] { nn::functional_vmap(lin, {.params = params, .args = {x}, .loop = true}); },
      "[functional_vmap] 1000000000 sets run one at a time (loop=true) need at least "
      "512000000000 bytes, beyond the memory budget");
  check_throws_mentioning<RuntimeError>(
      [&] { nn::functional_vmap(lin, {.params = params, .args = {x}, .chunk_size = 1}); },
      "[vmap] 1000000000 chunks of sets need at least");
  // the budget is configurable: a small one refuses a thousand sets, the default takes them
  const TensorDict thousand = empty_sets(1000);
  set_memory_budget(100'000);
  CHECK(memory_budget() == 100'000);
  check_throws_mentioning<RuntimeError>(
      [&] { nn::functional_vmap(lin, {.params = thousand, .args = {x}, .loop = true}); },
      "beyond the memory budget of 100000 bytes");
  set_memory_budget(0);
  CHECK(memory_budget() > 100'000);
  const Value y = nn::functional_vmap(lin, {.params = thousand, .args = {x}, .loop = true});
  CHECK(y.tensor().shape() == Shape{1000, 3, 0});
  const Value z = nn::functional_vmap(lin, {.params = thousand, .args = {x}, .chunk_size = 7});
  CHECK(z.tensor().shape() == Shape{1000, 3, 0});
}

TEST_CASE("memory budget: the check counts overflow as beyond the budget") {
  check_throws_mentioning<RuntimeError>(
      [] { check_memory_budget("op", int64_t{1} << 40, int64_t{1} << 40, "things"); },
      "[op] 1099511627776 things need at least more than 2^63 bytes");
  check_throws_mentioning<RuntimeError>([] { check_memory_budget("op", -1, 8, "things"); },
                                        "[op] -1 things");
  CHECK_NOTHROW(check_memory_budget("op", 1000, 1000, "things"));
}
