// Random ops. rand/randn draw every set of every visible Different level in one kernel, keyed
// by the set's global index so draws do not depend on chunking; bernoulli (and dropout under
// nested levels) decompose into public ops (their composite impl) run with the level visible
// again; dropout at one level runs the same draws in one pass per set.
#include "engine/batching.h"
#include "engine/ops/draws.h"
#include "engine/random.h"
#include "vmap/rules/rule_helpers.h"

namespace td::rules {
namespace {

// A random op under a level with randomness 'error' is a RuntimeError naming the op.
void check_randomness(const char* op, Randomness r) {
  if (r == Randomness::Error)
    throw_error<RuntimeError>("[", op, "] vmap: random operation with randomness='error'; pass "
                              "randomness='different' or 'same'");
}

// () -> [B_a, B_b, .., B_L, *shape] with one dim per Different level; lower ones get tagged.
// rand, randn, dropout_mask and randperm.
std::vector<Batched> rand_rule(const RuleContext& ctx, std::span<const Batched>,
                               const OpAttrs& any) {
  const auto& attrs = attrs_as<RandomAttrs>(ctx.op, any);
  const char* name = op_name(ctx.op);
  std::vector<VmapLevel> levels(active_levels().begin(), active_levels().end());
  levels.push_back({ctx.level, ctx.batch_size, ctx.randomness, ctx.set_offset});
  for (const auto& l : levels) check_randomness(name, l.randomness);
  impl::check_random_dtype(ctx.op, attrs.dtype);
  check_sizes(name, attrs.shape);
  std::vector<VmapLevel> diff;
  for (const auto& l : levels)
    if (l.randomness == Randomness::Different) diff.push_back(l);
  Shape phys;
  for (const auto& l : diff) phys.push_back(l.batch_size);
  phys.insert(phys.end(), attrs.shape.begin(), attrs.shape.end());
  Tensor out = Tensor::empty(phys, attrs.dtype);
  count_kernel(KernelKind::Random);
  RngState st = rng_state();
  uint64_t stream = next_rng_stream();
  int64_t n = shape_numel(attrs.shape);
  int64_t sets = 1;
  for (const auto& l : diff) sets *= l.batch_size;
  const auto item = static_cast<int64_t>(dtype_size(attrs.dtype));
  std::vector<int64_t> idx(diff.size(), 0);
  for (int64_t s = 0; s < sets && n > 0; ++s) {
    // set index s -> (i_a, i_b, ..) row-major, and its key
    int64_t rem = s;
    for (size_t j = diff.size(); j-- > 0;) {
      idx[j] = rem % diff[j].batch_size;
      rem /= diff[j].batch_size;
    }
    uint64_t key = st.set_key;
    for (size_t j = 0; j < diff.size(); ++j)
      key = combine_set_key(key, static_cast<uint64_t>(diff[j].set_offset + idx[j]));
    impl::fill_random(ctx.op, attrs, static_cast<char*>(out.raw_data()) + s * n * item, n, st.seed,
                      stream, key);
  }
  // tag the lower Different levels (each is now the front logical dim), in level order
  bool top_different = ctx.randomness == Randomness::Different;
  size_t lower = diff.size() - (top_different ? 1 : 0);
  for (size_t j = 0; j < lower; ++j) out = add_batch_tag(out, diff[j].level, 0);
  return one(out, top_different ? std::optional<int64_t>(0) : std::nullopt);
}

// Re-tags the inputs at this level and runs the op's composite impl (rand + compare + mul ..)
// with the level visible, so each public op it calls takes its own rule.
std::vector<Batched> decomposition_rule(const RuleContext& ctx, std::span<const Batched> in,
                                        const OpAttrs& attrs) {
  std::vector<Tensor> args;
  for (const auto& b : in)
    args.push_back(b.value.defined() && b.bdim ? add_batch_tag(b.value, ctx.level, *b.bdim)
                                               : b.value);
  std::vector<Tensor> outs;
  {
    ShowLevelsScope show(ctx.level);
    outs = op_info(ctx.op).impl(args, attrs);
  }
  std::vector<Batched> result;
  for (const auto& o : outs)
    result.push_back(o.defined() ? remove_batch_tag(o, ctx.level) : Batched{});
  return result;
}

// bernoulli(p) with randomness 'same' cannot give every set the same draws from a p that
// differs per set; PyTorch refuses it too.
std::vector<Batched> bernoulli_rule(const RuleContext& ctx, std::span<const Batched> in,
                                    const OpAttrs& attrs) {
  check_randomness("bernoulli", ctx.randomness);
  if (ctx.randomness == Randomness::Same && in[0].bdim)
    throw_error<RuntimeError>(
        "[bernoulli] vmap: randomness='same' with a batched p (per-set shape ",
        shape_str(per_set_shape(in[0])),
        ") is not supported; use randomness='different' or an unbatched p");
  return decomposition_rule(ctx, in, attrs);
}

// dropout at a single visible level: each set's slice in one pass (fused_dropout) with the
// draws rand would give it (key of the set's global index for Different, the unbatched key for
// Same), so results match the decomposition, the loop and any chunking bit for bit. Nested
// levels, or an input batched at another level, take the decomposition.
std::vector<Batched> dropout_rule(const RuleContext& ctx, std::span<const Batched> in,
                                  const OpAttrs& attrs) {
  const Batched& x = in[0];
  const RandomAttrs& a = attrs_as<RandomAttrs>(ctx.op, attrs);
  const double p = a.p;
  const bool simple = active_levels().empty() && !x.value.is_batched() &&
                      is_floating(x.value.dtype()) && a.training && p > 0 && p < 1;
  if (!simple) return decomposition_rule(ctx, in, attrs);
  check_randomness("dropout", ctx.randomness);
  const bool different = ctx.randomness == Randomness::Different;
  if (!x.bdim && !different) return decomposition_rule(ctx, in, attrs);  // one unbatched draw
  Tensor xf = (x.bdim ? move_bdim_to_front(x) : ensure_has_bdim(x, ctx.batch_size)).contiguous();
  Tensor out = Tensor::empty(xf.shape(), xf.dtype());
  count_kernel(KernelKind::Random);
  const RngState st = rng_state();
  const uint64_t stream = next_rng_stream();
  for (int64_t s = 0; s < ctx.batch_size; ++s) {
    const uint64_t key =
        different ? combine_set_key(st.set_key, static_cast<uint64_t>(ctx.set_offset + s))
                  : st.set_key;
    impl::fused_dropout(xf.select(0, s), out.select(0, s), p, stream, key);
  }
  return one(out, 0);
}

}  // namespace

void register_random_rules() {
  set_batch_rule(OpId::rand, rand_rule);
  set_batch_rule(OpId::randn, rand_rule);
  set_batch_rule(OpId::dropout_mask, rand_rule);
  set_batch_rule(OpId::randperm, rand_rule);
  set_batch_rule(OpId::bernoulli, bernoulli_rule);
  set_batch_rule(OpId::dropout, dropout_rule);
}

}  // namespace td::rules
