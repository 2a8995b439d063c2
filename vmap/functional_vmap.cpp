#include "vmap/functional_vmap.h"

#include <algorithm>
#include <string>
#include <typeinfo>

#include "engine/batching.h"
#include "engine/limits.h"
#include "engine/ops.h"
#include "engine/parallel.h"
#include "engine/random.h"
#include "vmap/rules/rules.h"
#include "vmap/transform.h"

namespace td::nn {
namespace {

// Where the sets are in `sizes`, the shape of a leaf of an input named in in_dims or the
// batch_size of a TensorDict leaf (`what` says which): dims d .. d+nb-1 for dim (negative from
// the end), which must hold params.batch_size. Returns d.
int64_t sets_dim(const DimsPath& path, const char* what, const Shape& sizes, int64_t dim,
                 const Shape& batch_size) {
  const int64_t nb = static_cast<int64_t>(batch_size.size());
  const int64_t n = static_cast<int64_t>(sizes.size());
  const int64_t d = dim < 0 ? dim + n : dim;
  if (d < 0 || d > n - nb)  // not d + nb: it may overflow
    throw_error<ValueError>("[functional_vmap] in_dims gives ", dim, " for ", path.str(), " ", what,
                            sizes, ", which does not fit params.batch_size ", batch_size, " there");
  Shape got(sizes.begin() + d, sizes.begin() + d + nb);
  if (got != batch_size)
    throw_error<ValueError>("[functional_vmap] ", path.str(), " ", what, sizes, " has ", got,
                            " at dim ", dim, " but params.batch_size is ", batch_size);
  return d;
}

// Flattens dims d .. d+nb-1 of a leaf of an input named in in_dims into one leading dim.
Tensor per_set_input(const DimsPath& path, const Tensor& x, int64_t dim, const Shape& batch_size) {
  const int64_t nb = static_cast<int64_t>(batch_size.size());
  const int64_t d = sets_dim(path, "of shape ", x.shape(), dim, batch_size);
  Tensor flat = nb == 1 ? x : x.flatten(d, d + nb - 1);
  if (d == 0) return flat;
  IntList perm{d};
  for (int64_t i = 0; i < flat.dim(); ++i)
    if (i != d) perm.push_back(i);
  return flat.permute(perm);
}

// An input named in in_dims, each leaf its dims name through per_set_input, as vmap batches the
// leaves of a structured input; a TensorDict's dim indexes its leaves (as tensordict's vmap
// does), so its batch dims there go to the front too. Other leaves (None, a number, a string,
// or a leaf whose dim is None) go to every set as they are, as vmap passes them; at least one
// leaf must be a Tensor or TensorDict with a dim.
struct PerSet {
  Value value;  // the sets at dim 0 of every mapped leaf
  Dims dims;    // 0 for those leaves, None for the shared ones
};
PerSet per_set_value(const std::string& key, const Value& v, const Dims& dims,
                     const Shape& batch_size) {
  const DimsPath root{
      .key = &key,
      .label = "input",
      .mismatch = "[functional_vmap] in_dims is not compatible with the structure of kwargs"};
  bool mapped = false;
  Value out = zip_dims(
      v, dims, root,
      [&](const Value& x, std::optional<int64_t> dim, const DimsPath& path, bool) -> Value {
        if (!dim) return x;
        if (x.is_tensor()) {
          mapped = true;
          return per_set_input(path, x.tensor(), *dim, batch_size);
        }
        if (!x.is_tensordict()) return x;
        // its batch dims at .. at+nb-1 are the sets: they go to the front as one
        mapped = true;
        const TensorDict& d = x.tensordict();
        const int64_t nb = static_cast<int64_t>(batch_size.size());
        const int64_t at =
            sets_dim(path, "(a TensorDict) of batch_size ", d.batch_size(), *dim, batch_size);
        Shape bs{shape_numel(batch_size)};
        for (int64_t i = 0; i < d.batch_dims(); ++i)
          if (i < at || i >= at + nb) bs.push_back(d.batch_size()[i]);
        return d.apply([&](const Tensor& t) { return per_set_input(path, t, at, batch_size); }, bs);
      });
  if (!mapped)
    throw_error<ValueError>("[functional_vmap] in_dims names '", key, "', which holds a ",
                            v.kind_name(), " with no Tensor that its in_dims ", dims,
                            " map: nothing in it has a dim that can index params.batch_size ",
                            batch_size);
  return {std::move(out), dims.mapped_at(0)};
}

// Set i's part of a per-set input from per_set_value.
Value select_set(const PerSet& x, int64_t i) {
  return zip_dims(x.value, x.dims, DimsPath{},
                  [&](const Value& v, std::optional<int64_t> dim, const DimsPath&, bool) -> Value {
                    if (!dim) return v;
                    if (v.is_tensor()) return v.tensor().select(0, i);
                    if (v.is_tensordict()) return v.tensordict()[i];
                    return v;
                  });
}

// Sets [begin, end) of a per-set input from per_set_value.
PerSet narrow_sets(const PerSet& x, SetRange r) {
  Value v =
      zip_dims(x.value, x.dims, DimsPath{},
               [&](const Value& v, std::optional<int64_t> dim, const DimsPath&, bool) -> Value {
                 if (!dim) return v;
                 if (v.is_tensor()) return v.tensor().narrow(0, r.begin, r.size());
                 if (v.is_tensordict()) return v.tensordict().slice(r.begin, r.end);
                 return v;
               });
  return {std::move(v), x.dims};
}

// The first Tensor leaf of v, if any.
std::optional<Tensor> first_tensor(const Value& v) {
  std::optional<Tensor> first;
  for_each_tensor(v, [&](const Tensor& t) {
    if (!first) first = t;
  });
  return first;
}

// Gives every Tensor leaf the leading dims batch_size (unflattening dim 0).
struct OutputUnflattener {
  const Shape& batch_size;
  Value leaf(const Value& v) { return v.is_tensor() ? v.tensor().unflatten(0, batch_size) : v; }
  Value tensordict(const TensorDict& td) {
    Shape bs = batch_size;
    bs.insert(bs.end(), td.batch_size().begin() + 1, td.batch_size().end());
    return td.apply([&](const Tensor& t) { return t.unflatten(0, batch_size); }, bs);
  }
};
Value unflatten_outputs(const Value& v, const Shape& batch_size) {
  OutputUnflattener unflatten{batch_size};
  return walk_value(v, unflatten);
}

// A number or string the module returned cannot carry the sets along a dim, in the loop (for
// set 0) as in the batched call (vmap's out_dims rule).
[[noreturn]] void throw_non_tensor_output(const Value& v, const char* where) {
  throw_error<ValueError>(
      "[functional_vmap] the module must only return Tensors (or None), but it returned a ",
      v.kind_name(), where);
}

// Stacks per-set outputs of equal structure along a new dim 0: walks the first set's output
// with every set's node at the same place in `nodes`.
struct OutputStacker {
  std::vector<const Value*> nodes;
  Value leaf(const Value& first) {
    if (first.is_tensor()) {
      std::vector<Tensor> ts;
      for (const Value* o : nodes) ts.push_back(o->tensor());
      return stack(ts, 0);
    }
    if (first.is_tensordict()) {
      std::vector<TensorDict> tds;
      for (const Value* o : nodes) tds.push_back(o->tensordict());
      return TensorDict::stack(tds, 0);
    }
    if (first.is_none()) return first;
    throw_non_tensor_output(first, " for set 0");
  }
  template <class Walk>
  Value child(const Value&, size_t i, const std::string* key, const Walk& walk) {
    std::vector<const Value*> parents = nodes;
    for (const Value*& o : nodes) o = key ? &o->dict().at(*key) : &o->list().at(i);
    Value out = walk();
    nodes = std::move(parents);
    return out;
  }
};
Value stack_outputs(const std::vector<Value>& outs) {
  OutputStacker stacker;
  for (const Value& o : outs) stacker.nodes.push_back(&o);
  return walk_value(outs.front(), stacker);
}

// Said before vmap's own message, which would suggest an out_dims that functional_vmap does not
// have.
struct TensorOutputCheck {
  void leaf(const Value& v) {
    if (!v.is_none() && !v.is_tensor() && !v.is_tensordict()) throw_non_tensor_output(v, "");
  }
};
void check_tensor_outputs(const Value& v) {
  TensorOutputCheck check;
  walk_value(v, check);
}

Value call(const Module& module, const std::string& method, const ValueList& args,
           const ValueDict& kwargs) {
  return const_cast<Module&>(module).call_method(method, args, kwargs);
}

// The elements of t with their own memory: dims of stride 0 (a leaf stacked by from_modules'
// expand_identical shares one copy among the sets) narrowed to their first index.
Tensor own_memory(const Tensor& t) {
  Tensor v = t;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1 && t.stride(d) == 0) v = v.narrow(d, 0, 1);
  return v;
}

// fn(key, tensor) for each of the module's buffers that params holds.
template <class F>
void for_each_buffer(const Module& module, const TensorDict& params, F&& fn) {
  for (const auto& [key, _] : module.named_buffers())
    if (params.contains(key)) fn(key, params.get(key));
}

// Buffers may be updated in place (BatchNorm running stats in training, in any submodule, or a
// user's module in eval); keep a copy to put back if the module throws, so a failed call
// leaves params as they were.
struct BufferSnapshot {
  std::vector<std::pair<Tensor, Tensor>> saved;  // (target, copy)
  BufferSnapshot(const Module& module, const TensorDict& params) {
    for_each_buffer(module, params, [&](const std::string&, const Tensor& b) {
      Tensor t = own_memory(b);
      saved.emplace_back(t, t.clone());
    });
  }
  void restore() {
    for (auto& [target, copy] : saved) target.copy_(copy);
  }
};

// Flattening params' batch dims copies a leaf they cannot be viewed as one dim in (sets laid
// out transposed): the buffers the sets updated in that copy go back to params.
void write_back_buffers(const Module& module, const TensorDict& params, const TensorDict& flat) {
  for_each_buffer(module, params, [&](const std::string& key, Tensor target) {
    const Tensor updated = flat.get(key);
    if (updated.storage() != target.storage())
      target.copy_(updated.unflatten(0, params.batch_size()));
  });
}

// Stacked with stride 0 along the sets (from_modules with expand_identical): every set shares it.
bool shared_by_sets(const Tensor& t) { return t.dim() > 0 && t.size(0) > 1 && t.stride(0) == 0; }

// Leaves every set shares (stride 0 along the sets): a loop hands each set the same memory, so
// a set writing into one (a buffer update in training) would change it for the others. The
// batched call raises on such a write (copy_ into an expanded tensor); the loop compares them
// after each set and raises the same way.
struct SharedLeaves {
  std::vector<std::tuple<std::string, Tensor, Tensor>> leaves;  // key, the memory, a copy
  SharedLeaves(const TensorDict& flat, int64_t batch) {
    if (batch < 2) return;
    for (const auto& [key, t] : flat.leaves())
      if (shared_by_sets(t)) {
        Tensor m = own_memory(t);
        leaves.emplace_back(key, m, m.clone());
      }
  }
  void check(int64_t set) {
    for (auto& [key, memory, copy] : leaves)
      if (!same_bytes(memory, copy)) {
        memory.copy_(copy);
        throw_error<RuntimeError>(
            "[functional_vmap] loop=true: set ", set, " wrote into '", key, "' of shape ",
            memory.select(0, 0).shape(),
            ", which every set shares (stacked with stride 0, as from_modules with "
            "expand_identical does); clone params' entry first");
      }
  }
};

// The batched call meets a write into a leaf every set shares as a write into an expanded
// tensor, which cannot say which entry it was: rethrow naming the shared buffers (what modules
// write), or every shared leaf if no buffer is one.
void name_shared_write(const ExpandedWriteError& e, const Module& module, const TensorDict& flat) {
  std::vector<std::string> keys;
  for_each_buffer(module, flat, [&](const std::string& key, const Tensor& t) {
    if (shared_by_sets(t)) keys.push_back(key);
  });
  if (keys.empty())
    for (const auto& [key, t] : flat.leaves())
      if (shared_by_sets(t)) keys.push_back(key);
  if (keys.empty()) return;
  std::string names;
  for (const auto& k : keys) names += (names.empty() ? "'" : ", '") + k + "'";
  throw_error<RuntimeError>("[functional_vmap] ", e.what(), ": params' ", names,
                            keys.size() > 1 ? " are" : " is",
                            " shared by every set (stacked with stride 0, as from_modules with "
                            "expand_identical does)");
}

Value run_loop(const Module& module, const std::string& method, const TensorDict& params,
               const ValueList& args, const ValueDict& kwargs,
               const std::map<std::string, PerSet>& per_set, int64_t batch, int64_t set_offset,
               const std::function<void(int64_t, int64_t)>& progress) {
  // every set's output is kept until they are stacked: refuse 10^9 sets up front
  check_memory_budget("functional_vmap", batch, kChunkBytes, "sets run one at a time (loop=true)");
  RngState entry = rng_state();
  uint64_t stream_end = entry.stream;
  SharedLeaves shared(params, batch);
  std::vector<Value> outs;
  try {
    for (int64_t i = 0; i < batch; ++i) {
      // set i draws what it would draw as set i of a batched call with randomness "different"
      set_rng_state({entry.seed, entry.stream,
                     combine_set_key(entry.set_key, static_cast<uint64_t>(set_offset + i))});
      ValueDict kw = kwargs;
      for (const auto& [key, x] : per_set) kw.set(key, select_set(x, i));
      ParameterOverride override(module, params[i]);
      outs.push_back(call(module, method, args, kw));
      shared.check(i);
      stream_end = std::max(stream_end, rng_state().stream);
      if (progress) progress(i + 1, batch);
    }
  } catch (...) {
    set_rng_state(entry);
    throw;
  }
  set_rng_state({entry.seed, stream_end, entry.set_key});
  return stack_outputs(outs);
}

// Whether blocks of sets may run through the module at once: every module of the tree
// declares its exact class safe (Module::concurrent_forward_class).
bool forward_runs_concurrently(const Module& m) {
  const std::type_info* safe = m.concurrent_forward_class();
  if (safe == nullptr || *safe != typeid(m)) return false;
  for (const auto& c : m.children())
    if (!forward_runs_concurrently(*c)) return false;
  return true;
}

bool any_steps_over_parameters(const Module& m) {
  if (m.steps_over_parameters()) return true;
  for (const auto& c : m.children())
    if (any_steps_over_parameters(*c)) return true;
  return false;
}

// How to split the sets when the caller gave no chunk_size. Any chunking gives the same result,
// so this changes speed and peak memory only.
struct Blocks {
  std::optional<int64_t> chunk_size;
  bool concurrent = false;
};

// One thread: layer by layer over all sets, a mid-sized ensemble's activations spill from L2
// between one layer and the next; in blocks of kBlockBytes of parameters (or of activations,
// where larger) they stay in cache. A set whose activations alone exceed the block runs alone.
// Blocking pays only for sets of at least 1/16 of the block, parameters under half of it, and
// blocks with work enough to hide a module call's overhead.
// More threads: blocks of sets run at once, one per thread at a time, instead of every op
// splitting its sets across the threads and waiting for the slowest; cache-sized blocks for
// mid-sized sets, one block per thread for small ones. Only outside any vmap or parameter
// override (the workers see neither), for forward through modules that declare it, for sets
// under half the block (larger ones have GEMMs big enough to thread themselves), and with work
// enough per thread.
Blocks auto_blocks(const Module& module, const std::string& method, const TensorDict& flat,
                   int64_t batch, const ValueList& args, const ValueDict& kwargs,
                   const std::map<std::string, PerSet>& per_set) {
  constexpr int64_t kBlockBytes = 1 << 20;
  constexpr double kMinBlockFlops = 16e6, kMinThreadFlops = 4e6;
  const int64_t threads = num_threads();
  if (batch <= 2) return {};
  int64_t param_bytes = 0, param_count = 0, widest = 0;
  bool conv = false;  // met a stacked [B, out, in, kh, kw] weight
  // walks the entries rather than leaves(), which would build every dotted key on each call
  auto add_sizes = [&](const TensorDict& d, auto&& self) -> void {
    for (const auto& [key, e] : d.items()) {
      if (const auto* t = std::get_if<Tensor>(&e)) {
        param_count += t->numel() / batch;
        param_bytes += t->numel() / batch * static_cast<int64_t>(dtype_size(t->dtype()));
        if (t->dim() >= 2) widest = std::max(widest, t->size(1));  // out features or channels
        if (t->dim() == 5) conv = true;
      } else {
        self(std::get<TensorDict>(e), self);
      }
    }
  };
  add_sizes(flat, add_sizes);
  // A 2-d convolution reads its receptive fields an image at a time from L2 whatever the block:
  // blocks then save the spill of whole layers to memory and the calls' overheads, and pay up to
  // a share of L3 (on Zen 5, 16 sets of conv_s2_bn16 or dw_pw16: blocks of 4-8 sets 5-15% faster
  // than 1 or 16; cnn16 no slower)
  const int64_t block = conv ? 4 * kBlockBytes : kBlockBytes;
  if (param_bytes == 0 || param_bytes * 2 > block) return {};
  // the rows each set's parameters meet: those of the first tensor input, per set
  std::optional<Tensor> input;
  for (const auto& [key, v] : per_set)
    if (!input) input = first_tensor(v.value);
  const int64_t sets_in_input = input ? batch : 1;
  for (const auto& a : args)
    if (!input) input = first_tensor(a);
  for (const auto& [key, v] : kwargs.items())
    if (!input) input = first_tensor(v);
  // its rows: every dim but the features; an image batch [N, C, H, W] that meets a convolution
  // has N*H*W (the rows of the convolution's GEMM)
  if (!input || input->dim() == 0) return {};
  const int64_t features_dim = conv && input->dim() >= 3 ? -3 : -1;
  if (input->size(features_dim) == 0) return {};
  const int64_t rows = input->numel() / input->size(features_dim) / sets_in_input;
  const double set_flops = 2.0 * static_cast<double>(param_count * rows);
  // a set's size is the larger of its parameters and a layer's activations (rows times the
  // widest parameter's out features): either spills from L2 when many sets run at once
  const int64_t set_bytes =
      std::max(param_bytes, rows * widest * static_cast<int64_t>(dtype_size(input->dtype())));
  // a recurrent net: cache-sized blocks would run its steps once per block (16 LSTMs: 1.5x
  // slower in blocks of 2); with threads, one block per thread
  const bool steps = any_steps_over_parameters(module);
  const bool mid = !steps && set_bytes * 16 >= block;
  if (threads == 1) {
    // a set whose activations alone outgrow the block still runs alone: the others' would
    // push its out of the cache too
    const int64_t c = std::max<int64_t>(block / set_bytes, 1);
    if (!mid || c >= batch || set_flops * static_cast<double>(c) < kMinBlockFlops) return {};
    return {c, false};
  }
  if (set_flops * static_cast<double>(batch) < kMinThreadFlops * static_cast<double>(threads) ||
      in_vmap() || ParameterOverride::any_active() || method != "forward" ||
      !forward_runs_concurrently(module))  // the tree walk last
    return {};
  int64_t best = (batch + threads - 1) / threads;
  if (mid) {
    // the cache-sized block (at most 16 sets) whose blocks share out most evenly
    int64_t best_load = batch;
    for (int64_t c = 1; c <= std::min(std::max<int64_t>(block / set_bytes, 1), batch); ++c) {
      const int64_t load = ((batch + c - 1) / c + threads - 1) / threads * c;
      if (load <= best_load) best = c, best_load = load;
    }
  }
  if (best >= batch) return {};
  return {best, true};
}

}  // namespace

