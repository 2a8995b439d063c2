#pragma once
// Op identity, the kernel table, and the hook that routes batched calls to batching rules.
//
// Every op call goes through call_op. With no batch-tagged input (and, for a random op, no
// active vmap level) it runs the op's kernel entry. Otherwise the highest level among the
// inputs is unwrapped and the op's batching rule (filled in by vmap/) computes the physical
// result; an op without a rule runs a per-set loop (with a one-time warning) unless the
// fallback is disabled.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/op_attrs.h"
#include "engine/op_list.h"
#include "engine/tensor.h"

namespace td {

enum class OpId : int {
#define TD_X(name, family, ...) name,
  TD_OPS(TD_X)
#undef TD_X
      kNumBuiltin
};

enum class OpFamily : int {
#define TD_X(name) name,
  TD_OP_FAMILIES(TD_X)
#undef TD_X
};
const char* family_name(OpFamily f);

// Non-tensor arguments of an op: OpAttrs holds one struct of engine/op_attrs.h. A kernel entry
// or batching rule reads its op's struct with attrs_as; another struct (a caller may pass any)
// is a TypeError naming the op. Ops with no attributes ignore what they are given.
[[noreturn]] void throw_wrong_attrs(OpId op, const char* expected, const OpAttrs& got);
template <class A>
const A& attrs_as(OpId op, const OpAttrs& attrs) {
  if (const A* a = std::get_if<A>(&attrs)) return *a;
  throw_wrong_attrs(op, A::kName, attrs);
}

using OpImpl = std::vector<Tensor> (*)(std::span<const Tensor> inputs, const OpAttrs& attrs);

struct OpInfo {
  std::string name;
  OpFamily family;
  OpImpl impl;
};

int num_ops();  // built-in plus registered
const OpInfo& op_info(OpId op);
const char* op_name(OpId op);
bool is_random_op(OpId op);
// Registers a user op (for example one vmap has no rule for); returns its id.
OpId register_op(const std::string& name, OpImpl impl);

// Runs op on inputs (undefined tensors stand for absent optional inputs).
std::vector<Tensor> call_op(OpId op, std::span<const Tensor> inputs, const OpAttrs& attrs = {});
Tensor call_op1(OpId op, std::initializer_list<Tensor> inputs, const OpAttrs& attrs = {});

// ---- batching rules (vmap/ fills the table) ----

// What a random op does under vmap: raise, a different draw per set, or one draw for all.
enum class Randomness { Error, Different, Same };

// A tensor unwrapped at one level: value carries only lower levels' tags; bdim is the dim of
// value that indexes the sets at this level (nullopt: not batched at this level).
struct Batched {
  Tensor value;
  std::optional<int64_t> bdim;
};

struct RuleContext {
  OpId op;
  int64_t level;
  int64_t batch_size;
  Randomness randomness;
  int64_t set_offset;  // global index of this call's set 0 at this level
};

using BatchRule = std::vector<Batched> (*)(const RuleContext& ctx, std::span<const Batched> in,
                                           const OpAttrs& attrs);
void set_batch_rule(OpId op, BatchRule rule);
BatchRule batch_rule(OpId op);  // nullptr if none

// The per-set loop for ops without a rule; on by default, warns once per op.
void set_vmap_fallback_enabled(bool enabled);
// How many times the fallback ran for op since start (tests check built-ins never do).
int64_t fallback_count(OpId op);

// ---- kernel launch counters (prove that vmap runs as many kernels as one call) ----

enum class KernelKind : int { Gemm, Elementwise, Reduce, Conv, Copy, Random, Other, kCount };
void count_kernel(KernelKind kind);
int64_t kernel_count(KernelKind kind);
void reset_kernel_counts();
// Multiply-adds of the GEMMs and convolutions this thread launched since the reset (tdvmap
// bench's GFLOP/s of a --model workload).
void count_multiply_adds(int64_t n);
int64_t multiply_add_count();

}  // namespace td
