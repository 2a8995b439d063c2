// Element-wise unary ops (and clamp, to_dtype): the op runs on the physical tensor, bdim kept.
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// B* -> B* (same bdim)
std::vector<Batched> unary_rule(const RuleContext& ctx, std::span<const Batched> in,
                                const OpAttrs& attrs) {
  return one(call_op(ctx.op, {&in[0].value, 1}, attrs)[0], in[0].bdim);
}

}  // namespace

void register_unary_rules() { set_family_rule(OpFamily::Unary, unary_rule); }

}  // namespace td::rules