Value functional_vmap(const Module& module, const FunctionalVmapOptions& o) {
  const TensorDict& params = o.params;
  const Shape& batch_size = params.batch_size();
  int64_t nb = params.batch_dims();
  if (o.chunk_size && *o.chunk_size <= 0)
    throw_error<ValueError>("[functional_vmap] chunk_size must be None or > 0, got ",
                            *o.chunk_size);
  if (o.loop && o.randomness == Randomness::Same)
    throw_error<ValueError>(
        "[functional_vmap] loop=true cannot give every set the same random values "
        "(randomness='same'); use loop=false or randomness='different'");
  for (const auto& [key, dim] : o.in_dims)
    if (!o.kwargs.contains(key))
      throw_error<KeyError>("[functional_vmap] in_dims names '", key,
                            "', which is not a key of kwargs");
  if (!o.in_dims.empty() && nb == 0)
    throw_error<ValueError>(
        "[functional_vmap] in_dims is not empty but params has no batch "
        "dimension (batch_size [])");
  const std::string method = o.method.value_or("forward");
  if (o.first_set < 0)
    throw_error<ValueError>("[functional_vmap] first_set must be >= 0, got ", o.first_set);
  if (o.sets) {
    const int64_t total = shape_numel(batch_size);
    if (nb == 0 || o.sets->begin < 0 || o.sets->begin > o.sets->end || o.sets->end > total)
      throw_error<ValueError>("[functional_vmap] sets [", o.sets->begin, ", ", o.sets->end,
                              ") is not a range of the ", total, " sets of params.batch_size ",
                              batch_size);
  }
  const int64_t set_offset = o.first_set + (o.sets ? o.sets->begin : 0);

  // params' structure and per-set shapes are checked by ParameterOverride, before the module
  // runs on any set.
  std::map<std::string, PerSet> per_set;  // empty without batch dims (checked above)
  for (const auto& [key, dims] : o.in_dims)
    per_set[key] = per_set_value(key, o.kwargs.at(key), dims, batch_size);
  const TensorDict whole = nb <= 1 ? params : params.flatten_batch();
  // a slice of the sets is a view: their buffer updates land in `whole`
  const TensorDict flat = o.sets ? whole.slice(o.sets->begin, o.sets->end) : whole;
  if (o.sets)
    for (auto& [key, x] : per_set) x = narrow_sets(x, *o.sets);
  // inside vmap an override sees each set's view and cannot compare a tied pair: check it here
  ParameterOverride::check_tied(module, flat, "functional_vmap");
  BufferSnapshot snapshot(module, flat);

  try {
    if (nb == 0) {  // one plain call with params
      ParameterOverride override(module, flat);
      return call(module, method, o.args, o.kwargs);
    }
    const int64_t batch = flat.batch_size()[0];
    Value out;
    if (o.loop && batch > 0) {
      out =
          run_loop(module, method, flat, o.args, o.kwargs, per_set, batch, set_offset, o.progress);
    } else {
      ensure_batch_rules();
      ValueList vargs{Value(flat)};
      VmapOptions vo;
      vo.in_dims.push_back(0);
      std::vector<std::string> keys;
      for (const auto& [key, x] : per_set) {
        keys.push_back(key);
        vargs.push_back(x.value);
        vo.in_dims.push_back(x.dims);
      }
      vo.randomness = o.loop ? Randomness::Different : o.randomness;
      const Blocks blocks =
          o.chunk_size ? Blocks{o.chunk_size, false}
                       : auto_blocks(module, method, flat, batch, o.args, o.kwargs, per_set);
      vo.chunk_size = blocks.chunk_size;
      vo.set_offset = set_offset;
      if (o.progress) vo.progress = [&](int64_t done) { o.progress(done, batch); };
      auto f = [&](const ValueList& a) -> Value {
        ValueDict kw = o.kwargs;
        for (size_t i = 0; i < keys.size(); ++i) kw.set(keys[i], a[i + 1]);
        ParameterOverride override(module, a[0].tensordict());
        Value out = call(module, method, o.args, kw);
        check_tensor_outputs(out);
        return out;
      };
      try {
        out = vmap_call(f, vargs, vo, blocks.concurrent);
      } catch (const ExpandedWriteError& e) {
        name_shared_write(e, module, flat);
        throw;
      }
    }
    if (nb > 1) write_back_buffers(module, params, whole);
    return nb == 1 || o.sets ? out : unflatten_outputs(out, batch_size);
  } catch (...) {
    snapshot.restore();
    throw;
  }
}

SetRange shard_sets(int64_t sets, int64_t rank, int64_t ranks) {
  if (sets < 0 || ranks <= 0 || rank < 0 || rank >= ranks)
    throw_error<ValueError>("[shard_sets] needs sets >= 0 and 0 <= rank < ranks, got sets ", sets,
                            ", rank ", rank, ", ranks ", ranks);
  const int64_t base = sets / ranks, extra = sets % ranks;
  const int64_t begin = rank * base + std::min(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

}  // namespace td::nn
