#include "vmap/transform.h"

#include <algorithm>
#include <exception>
#include <sstream>

#include "engine/batching.h"
#include "engine/limits.h"
#include "engine/ops.h"
#include "engine/parallel.h"
#include "engine/random.h"
#include "vmap/rules/rule_helpers.h"
#include "vmap/rules/rules.h"

namespace td {
namespace {

// in_dim / out_dim range check: IndexError with the expected range and the shape.
int64_t check_dim(const char* what, int64_t d, int64_t ndim, size_t index, const Shape& shape) {
  if (d < -ndim || d >= ndim)
    throw_error<IndexError>("[vmap] ", what, " ", d, " is out of range for ",
                            what[0] == 'i' ? "argument " : "output ", index, " of shape ",
                            shape_str(shape), "; expected -ndim <= ", what,
                            " < ndim with ndim = ", ndim);
  return d < 0 ? d + ndim : d;
}

// Calls leaf(t, dim) on every Tensor leaf of v, where dim is the normalised in_dim of that leaf
// (a TensorDict's in_dim indexes its batch dims), and rebuilds v with the results; TensorDicts
// lose the mapped batch dim when `drop_td_dim`.
Value map_in(const Value& v, int64_t in_dim, size_t arg,
             const std::function<Tensor(const Tensor&, int64_t)>& leaf, bool drop_td_dim) {
  const ValueDepthGuard depth;
  switch (v.kind()) {
    case Value::Kind::Tensor: {
      const Tensor& t = v.tensor();
      return Value(leaf(t, check_dim("in_dim", in_dim, t.dim(), arg, t.shape())));
    }
    case Value::Kind::TensorDict: {
      const TensorDict& d = v.tensordict();
      int64_t nd = check_dim("in_dim", in_dim, d.batch_dims(), arg, d.batch_size());
      Shape bs = d.batch_size();
      if (drop_td_dim) bs.erase(bs.begin() + nd);
      return Value(d.apply([&](const Tensor& t) { return leaf(t, nd); }, bs));
    }
    case Value::Kind::List: {
      ValueList out;
      for (const auto& x : v.list()) out.push_back(map_in(x, in_dim, arg, leaf, drop_td_dim));
      return Value(std::move(out));
    }
    case Value::Kind::Dict: {
      ValueDict out;
      for (const auto& [k, x] : v.dict().items())
        out.set(k, map_in(x, in_dim, arg, leaf, drop_td_dim));
      return Value(std::move(out));
    }
    default:
      return v;
  }
}

// One chunk's output: its level (chunks run concurrently have their own) and batch size.
struct OutCtx {
  int64_t level;
  int64_t n;
  size_t index;  // of the output, for messages
};

// Removes the level's tag from a leaf and puts the batch dim at out_dim (a leaf that does not
// depend on the sets is expanded with stride 0). `od` is already normalised.
Tensor finish_leaf(const Tensor& t, std::optional<int64_t> od, const OutCtx& c) {
  Batched b = remove_batch_tag(t, c.level);
  if (!od) {
    if (b.bdim)
      throw_error<ValueError>("[vmap] out_dims is None for output ", c.index,
                              ", but it is batched (per-set shape ",
                              shape_str(rules::per_set_shape(b)),
                              "); None is only allowed for outputs that do not depend on the "
                              "batched inputs");
    return t;
  }
  if (b.bdim) return rules::movedim(b.value, *b.bdim, *od);
  Shape s = t.shape();
  s.insert(s.begin() + *od, c.n);
  return t.unsqueeze(*od).expand(s);
}

// Applies finish_leaf over the output tree of each chunk (cs: one context per chunk) and
// concatenates chunk results.
Value finish(const std::vector<Value>& outs, std::optional<int64_t> od,
             const std::vector<OutCtx>& cs) {
  const ValueDepthGuard depth;
  const Value& v = outs[0];
  const OutCtx& c0 = cs[0];
  auto per_chunk = [&](auto&& get) {
    std::vector<Value> parts;
    for (const auto& o : outs) parts.push_back(get(o));
    return parts;
  };
  switch (v.kind()) {
    case Value::Kind::Tensor: {
      std::vector<Tensor> parts;
      std::optional<int64_t> nd;
      for (size_t i = 0; i < outs.size(); ++i) {
        const Tensor& t = outs[i].tensor();
        const OutCtx& c = cs[i];
        // t.dim() is the per-set rank (the level's tag is hidden)
        if (od) nd = check_dim("out_dim", *od, t.dim() + 1, c.index, t.shape());
        parts.push_back(finish_leaf(t, nd, c));
      }
      if (parts.size() == 1 || !od) return Value(parts[0]);
      return Value(cat(parts, *nd));
    }
    case Value::Kind::TensorDict: {
      const TensorDict& d = v.tensordict();
      std::optional<int64_t> nd;
      if (od) nd = check_dim("out_dim", *od, d.batch_dims() + 1, c0.index, d.batch_size());
      std::vector<TensorDict> parts;
      for (size_t i = 0; i < outs.size(); ++i) {
        const OutCtx& c = cs[i];
        const TensorDict& di = outs[i].tensordict();
        Shape bs = di.batch_size();
        if (nd) bs.insert(bs.begin() + *nd, c.n);
        parts.push_back(di.apply([&](const Tensor& t) { return finish_leaf(t, nd, c); }, bs));
      }
      if (parts.size() == 1 || !od) return Value(parts[0]);
      int64_t total = 0;
      for (const auto& c : cs) total += c.n;
      Shape bs = parts[0].batch_size();
      bs[*nd] = total;
      size_t leaf = 0;
      std::vector<std::vector<Tensor>> leaves;
      for (const auto& p : parts) {
        auto ls = p.leaves();
        if (leaves.empty()) leaves.resize(ls.size());
        for (size_t k = 0; k < ls.size(); ++k) leaves[k].push_back(ls[k].second);
      }
      return Value(parts[0].apply([&](const Tensor&) { return cat(leaves[leaf++], *nd); }, bs));
    }
    case Value::Kind::List: {
      ValueList out;
      for (size_t k = 0; k < v.list().size(); ++k)
        out.push_back(finish(per_chunk([&](const Value& o) { return o.list()[k]; }), od, cs));
      return Value(std::move(out));
    }
    case Value::Kind::Dict: {
      ValueDict out;
      for (const auto& [key, x] : v.dict().items())
        out.set(key, finish(per_chunk([&](const Value& o) { return o.dict().at(key); }), od, cs));
      return Value(std::move(out));
    }
    case Value::Kind::None:
      return v;
    default:
      // a number or string cannot carry the sets along a dim
      if (od)
        throw_error<ValueError>("[vmap] the function must only return Tensors, but output ",
                                c0.index, " is of type ", v.kind_name(), " with out_dims ", *od,
                                "; did you mean out_dims = None for that output?");
      return v;
  }
}

}  // namespace

Value vmap_call(const std::function<Value(const ValueList&)>& f, const ValueList& args,
                const VmapOptions& o) {
  return vmap_call(f, args, o, false);
}

Value vmap_call(const std::function<Value(const ValueList&)>& f, const ValueList& args,
                const VmapOptions& o, bool concurrent) {
  ensure_batch_rules();
  if (o.chunk_size && *o.chunk_size <= 0)
    throw_error<ValueError>("[vmap] chunk_size should be None or greater than 0 (got ",
                            *o.chunk_size, ")");
  std::vector<std::optional<int64_t>> in_dims = o.in_dims;
  if (in_dims.empty()) in_dims.assign(args.size(), 0);
  if (in_dims.size() != args.size())
    throw_error<ValueError>("[vmap] in_dims is not compatible with the structure of inputs: got ",
                            in_dims.size(), " in_dims for ", args.size(), " arguments");

  // the batch size: every mapped leaf must agree; a TensorDict's batch size counts even when it
  // holds no tensor (an ensemble of parameterless modules)
  struct Mapped {
    size_t arg;
    int64_t size, dim;
    Shape shape;
  };
  std::vector<Mapped> sizes;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!in_dims[i]) continue;
    const int64_t in_dim = *in_dims[i];
    auto collect = [&](const Value& v, auto&& self) -> void {
      const ValueDepthGuard depth;
      switch (v.kind()) {
        case Value::Kind::Tensor: {
          const Tensor& t = v.tensor();
          const int64_t d = check_dim("in_dim", in_dim, t.dim(), i, t.shape());
          sizes.push_back({i, t.size(d), d, t.shape()});
          return;
        }
        case Value::Kind::TensorDict: {  // its leaves share its batch dims
          const TensorDict& td = v.tensordict();
          const int64_t d = check_dim("in_dim", in_dim, td.batch_dims(), i, td.batch_size());
          sizes.push_back({i, td.batch_size()[d], d, td.batch_size()});
          return;
        }
        case Value::Kind::List:
          for (const auto& e : v.list()) self(e, self);
          return;
        case Value::Kind::Dict:
          for (const auto& [k, e] : v.dict().items()) self(e, self);
          return;
        default:
          return;
      }
    };
    // an in_dim given for a number, string or None is refused, as torch does; the default
    // in_dims pass such arguments through (C++ callers' extra arguments), and so do containers
    // for their non-tensor leaves (functional_vmap's documented behaviour)
    const Value::Kind kind = args[i].kind();
    if (!o.in_dims.empty() && kind != Value::Kind::Tensor && kind != Value::Kind::TensorDict &&
        kind != Value::Kind::List && kind != Value::Kind::Dict)
      throw_error<ValueError>("[vmap] got in_dim=", in_dim, " for argument ", i, " of type ",
                              args[i].kind_name(),
                              ": only Tensor and TensorDict inputs can be mapped; give it "
                              "std::nullopt as its in_dim");
    collect(args[i], collect);
  }
  if (sizes.empty())
    throw_error<ValueError>(
        "[vmap] at least one input must be batched (in_dims are all None, or no argument with an "
        "in_dim holds a tensor or a TensorDict)");
  int64_t batch = sizes[0].size;
  for (const auto& m : sizes) {
    if (m.size == batch) continue;
    std::ostringstream os;
    for (size_t k = 0; k < sizes.size(); ++k)
      os << (k ? ", " : "") << sizes[k].size << " (argument " << sizes[k].arg << " of shape "
         << shape_str(sizes[k].shape) << " at dim " << sizes[k].dim << ")";
    throw_error<ValueError>(
        "[vmap] expected all tensors to have the same size in the mapped dimension, got sizes ",
        os.str());
  }

  // chunks: [c]*(B/c) + [B%c]; a batch of size 0 still runs once
  int64_t c = o.chunk_size ? *o.chunk_size : std::max<int64_t>(batch, 1);
  // each chunk keeps its outputs and bookkeeping until they are joined: refuse 10^9 chunks up
  // front rather than run out of memory on the way
  check_memory_budget("vmap", std::max<int64_t>(batch / c + (batch % c != 0), 1), kChunkBytes,
                      "chunks of sets");
  std::vector<std::pair<int64_t, int64_t>> chunks;
  for (int64_t s = 0; s < batch; s += c) chunks.emplace_back(s, std::min(c, batch - s));
  if (chunks.empty()) chunks.emplace_back(0, 0);
  bool chunked = chunks.size() > 1;

  const RngState saved = rng_state();
  RngState after_first = saved;
  std::vector<Value> outs(chunks.size());
  std::vector<OutCtx> cs;
  for (const auto& [start, n] : chunks) cs.push_back({0, n, 0});
  auto run_chunk = [&](size_t k) {
    const auto [start, n] = chunks[k];
    set_rng_state(saved);  // each set's draws do not depend on the chunking
    VmapLevelScope scope(n, o.randomness, start);
    const int64_t lv = scope.level();
    cs[k].level = lv;
    ValueList inner;
    for (size_t i = 0; i < args.size(); ++i) {
      if (!in_dims[i]) {
        inner.push_back(args[i]);
        continue;
      }
      inner.push_back(map_in(
          args[i], *in_dims[i], i,
          [&](const Tensor& t, int64_t d) {
            return chunked ? add_batch_tag(t, lv, d, start, n) : add_batch_tag(t, lv, d);
          },
          true));
    }
    outs[k] = f(inner);
    if (k == 0) after_first = rng_state();
  };
  // a failing call leaves the generator as it was, as it leaves everything else
  struct RestoreRng {
    const RngState& state;
    int exceptions = std::uncaught_exceptions();
    ~RestoreRng() {
      if (std::uncaught_exceptions() > exceptions) set_rng_state(state);
    }
  } restore_rng{saved};
  if (concurrent && chunked && num_threads() > 1) {
    parallel_claim(static_cast<int64_t>(chunks.size()), 1, [&](int64_t begin, int64_t end) {
      SerialScope serial;
      for (int64_t k = begin; k < end; ++k) run_chunk(static_cast<size_t>(k));
    });
  } else {
    for (size_t k = 0; k < chunks.size(); ++k) run_chunk(k);
  }
  set_rng_state(after_first);

  // outputs: out_dims per top-level output
  auto output = [&](size_t j) {
    for (auto& c : cs) c.index = j;
    return cs;
  };
  const Value& first = outs[0];
  if (o.out_dims.size() > 1) {
    if (!first.is_list() || first.list().size() != o.out_dims.size())
      throw_error<ValueError>(
          "[vmap] out_dims is not compatible with the structure of the "
          "outputs: got ",
          o.out_dims.size(), " out_dims for ", first.is_list() ? first.list().size() : 1,
          " outputs");
    ValueList out;
    for (size_t j = 0; j < o.out_dims.size(); ++j) {
      std::vector<Value> parts;
      for (const auto& v : outs) parts.push_back(v.list()[j]);
      out.push_back(finish(parts, o.out_dims[j], output(j)));
    }
    return Value(std::move(out));
  }
  std::optional<int64_t> od = o.out_dims.empty() ? std::optional<int64_t>(0) : o.out_dims[0];
  if (first.is_list() && !first.list().empty()) {
    ValueList out;
    for (size_t j = 0; j < first.list().size(); ++j) {
      std::vector<Value> parts;
      for (const auto& v : outs) parts.push_back(v.list()[j]);
      out.push_back(finish(parts, od, output(j)));
    }
    return Value(std::move(out));
  }
  return finish(outs, od, output(0));
}

}  // namespace td
