// tdvmap run: builds a module from a spec, loads stacked parameters (one file, or per-member
// files stacked on load) and inputs from safetensors or NumPy files, runs functional_vmap and
// writes the outputs as safetensors (or .npz).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
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
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Loads the stacked parameters and checks them against the module: every leaf must be
// [batch..., per-set shape...] with one batch shape for all (RuntimeError naming key and shapes).
// One file holds them stacked; several files (or a directory) are members, stacked on load.
TensorDict load_params(const nn::Module& model, const std::vector<std::string>& args,
                       const std::string& params_key) {
  const TensorDict expected = TensorDict::from_module(model);
  std::error_code ec;
  const bool one_file = args.size() == 1 && !std::filesystem::is_directory(args[0], ec);
  const std::vector<std::string> paths = one_file ? args : member_files(args);
  // what the messages call the params: "file 'x'" or "files 'a' ... 'c' (3 members)"
  const std::string what = one_file ? "file '" + paths[0] + "'"
                                    : "files '" + paths[0] + "' ... '" + paths.back() + "' (" +
                                          std::to_string(paths.size()) + " members)";
  const TensorDict file = one_file ? TensorDict::load_file(paths[0], {params_key})
                                   : TensorDict::load_stacked(paths, {.key = params_key});
  std::optional<Shape> batch;
  std::string batch_key;
  for (const auto& [key, t] : expected.leaves()) {
    if (!file.contains(key)) {
      std::string have;
      const auto keys = file.keys(true, true);
      for (size_t i = 0; i < keys.size() && i < 20; ++i)  // a huge file is not listed whole
        have += (have.empty() ? "" : ", ") + td::quote_key(keys[i]);
      if (keys.size() > 20) have += ", ... (" + std::to_string(keys.size()) + " keys)";
      td::throw_error<td::KeyError>(
          "params ", what, " has no '", key, "' (the model's parameter of per-set shape ",
          shape_text(t.shape()), "); it has: ", have.empty() ? "nothing" : have);
    }
    const Shape& want = t.shape();
    const Shape got = file.get(key).shape();
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
  for (const auto& key : file.keys(true, true)) {
    if (expected.contains(key)) continue;
    // PyTorch's BatchNorm counter; td keeps no such buffer when it has none.
    if (ends_with(key, "num_batches_tracked")) continue;
    td::throw_error<td::KeyError>("params ", what, " has ", td::quote_key(key),
                                  ", which the model has no parameter or buffer for");
  }
  TensorDict params(batch.value_or(Shape{}));
  for (const auto& [key, t] : expected.leaves()) params.set(key, file.get(key));
  return params;
}

// One input from a safetensors or .npz file (or the array of an .npy file): its only entry, the
// entry called name, or a tuple when the keys are "0", "1", ... (an LSTM's hx = (h_0, c_0)), as
// `run --out` writes a tuple.
td::Value load_input(const std::string& name, const std::string& path) {
  if (ends_with(path, ".npy")) return td::load_npy(path);
  const TensorDict file =
      ends_with(path, ".npz") ? td::load_npz(path) : TensorDict::load_safetensors(path);
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

int run_run(const RunOptions& o) {
  td::manual_seed(o.seed);
  nn::FunctionalVmapOptions options;
  options.randomness = td::parse_randomness(o.randomness);
  options.chunk_size = o.chunk_size;
  options.method = o.method;
  options.loop = o.loop;
  const RunInputs parsed = parse_run_inputs(o.inputs, o.in_dims);
  options.in_dims = parsed.in_dims;

  std::shared_ptr<nn::Module> model = build_model(o.model);  // SpecError: exit 2
  model->train(o.train);
  options.params = load_params(*model, o.params, o.params_key);
  for (const auto& [name, path] : parsed.inputs) options.kwargs.set(name, load_input(name, path));
  Tensor target;  // read before the run, so that a bad file fails early
  if (!o.loss.empty()) {
    const td::Value t = load_input("target", o.target);
    if (!t.is_tensor())
      td::throw_error<td::ValueError>("--target file '", o.target, "' must hold one tensor");
    target = t.tensor();
  }

  // a long run shows its progress on a terminal; a pipe or a file gets none
  if (!o.quiet && isatty(STDERR_FILENO)) {
    auto line = std::make_shared<ProgressLine>(stderr);
    options.progress = [line](int64_t done, int64_t total) { line->update(done, total); };
  }
  td::Value result;
  try {
    result = nn::functional_vmap(*model, options);
  } catch (const td::RuntimeError& e) {
    if (options.randomness != td::Randomness::Error ||
        std::string(e.what()).find("randomness") == std::string::npos)
      throw;
    td::throw_error<td::RuntimeError>(e.what(), " (tdvmap: give --randomness different or same)");
  }
  TensorDict out;
  collect(result, "output", out);
  if (!o.loss.empty()) out.set("loss", score(o, options.params.batch_size(), result, target));
  if (ends_with(o.out, ".npz"))
    td::save_npz(out, o.out);
  else
    out.save_safetensors(o.out);
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
  sub->add_option("--loss-reduction", o->loss_reduction,
                  "mean | sum | none | batchmean (kl_div)")
      ->capture_default_str()
      ->check(CLI::IsMember({"mean", "sum", "none", "batchmean"}))
      ->needs(loss);
  sub->add_option("--target-in-dim", o->target_in_dim,
                  "The target holds one slice per set at this dim")
      ->needs(loss);
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
      "      --target labels.npy --out scores.safetensors   # 'loss': one value per set");
  return {"run", [o] { return run_run(*o); }};
}

}  // namespace tdvmap
