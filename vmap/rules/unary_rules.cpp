// Element-wise unary ops (and clamp, to_dtype): the op runs on the physical tensor, bdim kept.
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// B* -> B* (same bdim)
std::vector<Batched> unary_rule(const RuleContext& ctx, std::span<const Batched> in,
                                const OpAttrs& attrs) {
  try {
    return one(call_op(ctx.op, {&in[0].value, 1}, attrs)[0], in[0].bdim);
  } catch (const std::logic_error&) {  // a dtype the op refuses: the message names a set's shape
    rethrow_per_set(ctx, in, attrs);
  } catch (const RuntimeError&) {
    rethrow_per_set(ctx, in, attrs);
  }
}

}  // namespace

void register_unary_rules() {
  for (OpId op :
       {OpId::neg,         OpId::abs,         OpId::exp,     OpId::log,        OpId::sqrt,
        OpId::rsqrt,       OpId::tanh,        OpId::sigmoid, OpId::relu,       OpId::gelu,
        OpId::logical_not, OpId::bitwise_not, OpId::clamp,   OpId::to_dtype,   OpId::sin,
        OpId::cos,         OpId::log1p,       OpId::expm1,   OpId::reciprocal, OpId::floor,
        OpId::ceil,        OpId::round,       OpId::sign})
    set_batch_rule(op, unary_rule);
}

}  // namespace td::rules
