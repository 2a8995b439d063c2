// Broadcasting binary ops, where and the recurrent point-wise ops: batched operands get the bdim in
// front and are padded to the largest per-set rank so that NumPy broadcasting lines the per-set
// dims up.
#include <algorithm>

#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// B*, * -> B* ; Ba, Bb -> B(broadcast), for each output
std::vector<Batched> broadcast_rule(const RuleContext& ctx, std::span<const Batched> in,
                                    const OpAttrs& attrs) {
  int64_t rank = 0;
  for (const auto& b : in) rank = std::max(rank, logical_rank(b));
  std::vector<Tensor> args;
  for (const auto& b : in) args.push_back(b.bdim ? front_and_pad(b, rank) : b.value);
  std::vector<Batched> out;
  for (Tensor& t : call_op(ctx.op, args, attrs)) out.push_back({std::move(t), 0});
  return out;
}

}  // namespace

void register_binary_rules() {
  set_family_rule(OpFamily::Binary, broadcast_rule);
  set_family_rule(OpFamily::Ternary, broadcast_rule);
  // the recurrent steps' point-wise ops broadcast their leading dims as binary ops do
  set_family_rule(OpFamily::Rnn, broadcast_rule);
}

}  // namespace td::rules
