#include "engine/dispatch.h"

#include <array>
#include <atomic>
#include <iostream>
#include <mutex>
#include <sstream>

#include "engine/batching.h"
#include "engine/ops.h"
#include "engine/ops/impls.h"

namespace td {
namespace {

struct OpTable {
  std::vector<OpInfo> ops;
  std::vector<BatchRule> rules;
  std::vector<std::atomic<int64_t>> fallbacks = std::vector<std::atomic<int64_t>>(512);
  std::mutex mutex;  // guards registration of user ops
  OpTable() {
#define TD_X(name, family, ...) ops.push_back({#name, OpFamily::family, &impl::name##_impl});
    TD_OPS(TD_X)
#undef TD_X
    ops.reserve(512);  // registration never reallocates under readers
    rules.resize(512, nullptr);
  }
};

OpTable& table() {
  static OpTable t;
  return t;
}

std::atomic<bool> g_fallback_enabled{true};

thread_local std::array<int64_t, static_cast<size_t>(KernelKind::kCount)> g_kernel_counts{};
thread_local int64_t g_multiply_adds = 0;

// Per-set loop for an op without a rule: slice every batched input, call, stack.
std::vector<Batched> fallback_loop(const RuleContext& ctx, std::span<const Batched> in,
                                   const OpAttrs& attrs) {
  const char* name = op_name(ctx.op);
  if (!g_fallback_enabled.load())
    throw_error<RuntimeError>("[vmap] op '", name,
                              "' has no batching rule and the per-set fallback is disabled");
  static std::mutex warn_mutex;
  {
    std::lock_guard<std::mutex> lock(warn_mutex);
    if (table().fallbacks[static_cast<size_t>(ctx.op)].fetch_add(1) == 0)
      std::cerr << "td warning: vmap has no batching rule for op '" << name
                << "'; running it once per set (slow)\n";
  }
  if (ctx.batch_size == 0)
    throw_error<RuntimeError>("[vmap] op '", name,
                              "' has no batching rule; the per-set fallback cannot run over a "
                              "batch of size 0");
  std::vector<std::vector<Tensor>> per_set;
  for (int64_t i = 0; i < ctx.batch_size; ++i) {
    std::vector<Tensor> args;
    for (const auto& b : in) args.push_back(b.bdim ? b.value.select(*b.bdim, i) : b.value);
    per_set.push_back(call_op(ctx.op, args, attrs));
  }
  std::vector<Batched> out;
  for (size_t k = 0; k < per_set[0].size(); ++k) {
    std::vector<Tensor> parts;
    for (auto& r : per_set) parts.push_back(r[k]);
    out.push_back({stack(parts, 0), 0});
  }
  return out;
}

// The one way a batched op reports a bad argument: an op whose rule failed on the stacked
// operands runs set by set, its shapes named per-set shapes, so that the first set that fails
// raises its own error, as an unbatched call on its slice would. If every set passes (a failure
// of the stacking itself), the caller rethrows the original error. Random and in-place ops are
// not run again (a second draw, a second write); a user op's rule is not trusted to be pure.
void replay_per_set(const RuleContext& ctx, std::span<const Batched> in, const OpAttrs& attrs) {
  const OpFamily family = op_info(ctx.op).family;
  if (family == OpFamily::Random || family == OpFamily::InPlace || family == OpFamily::Custom)
    return;
  PerSetNaming naming;
  std::vector<Tensor> args(in.size());
  for (int64_t i = 0; i < ctx.batch_size; ++i) {
    for (size_t k = 0; k < in.size(); ++k)
      args[k] = in[k].bdim ? in[k].value.select(*in[k].bdim, i) : in[k].value;
    (void)call_op(ctx.op, args, attrs);
  }
}

std::vector<Tensor> dispatch_batched(OpId op, std::span<const Tensor> inputs,
                                     const OpAttrs& attrs) {
  int64_t level = 0;
  for (const auto& t : inputs)
    if (t.defined()) level = std::max(level, t.max_level());
  auto levels = active_levels();
  // A random op runs at the top visible level even when its inputs are batched lower: its rule
  // draws for every visible level at once.
  if (is_random_op(op) && !levels.empty()) level = std::max(level, levels.back().level);
  const VmapLevel* info = find_level(level);
  if (!info) {
    Shape shape;
    for (const auto& t : inputs)
      if (t.defined() && t.max_level() == level) shape = t.shape();
    throw_error<RuntimeError>("[", op_name(op), "] got a tensor of shape ", shape,
                              " batched at vmap level ", level,
                              ", which is not active here: a batched tensor escaped the vmap "
                              "that made it (kept outside the function, or used in a later vmap)");
  }
  std::vector<Batched> in;
  in.reserve(inputs.size());
  for (const auto& t : inputs) in.push_back(t.defined() ? remove_batch_tag(t, level) : Batched{});
  RuleContext ctx{op, level, info->batch_size, info->randomness,
                  info->set_offset};
  BatchRule rule = batch_rule(op);
  std::vector<Batched> out;
  {
    HideLevelsScope hide(level);
    if (!rule) {
      out = fallback_loop(ctx, in, attrs);
    } else {
      try {
        out = rule(ctx, in, attrs);
      } catch (const Error&) {
        replay_per_set(ctx, in, attrs);
        throw;
      }
    }
  }
  std::vector<Tensor> result;
  result.reserve(out.size());
  for (auto& b : out) result.push_back(b.bdim ? add_batch_tag(b.value, level, *b.bdim) : b.value);
  return result;
}

}  // namespace

const char* family_name(OpFamily f) {
  switch (f) {
#define TD_X(name) \
  case OpFamily::name: return #name;
    TD_OP_FAMILIES(TD_X)
#undef TD_X
  }
  return "?";
}

int num_ops() { return static_cast<int>(table().ops.size()); }

const OpInfo& op_info(OpId op) {
  auto i = static_cast<size_t>(op);
  if (i >= table().ops.size()) throw_error<KeyError>("[op_info] no op with id ", i);
  return table().ops[i];
}

const char* op_name(OpId op) { return op_info(op).name.c_str(); }

bool is_random_op(OpId op) { return op_info(op).family == OpFamily::Random; }

OpId register_op(const std::string& name, OpImpl impl) {
  auto& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  for (const auto& o : t.ops)
    if (o.name == name) throw_error<ValueError>("[register_op] an op named '", name, "' exists");
  if (t.ops.size() >= t.rules.size())
    throw_error<RuntimeError>("[register_op] too many ops (", t.ops.size(), ")");
  t.ops.push_back({name, OpFamily::Custom, impl});
  return static_cast<OpId>(t.ops.size() - 1);
}

void throw_wrong_attrs(OpId op, const char* expected, const OpAttrs& got) {
  throw_error<TypeError>("[", op_name(op), "] takes ", expected, ", got ", attrs_name(got));
}

std::vector<Tensor> call_op(OpId op, std::span<const Tensor> inputs, const OpAttrs& attrs) {
  bool batched = false;
  for (const auto& t : inputs) batched |= t.is_batched();
  if (batched || (is_random_op(op) && !active_levels().empty()))
    return dispatch_batched(op, inputs, attrs);
  try {
    return op_info(op).impl(inputs, attrs);
  } catch (const UndefinedTensorError&) {
    std::ostringstream os;  // which input was absent, among the shapes of the others
    for (size_t i = 0; i < inputs.size(); ++i)
      os << (i ? ", " : "") << (inputs[i].defined() ? shape_str(inputs[i].shape()) : "undefined");
    throw_error<UndefinedTensorError>("[", op_name(op), "] got an undefined tensor where it needs",
                                      " one (inputs: ", os.str(), ")");
  }
}

Tensor call_op1(OpId op, std::initializer_list<Tensor> inputs, const OpAttrs& attrs) {
  return call_op(op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs)[0];
}

void set_batch_rule(OpId op, BatchRule rule) {
  auto i = static_cast<size_t>(op);
  if (i >= table().rules.size()) throw_error<KeyError>("[set_batch_rule] no op with id ", i);
  table().rules[i] = rule;
}

BatchRule batch_rule(OpId op) { return table().rules[static_cast<size_t>(op)]; }

void set_vmap_fallback_enabled(bool enabled) { g_fallback_enabled.store(enabled); }
int64_t fallback_count(OpId op) { return table().fallbacks[static_cast<size_t>(op)].load(); }

void count_kernel(KernelKind kind) { ++g_kernel_counts[static_cast<size_t>(kind)]; }
int64_t kernel_count(KernelKind kind) { return g_kernel_counts[static_cast<size_t>(kind)]; }
void reset_kernel_counts() {
  g_kernel_counts.fill(0);
  g_multiply_adds = 0;
}
void count_multiply_adds(int64_t n) { g_multiply_adds += n; }
int64_t multiply_add_count() { return g_multiply_adds; }

}  // namespace td
