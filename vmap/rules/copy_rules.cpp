// contiguous and clone: the bdim goes in front first so each set's slice is contiguous.
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// B* -> B* (contiguous)
std::vector<Batched> copy_rule(const RuleContext& ctx, std::span<const Batched> in,
                               const OpAttrs& attrs) {
  Tensor x = move_bdim_to_front(in[0]);
  return one(call_op(ctx.op, {&x, 1}, attrs)[0], 0);
}

}  // namespace

void register_copy_rules() { set_family_rule(OpFamily::Copy, copy_rule); }

}  // namespace td::rules
