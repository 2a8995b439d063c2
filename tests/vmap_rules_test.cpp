// The rule helpers (functorch's moveBatchDimToFront, reshape_dim_into/outof, ...) and the rule
// table registration.
#include <doctest/doctest.h>

#include "engine/engine.h"
#include "vmap/rules/rule_helpers.h"
#include "vmap/rules/rules.h"

using namespace td;
using namespace td::rules;

TEST_CASE("rule helpers: moving, folding and padding the batch dim") {
  Tensor x = arange(24).view({2, 3, 4});  // bdim 1 (B = 3)
  Batched b{x, 1};
  CHECK(logical_rank(b) == 2);
  CHECK(per_set_shape(b) == Shape{2, 4});
  Tensor f = move_bdim_to_front(b);
  REQUIRE(f.shape() == Shape{3, 2, 4});
  CHECK(f.shares_storage(x));
  CHECK(f.select(0, 2).select(0, 1).select(0, 3).item<int64_t>() == 1 * 12 + 2 * 4 + 3);
  // an unbatched value expands to the batch size without copying
  Tensor e = ensure_has_bdim({arange(4), std::nullopt}, 5);
  CHECK(e.shape() == Shape{5, 4});
  CHECK(e.strides()[0] == 0);
  // [B, N, C] -> [N, B*C] and back
  Tensor folded = fold_bdim_into(f, 1);  // into per-set dim 1 (size 4)
  REQUIRE(folded.shape() == Shape{2, 12});
  // folded[n][b * 4 + c] = f[b][n][c] = x[n][b][c]
  CHECK(folded.select(0, 1).select(0, 2 * 4 + 3).item<int64_t>() == 1 * 12 + 2 * 4 + 3);
  Tensor back = unfold_bdim_from(folded, 1, 3);
  CHECK(equal(back, f));
  // padding inserts unit dims after the batch dim (or in front when unbatched)
  CHECK(pad_to_logical_rank(f, true, 4).shape() == Shape{3, 1, 1, 2, 4});
  CHECK(pad_to_logical_rank(arange(4), false, 3).shape() == Shape{1, 1, 4});
  CHECK(movedim(x, 0, 2).shape() == Shape{3, 4, 2});
  CHECK(wrap_dim("op", -1, 0) == 0);
  CHECK_THROWS_AS(wrap_dim("op", 1, 0), IndexError);
  CHECK(wrap_dim("op", -1, 3) == 2);
}

TEST_CASE("rule helpers: offset indices check the range") {
  std::vector<int64_t> bad;
  auto raise = [&](int64_t v) {
    bad.push_back(v);
    throw IndexError("out of range");
  };
  Tensor idx = tensor<int64_t>({0, 2, 1, 1}, {2, 2});
  Tensor off = offset_indices("embedding", idx, 3, raise);
  CHECK(off.to_vector<int64_t>() == std::vector<int64_t>{0, 2, 4, 4});
  CHECK(bad.empty());
  CHECK_THROWS_AS(offset_indices("embedding", tensor<int64_t>({0, 3}, {2, 1}), 3, raise),
                  IndexError);
  CHECK_THROWS_AS(offset_indices("embedding", tensor<int64_t>({-1, 0}, {2, 1}), 3, raise),
                  IndexError);
  CHECK(bad == std::vector<int64_t>{3, -1});
}

TEST_CASE("rules: ensure_batch_rules fills every built-in slot and is idempotent") {
  ensure_batch_rules();
  ensure_batch_rules();
  for (int op = 0; op < static_cast<int>(OpId::kNumBuiltin); ++op) {
    bool has = batch_rule(static_cast<OpId>(op)) != nullptr;
    CHECK_MESSAGE(has, op_name(static_cast<OpId>(op)));
  }
}
