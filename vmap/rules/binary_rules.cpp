// Broadcasting binary ops and where: batched operands get the bdim in front and are padded to
// the largest per-set rank so that NumPy broadcasting lines the per-set dims up.
#include <algorithm>

#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// B*, * -> B* ; Ba, Bb -> B(broadcast)
std::vector<Batched> broadcast_rule(const RuleContext& ctx, std::span<const Batched> in,
                                    const OpAttrs& attrs) {
  int64_t rank = 0;
  for (const auto& b : in) rank = std::max(rank, logical_rank(b));
  std::vector<Tensor> args;
  for (const auto& b : in) args.push_back(b.bdim ? front_and_pad(b, rank) : b.value);
  try {
    return one(call_op(ctx.op, args, attrs)[0], 0);
  } catch (const ValueError&) {
    // the stacked shapes broadcast exactly when the per-set ones do: name those (where folds
    // its three as its unbatched call does)
    Shape s = per_set_shape(in[0]);
    for (size_t i = 1; i < in.size(); ++i)
      s = broadcast_shapes(op_name(ctx.op), s, per_set_shape(in[i]), "per-set shapes");
    rethrow_per_set(ctx, in, attrs);
  } catch (const std::logic_error&) {  // a dtype the op refuses: the message names a set's shapes
    rethrow_per_set(ctx, in, attrs);
  } catch (const RuntimeError&) {  // an integer division by zero: names the set's divisor
    rethrow_per_set(ctx, in, attrs);
  }
}

}  // namespace

void register_binary_rules() {
  for (OpId op :
       {OpId::add,         OpId::sub,        OpId::mul,         OpId::div,        OpId::pow,
        OpId::maximum,     OpId::minimum,    OpId::remainder,   OpId::fmod,       OpId::eq,
        OpId::ne,          OpId::lt,         OpId::le,          OpId::gt,         OpId::ge,
        OpId::logical_and, OpId::logical_or, OpId::bitwise_and, OpId::bitwise_or, OpId::bitwise_xor,
        OpId::where})
    set_batch_rule(op, broadcast_rule);
}

}  // namespace td::rules
