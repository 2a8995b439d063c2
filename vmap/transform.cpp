#include "vmap/transform.h"

#include <algorithm>
#include <exception>
#include <mutex>
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
int64_t check_dim(const char* what, int64_t d, int64_t ndim, const DimsPath& path,
                  const Shape& shape) {
  if (d < -ndim || d >= ndim)
    throw_error<IndexError>("[vmap] ", what, " ", d, " is out of range for ", path.str(),
                            " of shape ", shape_str(shape), "; expected -ndim <= ", what,
                            " < ndim with ndim = ", ndim);
  return d < 0 ? d + ndim : d;
}

// One chunk's output: its level (chunks run concurrently have their own) and batch size.
struct OutCtx {
  int64_t level;
  int64_t n;
};

// Removes the level's tag from a leaf and puts the batch dim at out_dim (a leaf that does not
// depend on the sets is expanded with stride 0). `od` is already normalised.
Tensor finish_leaf(const Tensor& t, std::optional<int64_t> od, const OutCtx& c,
                   const DimsPath& path) {
  Batched b = remove_batch_tag(t, c.level);
  if (!od) {
    if (b.bdim)
      throw_error<ValueError>("[vmap] out_dims is None for ", path.str(),
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

// One leaf of one chunk's output, finished: a Tensor's or TensorDict's batch dim at out_dim.
Value finish_value(const Value& v, std::optional<int64_t> od, const OutCtx& c,
                   const DimsPath& path) {
  switch (v.kind()) {
    case Value::Kind::Tensor: {
      const Tensor& t = v.tensor();
      std::optional<int64_t> nd;  // t.dim() is the per-set rank (the level's tag is hidden)
      if (od) nd = check_dim("out_dim", *od, t.dim() + 1, path, t.shape());
      return finish_leaf(t, nd, c, path);
    }
    case Value::Kind::TensorDict: {
      const TensorDict& d = v.tensordict();
      std::optional<int64_t> nd;
      if (od) nd = check_dim("out_dim", *od, d.batch_dims() + 1, path, d.batch_size());
      Shape bs = d.batch_size();
      if (nd) bs.insert(bs.begin() + *nd, c.n);
      return d.apply([&](const Tensor& t) { return finish_leaf(t, nd, c, path); }, bs);
    }
    case Value::Kind::None:
      return v;
    default:
      // a number or string cannot carry the sets along a dim
      if (od)
        throw_error<ValueError>("[vmap] the function must only return Tensors, but ", path.str(),
                                " is of type ", v.kind_name(), " with out_dims ", *od,
                                "; did you mean out_dims = None for that output?");
      return v;
  }
}

// The chunks' parts of one finished leaf, concatenated along its out_dim.
Value cat_chunks(const std::vector<Value>& parts, std::optional<int64_t> od) {
  const Value& v = parts[0];
  if (parts.size() == 1 || !od) return v;
  if (v.is_tensor()) {
    std::vector<Tensor> ts;
    for (const auto& p : parts) ts.push_back(p.tensor());
    return cat(ts, *od < 0 ? *od + v.tensor().dim() : *od);
  }
  if (!v.is_tensordict()) return v;
  const TensorDict& d0 = v.tensordict();
  const int64_t nd = *od < 0 ? *od + d0.batch_dims() : *od;
  Shape bs = d0.batch_size();
  bs[nd] = 0;
  std::vector<std::vector<Tensor>> leaves;
  for (const auto& p : parts) {
    bs[nd] += p.tensordict().batch_size()[nd];
    auto ls = p.tensordict().leaves();
    if (leaves.empty()) leaves.resize(ls.size());
    for (size_t k = 0; k < ls.size(); ++k) leaves[k].push_back(ls[k].second);
  }
  size_t leaf = 0;
  return d0.apply([&](const Tensor&) { return cat(leaves[leaf++], nd); }, bs);
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
  if (args.empty())
    throw_error<ValueError>(
        "[vmap] got no inputs: a function without arguments has nothing to "
        "map over");
  DimsList in_dims = o.in_dims;
  const bool defaults = in_dims.empty();
  if (defaults) in_dims.assign(args.size(), Dims(0));
  if (in_dims.size() != args.size())
    throw_error<ValueError>("[vmap] in_dims is not compatible with the structure of inputs: got ",
                            in_dims.size(), " in_dims for ", args.size(), " arguments");
  auto arg_path = [](size_t i) {
    return DimsPath{.index = i,
                    .label = "argument",
                    .mismatch = "[vmap] in_dims is not compatible with the structure of inputs"};
  };

  // the batch size: every mapped leaf must agree; a TensorDict's batch size counts even when it
  // holds no tensor (an ensemble of parameterless modules). Each mapped leaf's size, or with
  // `where`, also its place for the message.
  std::vector<int64_t> sizes;
  auto collect = [&](std::vector<std::string>* where) {
    for (size_t i = 0; i < args.size(); ++i) {
      zip_dims(
          args[i], in_dims[i], arg_path(i),
          [&](const Value& v, std::optional<int64_t> dim, const DimsPath& path, bool named) {
            if (!dim) return;
            const bool is_td = v.is_tensordict();
            if (!v.is_tensor() && !is_td) {
              // an in_dim given for a number, string or None is refused, as torch does; the
              // default in_dims pass such arguments through (C++ callers' extra arguments),
              // and a dim given for a list or dict passes its other leaves to every set
              if (named)
                throw_error<ValueError>(
                    "[vmap] got in_dim=", *dim, " for ", path.str(), " of type ", v.kind_name(),
                    ": only Tensor and TensorDict inputs can be mapped; give it "
                    "std::nullopt as its in_dim");
              return;
            }
            const Shape& shape = is_td ? v.tensordict().batch_size() : v.tensor().shape();
            const int64_t d =
                check_dim("in_dim", *dim, static_cast<int64_t>(shape.size()), path, shape);
            sizes.push_back(shape[d]);
            if (where)
              where->push_back(detail::cat_str(shape[d], " (", path.str(), " of shape ",
                                               shape_str(shape), " at dim ", d, ")"));
          },
          !defaults);
    }
  };
  collect(nullptr);
  if (sizes.empty())
    throw_error<ValueError>(
        "[vmap] at least one input must be batched (in_dims are all None, or no argument with an "
        "in_dim holds a tensor or a TensorDict)");
  const int64_t batch = sizes[0];
  if (std::any_of(sizes.begin(), sizes.end(), [&](int64_t n) { return n != batch; })) {
    std::vector<std::string> where;
    collect(&where);
    std::string list;
    for (const auto& w : where) list += (list.empty() ? "" : ", ") + w;
    throw_error<ValueError>(
        "[vmap] expected all tensors to have the same size in the mapped dimension, got sizes ",
        list);
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
  for (const auto& [start, n] : chunks) cs.push_back({0, n});
  std::mutex progress_mutex;
  int64_t sets_done = 0;
  auto run_chunk = [&](size_t k) {
    const int64_t start = chunks[k].first,
                  n = chunks[k].second;  // not a binding: clang 14 cannot capture one
    set_rng_state(saved);                // each set's draws do not depend on the chunking
    VmapLevelScope scope(n, o.randomness, o.set_offset + start);
    const int64_t lv = scope.level();
    cs[k].level = lv;
    ValueList inner;
    for (size_t i = 0; i < args.size(); ++i) {
      if (in_dims[i].is_dim() && !in_dims[i].dim()) {
        inner.push_back(args[i]);  // shared: passed as it is
        continue;
      }
      inner.push_back(
          zip_dims(args[i], in_dims[i], arg_path(i),
                   [&](const Value& v, std::optional<int64_t> dim, const DimsPath&, bool) -> Value {
                     auto tag = [&](const Tensor& t, int64_t d) {
                       return chunked ? add_batch_tag(t, lv, d, start, n) : add_batch_tag(t, lv, d);
                     };
                     if (!dim) return v;
                     if (v.is_tensor()) {
                       const Tensor& t = v.tensor();
                       return tag(t, *dim < 0 ? *dim + t.dim() : *dim);
                     }
                     if (!v.is_tensordict()) return v;
                     const TensorDict& d = v.tensordict();
                     const int64_t nd = *dim < 0 ? *dim + d.batch_dims() : *dim;
                     Shape bs = d.batch_size();
                     bs.erase(bs.begin() + nd);
                     return d.apply([&](const Tensor& t) { return tag(t, nd); }, bs);
                   }));
    }
    outs[k] = f(inner);
    if (k == 0) after_first = rng_state();
    if (o.progress) {
      std::lock_guard<std::mutex> lock(progress_mutex);
      o.progress(sets_done += n);
    }
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

  // outputs: each chunk's leaves finished in walk order, then the chunks' parts concatenated
  const Value& first = outs[0];
  const Dims* od = &o.out_dims;
  // torch's edge case: a single output takes out_dims (d,) as d
  if (!first.is_list() && od->kind() == Dims::Kind::List && od->list().size() == 1)
    od = &od->list()[0];
  const DimsPath root{
      .label = "output",
      .mismatch = "[vmap] out_dims is not compatible with the structure of the outputs",
      .children_are_roots = first.is_list()};
  std::vector<std::vector<Value>> done(outs.size());
  for (size_t k = 0; k < outs.size(); ++k) {
    zip_dims(outs[k], *od, root,
             [&](const Value& v, std::optional<int64_t> dim, const DimsPath& path, bool) {
               done[k].push_back(finish_value(v, dim, cs[k], path));
             });
    if (done[k].size() != done[0].size())
      throw_error<ValueError>("[vmap] the function returned ", done[0].size(), " leaves for ",
                              "the first chunk of sets but ", done[k].size(), " for chunk ", k);
  }
  size_t leaf = 0;
  return zip_dims(first, *od, root,
                  [&](const Value&, std::optional<int64_t> dim, const DimsPath&, bool) -> Value {
                    std::vector<Value> parts;
                    for (auto& d : done) parts.push_back(std::move(d[leaf]));
                    ++leaf;
                    return cat_chunks(parts, dim);
                  });
}

}  // namespace td
