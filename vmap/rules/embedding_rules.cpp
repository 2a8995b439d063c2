// embedding(indices, weight).
#include "engine/ops.h"
#include "engine/ops/checks.h"
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// B*, ED -> B*D (bdim kept) ; (B)*, BED -> B* + arange(B)*E into (BE)D -> B*D
std::vector<Batched> embedding_rule(const RuleContext& ctx, std::span<const Batched> in,
                                    const OpAttrs&) {
  const Batched& idx = in[0];
  const Batched& w = in[1];
  if (!w.bdim) return one(embedding(idx.value, w.value), idx.bdim);
  if (logical_rank(w) != 2)
    throw_error<ValueError>("[embedding] expected a 2-D weight, got per-set shape ",
                            shape_str(per_set_shape(w)));
  int64_t bsz = ctx.batch_size;
  Tensor wf = move_bdim_to_front(w);  // [B, E, D]
  int64_t e = wf.size(1), d = wf.size(2);
  Tensor table = wf.reshape({bsz * e, d});
  Tensor idx_off = offset_indices("embedding", ensure_has_bdim(idx, bsz), e, [&](int64_t v) {
    impl::throw_embedding_index(v, "per-set shape", per_set_shape(w));
  });
  return one(embedding(idx_off, table), 0);
}

}  // namespace

void register_embedding_rules() { set_batch_rule(OpId::embedding, embedding_rule); }

}  // namespace td::rules
