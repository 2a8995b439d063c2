// tdvmap run: builds a module from a spec, loads stacked parameters (one file, or per-member
// files stacked on load) and inputs from safetensors or NumPy files, runs functional_vmap and
// writes the outputs as safetensors (or .npz). Started by mpirun with several ranks, each rank
// loads and computes only its share of the sets (td::mpi).
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/limits.h"
#include "modules/modules.h"
#include "modules/numpy_files.h"
#include "tools/tdvmap/common.h"
#include "tools/tdvmap/member_files.h"
#include "tools/tdvmap/model_spec.h"
#include "tools/tdvmap/progress.h"
#include "tools/tdvmap/run_args.h"
#include "tools/tdvmap/scoring.h"
#include "vmap/functional_vmap.h"
#include "vmap/transform.h"
#ifdef TD_HAVE_MPI
#include "vmap/distributed.h"
#endif

namespace tdvmap {
namespace {

using td::Shape;
using td::Tensor;
using td::TensorDict;
namespace nn = td::nn;

struct RunOptions {
  std::string model;
  std::vector<std::string> params;   // one stacked file, or per-member files / a directory
  std::string params_key;            // the state_dict's entry in .pt checkpoint dicts
  std::vector<std::string> inputs;   // NAME=FILE (or FILE: NAME = input)
  std::vector<std::string> in_dims;  // NAME=D
  bool train = false;
  std::string randomness = "error";
  std::optional<int64_t> chunk_size;
  std::optional<std::string> method;
  bool loop = false;
  uint64_t seed = 0;
  std::string out;
  bool quiet = false;
  std::string loss;  // scores each set's output against --target
  std::string target;
  std::string loss_reduction = "mean";
  std::optional<int64_t> target_in_dim;
  bool verbose = false;
  bool out_shards = false;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The keys and shapes of a parameter file, in its order.
using Entries = std::vector<std::pair<std::string, Shape>>;
Entries entries_of(const TensorDict& file) {
  Entries out;
  for (const auto& [key, t] : file.leaves()) out.emplace_back(key, t.shape());
  return out;
}

// The sets' shape of a parameter file, checked against the module: every leaf must be
// [batch..., per-set shape...] with one batch shape for all (errors naming key and shapes).
Shape params_batch(const TensorDict& expected, const Entries& file, const std::string& what) {
  std::map<std::string, const Shape*> shapes;
  for (const auto& [key, shape] : file) shapes.emplace(key, &shape);
  std::optional<Shape> batch;
  std::string batch_key;
  for (const auto& [key, t] : expected.leaves()) {
    const auto found = shapes.find(key);
    if (found == shapes.end()) {
      std::string have;
      for (size_t i = 0; i < file.size() && i < 20; ++i)  // a huge file is not listed whole
        have += (have.empty() ? "" : ", ") + td::quote_key(file[i].first);
      if (file.size() > 20) have += ", ... (" + std::to_string(file.size()) + " keys)";
      td::throw_error<td::KeyError>(
          "params ", what, " has no '", key, "' (the model's parameter of per-set shape ",
          shape_text(t.shape()), "); it has: ", have.empty() ? "nothing" : have);
    }
    const Shape& want = t.shape();
    const Shape& got = *found->second;
    const bool fits =
        got.size() >= want.size() &&
        std::equal(want.begin(), want.end(), got.end() - static_cast<int64_t>(want.size()));
    if (!fits)
      td::throw_error<td::ValueError>("parameter '", key, "' has shape ", shape_text(got),
                                      " in params ", what, " but the model needs [sets..., ",
                                      want.empty() ? "]" : shape_text(want).substr(1));
    Shape b(got.begin(), got.end() - static_cast<int64_t>(want.size()));
    if (batch && *batch != b)
      td::throw_error<td::ValueError>("parameter '", key, "' has shape ", shape_text(got),
                                      " (sets ", shape_text(b), ") but '", batch_key, "' has sets ",
                                      shape_text(*batch), " in params ", what);
    if (!batch) {
      batch = b;
      batch_key = key;
    }
  }
  for (const auto& [key, shape] : file) {
    if (expected.contains(key)) continue;
    // PyTorch's BatchNorm counter; td keeps no such buffer when it has none.
    if (ends_with(key, "num_batches_tracked")) continue;
    td::throw_error<td::KeyError>("params ", what, " has ", td::quote_key(key),
                                  ", which the model has no parameter or buffer for");
  }
  return batch.value_or(Shape{});
}

// The model's parameters and buffers out of a checked file, with batch size `batch`.
TensorDict model_params(const TensorDict& expected, const TensorDict& file, const Shape& batch) {
  TensorDict params(batch);
  for (const auto& [key, t] : expected.leaves()) params.set(key, file.get(key));
  return params;
}

// This rank's part of the ensemble under mpirun: the whole ensemble's sets and its own.
struct Shard {
  int rank = 0, ranks = 1;
  Shape batch;        // the whole ensemble's batch size
  td::SetRange sets;  // this rank's, over the flattened batch
};

// Loads the stacked parameters, checked against the module. One file holds them stacked;
// several files (or a directory) are members, stacked on load. With `shard`, only the rank's
// sets: from a safetensors file only their bytes, from members only their files (a .pt file is
// read whole and sliced); shard->batch and shard->sets are filled in, the result's batch size is
// [its sets].
TensorDict load_params(const nn::Module& model, const std::vector<std::string>& args,
                       const std::string& params_key, Shard* shard = nullptr) {
  const TensorDict expected = TensorDict::from_module(model);
  std::error_code ec;
  const bool one_file = args.size() == 1 && !std::filesystem::is_directory(args[0], ec);
  const std::vector<std::string> paths = one_file ? args : member_files(args);
  // what the messages call the params: "file 'x'" or "files 'a' ... 'c' (3 members)"
  const std::string what = one_file ? "file '" + paths[0] + "'"
                                    : "files '" + paths[0] + "' ... '" + paths.back() + "' (" +
                                          std::to_string(paths.size()) + " members)";
  auto own_sets = [&](const Shape& batch) {
    shard->batch = batch;
    shard->sets = nn::shard_sets(td::shape_numel(batch), shard->rank, shard->ranks);
    return shard->sets;
  };
  if (!shard) {
    const TensorDict file = one_file ? TensorDict::load_file(paths[0], {params_key})
                                     : TensorDict::load_stacked(paths, {.key = params_key});
    return model_params(expected, file, params_batch(expected, entries_of(file), what));
  }
  if (!one_file) {  // members: a rank without any reads the first to know their structure
    const td::SetRange mine = own_sets({static_cast<int64_t>(paths.size())});
    const std::vector<std::string> own =
        mine.size() > 0
            ? std::vector<std::string>(paths.begin() + mine.begin, paths.begin() + mine.end)
            : std::vector<std::string>{paths[0]};
    TensorDict file = TensorDict::load_stacked(own, {.key = params_key});
    params_batch(expected, entries_of(file), what);
    if (mine.size() == 0) file = file.slice(0, 0);
    return model_params(expected, file, {mine.size()});
  }
  if (!TensorDict::is_torch_file(paths[0])) {
    const Shape batch = params_batch(expected, TensorDict::safetensors_entries(paths[0]), what);
    const td::SetRange mine = own_sets(batch);
    if (batch.empty()) return model_params(expected, TensorDict::load_safetensors(paths[0]), batch);
    return model_params(expected, TensorDict::load_safetensors(paths[0], mine, batch),
                        {mine.size()});
  }
  const TensorDict file = TensorDict::load_file(paths[0], {params_key});
  const Shape batch = params_batch(expected, entries_of(file), what);
  const td::SetRange mine = own_sets(batch);
  if (batch.empty()) return model_params(expected, file, batch);
  const TensorDict flat = model_params(expected, file, batch).flatten_batch();
  return flat.slice(mine.begin, mine.end).clone();
}

// What a per-set input of a rank under mpirun holds: the rank's sets, at `dim`.
struct InputSets {
  const Shard& shard;
  int64_t dim;
};

// The rank's sets at dims [dim, dim + nb) of input tensor `key`, read whole, flattened to one dim.
Tensor narrow_sets(const std::string& key, const Tensor& t, const InputSets& s) {
  const int64_t nb = static_cast<int64_t>(s.shard.batch.size());
  const int64_t d = s.dim < 0 ? s.dim + t.dim() : s.dim;  // as functional_vmap's in_dims
  if (d < 0 || d > t.dim() - nb ||
      Shape(t.shape().begin() + d, t.shape().begin() + d + nb) != s.shard.batch)
    td::throw_error<td::ValueError>("input '", key, "' has shape ", shape_text(t.shape()),
                                    ", which does not hold the sets ", shape_text(s.shard.batch),
                                    " at dim ", s.dim);
  return t.flatten(d, d + nb - 1).narrow(d, s.shard.sets.begin, s.shard.sets.size()).clone();
}

// One input from a safetensors or .npz file (or the array of an .npy file): its only entry, the
// entry called name, or a tuple when the keys are "0", "1", ... (an LSTM's hx = (h_0, c_0)), as
// `run --out` writes a tuple. With `sets`, only the rank's sets of a per-set input: of a
// safetensors or .npy file only their bytes (a negative dim reads the file whole).
td::Value load_input(const std::string& name, const std::string& path,
                     const std::optional<InputSets>& sets = std::nullopt) {
  const bool npy = ends_with(path, ".npy"), npz = ends_with(path, ".npz");
  TensorDict file;
  if (sets && sets->dim >= 0 && !npz) {
    const Shard& sh = sets->shard;
    const int64_t nb = static_cast<int64_t>(sh.batch.size()), total = td::shape_numel(sh.batch);
    if (npy) return td::load_npy_input(path, sh.sets, total, sets->dim, nb);
    file = TensorDict::load_safetensors_input(path, sh.sets, total, sets->dim, nb);
  } else if (npy) {
    const Tensor t = td::load_npy(path);
    return sets ? narrow_sets("input", t, *sets) : t;
  } else {
    file = npz ? td::load_npz(path) : TensorDict::load_safetensors(path);
    if (sets) {
      TensorDict narrowed;
      for (const auto& [key, t] : file.leaves()) narrowed.set(key, narrow_sets(key, t, *sets));
      file = std::move(narrowed);
    }
  }
  const auto leaves = file.leaves();
  if (leaves.size() == 1) return leaves[0].second;
  if (file.contains(name)) return file.get(name);
  td::ValueList tuple;
  while (file.contains(std::to_string(tuple.size())))
    tuple.push_back(file.get(std::to_string(tuple.size())));
  if (!tuple.empty() && tuple.size() == leaves.size()) return td::Value(std::move(tuple));
  td::throw_error<td::ValueError>("input file '", path, "' holds ", leaves.size(),
                                  " tensors and none called '", name,
                                  "'; give one tensor, one named after the input, or a tuple "
                                  "keyed 0, 1, ...");
}

// Collects the output's tensors under safetensors keys: "output" for a tensor, positions for a
// list, names for a dict, dotted paths for nesting; None is skipped.
void collect(const td::Value& v, const std::string& key, TensorDict& out) {
  using K = td::Value::Kind;
  const auto sub = [&](const std::string& k) { return key == "output" ? k : key + "." + k; };
  switch (v.kind()) {
    case K::Tensor:
      out.set(key, v.tensor().contiguous());
      break;
    case K::List:
      for (size_t i = 0; i < v.list().size(); ++i)
        collect(v.list()[i], sub(std::to_string(i)), out);
      break;
    case K::Dict:
      for (const auto& [k, item] : v.dict().items()) collect(item, sub(k), out);
      break;
    case K::TensorDict:
      for (const auto& [k, t] : v.tensordict().leaves()) out.set(sub(k), t.contiguous());
      break;
    case K::None:
      break;
    default:
      std::cerr << "tdvmap: warning: output '" << key << "' is a " << v.kind_name()
                << ", not a tensor; not written\n";
  }
}

// Each set's loss of its output against the target (shared, or per set at --target-in-dim), in
// one batched call: [sets...] for a reduced loss, [sets..., per-set shape] for "none".
Tensor score(const RunOptions& o, const Shape& sets, const td::Value& result, Tensor t) {
  if (!result.is_tensor())
    td::throw_error<td::ValueError>("--loss ", o.loss, " needs a tensor output, got a ",
                                    result.kind_name());
  const LossFn fn = loss_function(o.loss);
  const std::string reduction = o.loss_reduction;
  const int64_t nb = static_cast<int64_t>(sets.size());
  Tensor y = result.tensor();
  if (nb == 0) return fn(y, t, reduction);
  if (nb > 1) y = y.flatten(0, nb - 1);  // one dim of sets for vmap
  std::optional<int64_t> tdim = o.target_in_dim;
  if (tdim && nb > 1) {
    const int64_t d = td::normalize_dim("--target-in-dim", *tdim, t.dim());
    t = t.flatten(d, d + nb - 1);
    tdim = d;
  }
  auto per_set = td::vmap([&](Tensor ys, Tensor ts) { return fn(ys, ts, reduction); },
                          {.in_dims = {td::Dims(0), td::Dims(tdim)}});
  Tensor loss = per_set(y, t);
  if (nb > 1) loss = loss.unflatten(0, sets);
  return loss;
}

// The file a rank writes with --out-shards: OUT with ".rankR" before its extension.
std::string shard_path(const std::string& out, int rank) {
  const std::filesystem::path p(out);
  std::filesystem::path name = p.stem();
  name += ".rank" + std::to_string(rank);
  name += p.extension();
  return (p.parent_path() / name).string();
}

void write_out(const TensorDict& out, const std::string& path) {
  if (ends_with(path, ".npz"))
    td::save_npz(out, path);
  else
    out.save_safetensors(path);
}

// The peak resident memory of this process so far, in MiB.
double peak_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

// --verbose: which sets this rank computed, and its peak memory.
void say_sets(const RunOptions& o, int rank, int ranks, td::SetRange sets) {
  if (!o.verbose) return;
  std::ostringstream line;
  line << "rank " << rank << " of " << ranks << ": sets [" << sets.begin << ", " << sets.end
       << "), peak memory " << std::fixed << std::setprecision(1) << peak_mib() << " MiB\n";
  std::cerr << line.str() << std::flush;
}

// What both kinds of run share: the options, the model.
struct Setup {
  nn::FunctionalVmapOptions options;
  RunInputs parsed;
  std::shared_ptr<nn::Module> model;
};
Setup set_up(const RunOptions& o) {
  td::manual_seed(o.seed);
  Setup s;
  s.options.randomness = td::parse_randomness(o.randomness);
  s.options.chunk_size = o.chunk_size;
  s.options.method = o.method;
  s.options.loop = o.loop;
  s.parsed = parse_run_inputs(o.inputs, o.in_dims);
  s.options.in_dims = s.parsed.in_dims;
  s.model = build_model(o.model);  // SpecError: exit 2
  s.model->train(o.train);
  return s;
}

Tensor one_tensor(const td::Value& t, const std::string& path) {
  if (!t.is_tensor())
    td::throw_error<td::ValueError>("--target file '", path, "' must hold one tensor");
  return t.tensor();
}

// functional_vmap's error about randomness, with the flag that answers it.
template <class F>
td::Value run_vmap(const nn::FunctionalVmapOptions& options, F&& call) {
  try {
    return call();
  } catch (const td::RuntimeError& e) {
    if (options.randomness != td::Randomness::Error ||
        std::string(e.what()).find("randomness") == std::string::npos)
      throw;
    td::throw_error<td::RuntimeError>(e.what(), " (tdvmap: give --randomness different or same)");
  }
}

#ifdef TD_HAVE_MPI
// Started by mpirun with several ranks: each rank loads and computes only its sets; rank 0
// gathers and writes the outputs (or each rank writes its own, --out-shards). Every failure is
// agreed on by all ranks (dist::collectively), so that all exit alike and none waits forever.
int run_sharded(const RunOptions& o) {
  const td::dist::Communicator comm;
  Setup s = set_up(o);  // its errors are every rank's alike: no collective needed
  Shard shard{comm.rank(), comm.size(), {}, {}};
  Tensor target;
  td::dist::collectively(comm, [&] {
    s.options.params = load_params(*s.model, o.params, o.params_key, &shard);
    auto per_set = [&](std::optional<int64_t> dim) -> std::optional<InputSets> {
      if (!dim || shard.batch.empty()) return std::nullopt;
      return InputSets{shard, *dim};
    };
    for (const auto& [name, path] : s.parsed.inputs) {
      const auto dim = s.parsed.in_dims.find(name);
      s.options.kwargs.set(
          name, load_input(name, path,
                           per_set(dim == s.parsed.in_dims.end() ? std::nullopt
                                                                 : std::optional(dim->second))));
    }
    if (!o.loss.empty())
      target = one_tensor(load_input("target", o.target, per_set(o.target_in_dim)), o.target);
  });
  if (comm.rank() == 0 && !o.quiet && isatty(STDERR_FILENO)) {
    auto line = std::make_shared<ProgressLine>(stderr);
    s.options.progress = [line](int64_t done, int64_t total) { line->update(done, total); };
  }
  const bool sets = !shard.batch.empty();
  const td::Value result = run_vmap(s.options, [&] {
    return td::dist::functional_vmap(
        comm, *s.model, s.options,
        {.gather = td::dist::Gather::None,
         .batch_size = sets ? std::optional(shard.batch) : std::nullopt});
  });
  const Shape local_sets = sets ? Shape{shard.sets.size()} : Shape{};
  TensorDict local(local_sets);
  td::dist::collectively(comm, [&] {
    collect(result, "output", local);
    if (!o.loss.empty()) local.set("loss", score(o, local_sets, result, target));
    if (o.out_shards) write_out(local, shard_path(o.out, comm.rank()));
  });
  if (!o.out_shards) {
    const TensorDict whole =
        sets ? td::dist::gather_sets(comm, local, shard.batch, td::dist::Gather::Root) : local;
    td::dist::collectively(comm, [&] {
      if (comm.rank() != 0) return;
      TensorDict out;  // no batch size: the bytes of a one-process run's file
      for (const auto& [key, t] : whole.leaves()) out.set(key, t);
      write_out(out, o.out);
    });
  }
  say_sets(o, comm.rank(), comm.size(), sets ? shard.sets : td::SetRange{0, 0});
  return 0;
}
#endif

int run_run(const RunOptions& o) {
  const LaunchedRanks launched = launched_ranks();
  if (launched.size > 1) {
#ifdef TD_HAVE_MPI
    return run_sharded(o);
#else
    throw UsageError("started as rank " + std::to_string(launched.rank) + " of " +
                     std::to_string(launched.size) +
                     " by an MPI launcher, but this tdvmap was built without MPI (td::mpi): run "
                     "it as one process, or build td where MPI is installed (libopenmpi-dev)");
#endif
  }
  Setup s = set_up(o);
  nn::FunctionalVmapOptions& options = s.options;
  options.params = load_params(*s.model, o.params, o.params_key);
  for (const auto& [name, path] : s.parsed.inputs) options.kwargs.set(name, load_input(name, path));
  Tensor target;  // read before the run, so that a bad file fails early
  if (!o.loss.empty()) target = one_tensor(load_input("target", o.target), o.target);

  // a long run shows its progress on a terminal; a pipe or a file gets none
  if (!o.quiet && isatty(STDERR_FILENO)) {
    auto line = std::make_shared<ProgressLine>(stderr);
    options.progress = [line](int64_t done, int64_t total) { line->update(done, total); };
  }
  const td::Value result =
      run_vmap(options, [&] { return nn::functional_vmap(*s.model, options); });
  TensorDict out;
  collect(result, "output", out);
  if (!o.loss.empty()) out.set("loss", score(o, options.params.batch_size(), result, target));
  write_out(out, o.out_shards ? shard_path(o.out, 0) : o.out);
  say_sets(o, 0, 1, {0, td::shape_numel(options.params.batch_size())});
  return 0;
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand(
      "run",
      "Run a module over stacked parameters (a safetensors or .pt file, or per-member files "
      "stacked on load; eval mode unless --train) and write its outputs");
  sub->add_option("--model", o->model,
                  "Module spec with PyTorch's constructor arguments, e.g. "
                  "'Sequential(Linear(64,256), ReLU(), Dropout(0.1), Linear(256,10))'")
      ->required();
  sub->add_option("--params", o->params,
                  "Stacked parameters and buffers (dotted keys as in named_parameters, leading "
                  "dims = sets), e.g. torch.func.stack_module_state or TensorDict.from_modules "
                  "saved as safetensors; or several per-member files (torch.save state_dicts "
                  "or safetensors, or a directory of them in name order) stacked as sets 0, 1, "
                  "...")
      ->required()
      ->expected(1, -1);
  sub->add_option("--params-key", o->params_key,
                  "The state_dict's entry in .pt checkpoints that hold a dict such as "
                  "{'model': state_dict, 'epoch': 3} (default: the one dict of tensors)");
  sub->add_option(
         "--input", o->inputs,
         "NAME=FILE.safetensors: a forward argument (one tensor, one keyed NAME, or a tuple "
         "keyed 0, 1, ...); "
         "shared by every set unless --in-dim names it")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--in-dim", o->in_dims, "NAME=D: input NAME holds one slice per set at dim D")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_flag("--train", o->train, "Training mode (BatchNorm batch stats, Dropout on)");
  sub->add_option("--randomness", o->randomness, "error | different | same")
      ->capture_default_str()
      ->check(CLI::IsMember({"error", "different", "same"}));
  sub->add_option("--chunk-size", o->chunk_size, "Sets computed at once")
      ->check(whole_number())
      ->check(CLI::PositiveNumber);
  sub->add_option("--method", o->method, "Call this registered method instead of forward");
  sub->add_flag("--loop", o->loop, "Call the sets one at a time");
  sub->add_option("--seed", o->seed, "Random seed")
      ->capture_default_str()
      ->check(unsigned_number());
  sub->add_flag("--quiet", o->quiet,
                "No progress line (shown on stderr when it is a terminal: sets done, rate, time "
                "left)");
  sub->add_option("--out", o->out,
                  "Output safetensors file (.npz: NumPy's): 'output', or '0','1',... for a "
                  "tuple, or the dict's keys")
      ->required();
  auto* loss = sub->add_option("--loss", o->loss,
                               "Also write 'loss': each set's loss of the output against "
                               "--target (torch.nn.functional's, default options)")
                   ->check(CLI::IsMember(loss_names()));
  sub->add_option("--target", o->target,
                  "The loss's target: a safetensors, .npy or .npz file of one tensor (class "
                  "indices int64), shared by every set unless --target-in-dim")
      ->needs(loss);
  loss->needs(sub->get_option("--target"));
  sub->add_option("--loss-reduction", o->loss_reduction, "mean | sum | none | batchmean (kl_div)")
      ->capture_default_str()
      ->check(CLI::IsMember({"mean", "sum", "none", "batchmean"}))
      ->needs(loss);
  sub->add_option("--target-in-dim", o->target_in_dim,
                  "The target holds one slice per set at this dim")
      ->needs(loss);
  sub->add_flag("--verbose", o->verbose,
                "Say on stderr which sets this process computed and its peak memory (under "
                "mpirun: one line per rank, 'rank R of N: sets [A, B), peak memory M MiB')");
  sub->add_flag("--out-shards", o->out_shards,
                "Each rank writes its own sets' outputs to OUT with '.rankR' before the "
                "extension (sets in rank order, as --verbose says) instead of rank 0 gathering "
                "them all");
  sub->footer(
      "Example:\n"
      "  tdvmap run --model 'Sequential(Linear(64,256), ReLU(), Dropout(0.1), Linear(256,10))' \\\n"
      "      --params ensemble.safetensors --input input=x.safetensors --out y.safetensors\n"
      "  tdvmap run --model 'MultiheadAttention(8, 2, batch_first=True)' --params mha.safetensors "
      "\\\n"
      "      --input query=q.safetensors --input key=k.safetensors --input value=v.safetensors \\\n"
      "      --in-dim query=0 --out attn.safetensors\n"
      "  tdvmap run --model 'Sequential(Linear(5,16), ReLU(), Linear(16,3))' \\\n"
      "      --params member_0.pt member_1.pt member_2.pt --input x.safetensors --out "
      "y.safetensors\n"
      "  tdvmap run --model 'Sequential(Linear(64,256), ReLU(), Linear(256,10))' \\\n"
      "      --params ensemble.safetensors --input x.npy --loss cross_entropy \\\n"
      "      --target labels.npy --out scores.safetensors   # 'loss': one value per set\n"
      "  mpirun -np 4 tdvmap run --model 'Sequential(Linear(64,256), ReLU(), Linear(256,10))' \\\n"
      "      --params ensemble.safetensors --input x.safetensors --out y.safetensors\n"
      "      # each rank reads and computes a quarter of the sets; rank 0 writes them all");
  return {"run", [o] { return run_run(*o); }};
}

}  // namespace tdvmap
