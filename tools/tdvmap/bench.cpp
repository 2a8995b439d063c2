// tdvmap bench: the public workloads of BENCHMARKS.md, or one custom workload from flags (an MLP
// from --mlp, or any module from a --model spec on a random input of --input-shape).
//
// Per workload: medians per call (microseconds) of functional_vmap (vmap_us), the same call with
// loop = true (loop_us) and with chunk_size = c (chunk<c>_us, c = --chunk-size, default 8), the
// three timed in turn (medians_us) so that their ratios survive a noisy machine;
// gflops = useful float ops of the vmap call per second: 2*in*out per row per Linear per set for
// an MLP, 2 per multiply-add of the call's GEMMs and convolutions for a --model; peak_mb / chunk_peak_mb = the most bytes the
// engine held during one vmap / chunked call beyond what it held at the call's start (output
// included), in MiB. Under mpirun (td::mpi): strong scaling instead, one_rank_us (the whole
// ensemble on rank 0) against ranks_us (shared among the ranks, gathered on rank 0).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/limits.h"
#include "modules/modules.h"
#include "tools/tdvmap/common.h"
#include "tools/tdvmap/model_spec.h"
#include "tools/tdvmap/scoring.h"
#include "vmap/functional_vmap.h"
#ifdef TD_HAVE_MPI
#include "vmap/distributed.h"
#endif

namespace tdvmap {
namespace {

using td::Tensor;
using td::TensorDict;
namespace nn = td::nn;

struct Workload {
  std::string name;
  int64_t sets;
  std::vector<int64_t> sizes;  // MLP sizes: in, hidden..., out
  int64_t batch;
  bool per_set = false;
  double dropout = 0;
  td::Randomness randomness = td::Randomness::Error;
  // a --model workload: the spec, a set's input shape, how many times the input is passed
  // (3: self-attention's query, key and value), int64 indices in [0, index_range) when > 0
  std::string spec = {};
  td::Shape input_shape = {};
  int64_t inputs = 1;
  int64_t index_range = 0;
  bool train = false;
  std::string loss = {};  // each set's output scored against a shared random target
};

struct BenchOptions {
  double min_time = 0.5;
  int repeat = 5;
  int threads = 1;
  bool json = false;
  bool peak = false;
  std::vector<std::string> workloads;
  // custom workload
  int64_t sets = 32;
  std::vector<int64_t> mlp;
  int64_t batch = 128;
  bool per_set = false;
  double dropout = 0;
  std::string randomness = "error";
  int64_t chunk_size = 8;
  std::string name = "custom";
  std::string model;
  std::vector<int64_t> input_shape;
  int64_t inputs = 1;
  int64_t index_range = 0;
  bool train = false;
  std::string loss;
};

std::vector<Workload> public_workloads() {
  using R = td::Randomness;
  return {
      {"seed_linear4", 4, {3, 1}, 10},
      {"mlp32_shared", 32, {64, 256, 256, 10}, 128},
      {"mlp32_perset", 32, {64, 256, 256, 10}, 128, true},
      {"mlp8_large", 8, {512, 1024, 1024, 512}, 256},
      {"mlp32_dropout_diff", 32, {64, 256, 256, 10}, 128, false, 0.1, R::Different},
      {"mlp256_small", 256, {16, 32, 32, 4}, 64},
  };
}

struct Result {
  std::string name;
  double vmap_us, loop_us, chunk_us, gflops, peak_mb, chunk_peak_mb;
  int64_t chunk_size;
  td::Shape out;
};

// Shows what runs now on stderr, only for a person watching a terminal.
class Progress {
 public:
  Progress() : on_(isatty(STDERR_FILENO) != 0) {}
  void show(size_t i, size_t n, const std::string& name, const char* what) const {
    if (on_) std::fprintf(stderr, "\r\033[K[%zu/%zu] %s: %s", i + 1, n, name.c_str(), what);
  }
  void done() const {
    if (on_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  bool on_;
};

// Extra MiB the engine held at most during fn(), beyond what it held before.
template <class Fn>
double peak_mib(Fn&& fn) {
  td::reset_peak_memory();
  const int64_t start = td::memory_stats().current_bytes;
  {
    auto keep = fn();  // the output counts: it is allocated by the call
    (void)keep;
  }
  return static_cast<double>(td::memory_stats().peak_bytes - start) / (1024.0 * 1024.0);
}

// A workload's modules and the options of its vmapped call.
struct Built {
  std::vector<std::shared_ptr<nn::Module>> nets;
  nn::FunctionalVmapOptions vmap_options;
};

Built build_workload(const Workload& w) {
  td::manual_seed(0);
  std::vector<std::shared_ptr<nn::Module>> nets;
  for (int64_t i = 0; i < w.sets; ++i)
    nets.push_back(w.spec.empty() ? make_mlp(w.sizes, w.dropout) : build_model(w.spec));
  for (auto& n : nets) n->train(w.spec.empty() ? w.dropout > 0 : w.train);
  if (!w.loss.empty())
    for (auto& n : nets) n = std::make_shared<ScoredModel>(n, w.loss);
  const nn::Module& model = *nets[0];
  TensorDict params = TensorDict::from_modules(nets);

  nn::FunctionalVmapOptions vmap_options{.params = params, .randomness = w.randomness};
  td::Shape shape = w.spec.empty() ? td::Shape{w.batch, w.sizes.front()} : w.input_shape;
  if (w.per_set) shape.insert(shape.begin(), w.sets);
  // indices: U[0, 1) scaled in double, clamped where the product rounds up to the range itself
  const Tensor x =
      w.index_range > 0
          ? td::clamp(td::mul(td::rand(shape, td::kFloat64), static_cast<double>(w.index_range))
                          .to(td::DType::Int64),
                      std::nullopt, w.index_range - 1)
          : td::randn(shape);
  if (w.per_set) {
    // the first forward argument by name, the others (self-attention's key and value) as given
    const std::vector<std::string>& names = model.method_arg_names("forward");
    if (names.empty()) throw UsageError("--per-set: the module's forward takes no named input");
    vmap_options.kwargs = {{names[0], x}};
    vmap_options.in_dims = {{names[0], 0}};
    for (int64_t i = 1; i < w.inputs; ++i) {
      if (static_cast<size_t>(i) >= names.size())
        throw UsageError("--inputs " + std::to_string(w.inputs) + ": forward takes only " +
                         std::to_string(names.size()) +
                         (names.size() == 1 ? " argument" : " arguments"));
      vmap_options.kwargs.set(names[i], x);
      vmap_options.in_dims[names[i]] = 0;
    }
  } else {
    for (int64_t i = 0; i < w.inputs; ++i) vmap_options.args.push_back(x);
  }
  if (!w.loss.empty()) {
    // a target of the shape one set's output asks for: class indices, or values in [0, 1)
    const td::Value y = (*nets[0]->named_children().front().second)({w.per_set ? x[0] : x});
    const td::Shape out = (y.is_tensor() ? y : y[0]).tensor().shape();
    td::Shape ts = out;
    if (loss_takes_indices(w.loss) && !ts.empty()) ts.erase(ts.begin() + (ts.size() > 1 ? 1 : 0));
    const int64_t classes = out.empty() ? 1 : out[out.size() > 1 ? 1 : 0];
    vmap_options.kwargs.set(
        "target", loss_takes_indices(w.loss)
                      ? td::clamp(td::mul(td::rand(ts, td::kFloat64), static_cast<double>(classes))
                                      .to(td::DType::Int64),
                                  std::nullopt, classes - 1)
                      : td::rand(ts));
  }
  return {std::move(nets), std::move(vmap_options)};
}

Result run_workload(const Workload& w, const BenchOptions& o, size_t index, size_t count,
                    const Progress& progress) {
  progress.show(index, count, w.name, "building");
  const Built built = build_workload(w);
  const nn::Module& model = *built.nets[0];
  const nn::FunctionalVmapOptions& vmap_options = built.vmap_options;
  nn::FunctionalVmapOptions loop_options = vmap_options;
  loop_options.loop = true;
  // A loop cannot give every set the same draws; "different" costs the same.
  if (w.randomness == td::Randomness::Same) loop_options.randomness = td::Randomness::Different;
  nn::FunctionalVmapOptions chunk_options = vmap_options;
  chunk_options.chunk_size = o.chunk_size;

  Result r;
  r.name = w.name;
  r.chunk_size = o.chunk_size;
  td::reset_kernel_counts();
  const td::Value first = nn::functional_vmap(model, vmap_options);
  const double flops = 2.0 * static_cast<double>(td::multiply_add_count());
  r.out = (first.is_tensor() ? first : first[0]).tensor().shape();
  progress.show(index, count, w.name, "vmap, loop, chunked");
  std::vector<double> us = medians_us({[&] { nn::functional_vmap(model, vmap_options); },
                                       [&] { nn::functional_vmap(model, loop_options); },
                                       [&] { nn::functional_vmap(model, chunk_options); }},
                                      o.min_time, o.repeat);
  r.vmap_us = us[0];
  r.loop_us = us[1];
  r.chunk_us = us[2];
  r.gflops = (w.spec.empty() ? static_cast<double>(w.sets) * mlp_flops(w.sizes, w.batch) : flops) /
             (r.vmap_us * 1e3);
  r.peak_mb = peak_mib([&] { return nn::functional_vmap(model, vmap_options); });
  r.chunk_peak_mb = peak_mib([&] { return nn::functional_vmap(model, chunk_options); });
  return r;
}

// GFLOP/s of td::matmul on 1024x1024 float32 (the machine's practical GEMM ceiling).
double sgemm_gflops(const BenchOptions& o) {
  td::manual_seed(0);
  Tensor a = td::randn({1024, 1024}), b = td::randn({1024, 1024});
  double us = median_us([&] { td::matmul(a, b); }, o.min_time, o.repeat);
  return 2.0 * 1024 * 1024 * 1024 / (us * 1e3);
}

std::string fmt(double v, int digits = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

#ifdef TD_HAVE_MPI
// Under mpirun: strong scaling. The workload's whole ensemble on rank 0 alone, then shared among
// every rank (dist::functional_vmap, the outputs gathered on rank 0). A call's time is the
// slowest rank's, between two barriers whose waiting ranks sleep; rank 0 decides when enough
// calls ran (the others follow).
struct RanksResult {
  std::string name;
  double one_rank_us, ranks_us;
};

// A barrier whose waiting ranks sleep instead of spinning (MPI_Barrier polls): a rank waiting
// for rank 0's one-rank run would otherwise take a share of the machine from it.
void quiet_barrier(const td::dist::Communicator& comm) {
  MPI_Request request;
  MPI_Ibarrier(comm.comm(), &request);
  for (int done = 0; MPI_Test(&request, &done, MPI_STATUS_IGNORE), !done;)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

RanksResult run_workload_ranks(const td::dist::Communicator& comm, const Workload& w,
                               const BenchOptions& o) {
  const Built built = build_workload(w);
  const nn::Module& model = *built.nets[0];
  auto timed = [&](const std::function<void()>& call) {
    for (int i = 0; i < 2; ++i) call();  // warm-up
    std::vector<double> us;
    const auto start = std::chrono::steady_clock::now();
    int more = 1;
    while (more) {
      quiet_barrier(comm);
      const auto t0 = std::chrono::steady_clock::now();
      call();
      quiet_barrier(comm);
      const auto t1 = std::chrono::steady_clock::now();
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      more = static_cast<int>(us.size()) < o.repeat ||
             std::chrono::duration<double>(t1 - start).count() < o.min_time;
      MPI_Bcast(&more, 1, MPI_INT, 0, comm.comm());
    }
    std::nth_element(us.begin(), us.begin() + static_cast<std::ptrdiff_t>(us.size() / 2), us.end());
    return us[us.size() / 2];
  };
  RanksResult r{w.name, 0, 0};
  r.one_rank_us = timed([&] {
    if (comm.rank() == 0) nn::functional_vmap(model, built.vmap_options);
  });
  r.ranks_us = timed([&] { td::dist::functional_vmap(comm, model, built.vmap_options); });
  return r;
}

int run_bench_ranks(const std::vector<Workload>& todo, const BenchOptions& o) {
  const td::dist::Communicator comm;
  nlohmann::ordered_json json = nlohmann::ordered_json::array();
  for (const auto& w : todo) {
    const RanksResult r = run_workload_ranks(comm, w, o);
    if (comm.rank() != 0) continue;
    const double speedup = r.one_rank_us / r.ranks_us;
    if (o.json)
      json.push_back({{"name", r.name},
                      {"ranks", comm.size()},
                      {"one_rank_us", r.one_rank_us},
                      {"ranks_us", r.ranks_us},
                      {"speedup", speedup},
                      {"threads", o.threads}});
    else
      std::cout << r.name << "\tranks=" << comm.size() << "\tone_rank_us=" << fmt(r.one_rank_us)
                << "\tranks_us=" << fmt(r.ranks_us) << "\tspeedup=" << fmt(speedup, 2)
                << std::endl;
  }
  if (o.json && comm.rank() == 0) std::cout << json.dump(2) << std::endl;
  return 0;
}
#endif

int run_bench(BenchOptions o) {
  set_thread_count(o.threads);
  if (o.chunk_size <= 0) throw UsageError("--chunk-size must be positive");

  std::vector<Workload> todo;
  if (!o.mlp.empty() || !o.model.empty()) {
    if (!o.workloads.empty())
      throw UsageError("--workload cannot be combined with a custom --mlp or --model");
    if (!o.mlp.empty() && !o.model.empty())
      throw UsageError("--mlp and --model cannot be combined");
    // a workload needs a set to build its module from; a batch may be empty
    if (o.sets <= 0) throw UsageError("--sets must be positive");
    if (o.batch < 0) throw UsageError("--batch must not be negative");
    // the name is a field of tab-separated lines and a JSON string
    if (std::any_of(o.name.begin(), o.name.end(),
                    [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
      throw UsageError("--name must not hold a tab, newline or other control character");
    try {
      (void)nlohmann::json(o.name).dump();
    } catch (const nlohmann::json::type_error&) {
      throw UsageError("--name is not valid UTF-8");
    }
    const td::Randomness randomness = td::parse_randomness(o.randomness);
    // the sets' modules and their stacked copy must fit the memory budget: checked before any
    // set is built (10^9 sets ran out of memory after 14 s)
    auto check_sets = [&](const nn::Module& one) {
      int64_t bytes = 4096;  // the module objects themselves, roughly
      for (const auto& list : {one.named_parameters(), one.named_buffers()})
        for (const auto& [name, t] : list)
          bytes += 2 * t.numel() * static_cast<int64_t>(td::dtype_size(t.dtype()));
      td::check_memory_budget("bench", o.sets, bytes, "parameter sets");
    };
    if (o.model.empty()) {
      check_sets(*make_mlp(o.mlp, 0));  // also validates the sizes
      todo.push_back({o.name, o.sets, o.mlp, o.batch, o.per_set, o.dropout, randomness});
    } else {
      if (o.input_shape.empty()) throw UsageError("--model needs --input-shape");
      check_sets(*build_model(o.model));  // a spec that does not build fails here, with a caret
      Workload w{o.name, o.sets, {}, 0, o.per_set, 0, randomness};
      w.spec = o.model;
      w.input_shape = td::Shape(o.input_shape.begin(), o.input_shape.end());
      w.inputs = o.inputs;
      w.index_range = o.index_range;
      w.train = o.train;
      w.loss = o.loss;
      if (!w.loss.empty() && w.inputs != 1) throw UsageError("--loss takes one input (--inputs 1)");
      todo.push_back(w);
    }
  } else {
    for (const auto& w : public_workloads())
      if (o.workloads.empty() ||
          std::find(o.workloads.begin(), o.workloads.end(), w.name) != o.workloads.end())
        todo.push_back(w);
    for (const auto& name : o.workloads) {
      bool known = false;
      for (const auto& w : public_workloads()) known = known || w.name == name;
      if (!known)
        throw UsageError("unknown workload '" + name +
                         "' (public: seed_linear4, mlp32_shared, mlp32_perset, mlp8_large, "
                         "mlp32_dropout_diff, mlp256_small)");
    }
  }

  if (const LaunchedRanks launched = launched_ranks(); launched.size > 1) {
#ifdef TD_HAVE_MPI
    return run_bench_ranks(todo, o);
#else
    throw UsageError("started by an MPI launcher with " + std::to_string(launched.size) +
                     " ranks, but this tdvmap was built without MPI (td::mpi)");
#endif
  }
  Progress progress;
  nlohmann::ordered_json json = nlohmann::ordered_json::array();
  if (o.peak) {
    progress.show(0, 1, "sgemm_1024", "matmul");
    double g = sgemm_gflops(o);
    progress.done();
    if (o.json)
      json.push_back({{"name", "sgemm_1024"},
                      {"gflops", g},
                      {"threads", o.threads},
                      {"isa", td::kernel_isa()}});
    else
      std::cout << "sgemm_1024\tgflops=" << fmt(g) << "\tthreads=" << o.threads
                << "\tisa=" << td::kernel_isa() << std::endl;
  }
  for (size_t i = 0; i < todo.size(); ++i) {
    Result r = run_workload(todo[i], o, i, todo.size(), progress);
    progress.done();
    const std::string chunk_key = "chunk" + std::to_string(r.chunk_size) + "_us";
    if (o.json) {
      json.push_back({{"name", r.name},
                      {"vmap_us", r.vmap_us},
                      {"loop_us", r.loop_us},
                      {chunk_key, r.chunk_us},
                      {"chunk_size", r.chunk_size},
                      {"gflops", std::isnan(r.gflops) ? nlohmann::ordered_json()
                                                      : nlohmann::ordered_json(r.gflops)},
                      {"peak_mb", r.peak_mb},
                      {"chunk_peak_mb", r.chunk_peak_mb},
                      {"threads", o.threads},
                      {"out", r.out}});
    } else {
      std::cout << r.name << "\tvmap_us=" << fmt(r.vmap_us) << "\tloop_us=" << fmt(r.loop_us)
                << "\t" << chunk_key << "=" << fmt(r.chunk_us)
                << "\tgflops=" << (std::isnan(r.gflops) ? "-" : fmt(r.gflops, 2))
                << "\tpeak_mb=" << fmt(r.peak_mb, 3)
                << "\tchunk_peak_mb=" << fmt(r.chunk_peak_mb, 3)
                << "\tout=" << shape_text(r.out, true) << std::endl;
    }
  }
  if (o.json) std::cout << json.dump(2) << std::endl;
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand(
      "bench",
      "Time functional_vmap against loop = true and chunk_size on the public workloads "
      "of BENCHMARKS.md (or one custom workload); medians per call in microseconds");
  sub->add_option("--min-time", o->min_time, "Minimum seconds per measurement")
      ->capture_default_str()
      ->check(finite_number())
      ->check(CLI::Range(0.0, 1e6));
  sub->add_option("--repeat", o->repeat, "Minimum repetitions per measurement")
      ->capture_default_str()
      ->check(whole_number())
      ->check(CLI::Range(1, 1000000000));
  sub->add_option("--threads", o->threads,
                  "Threads (BLAS/OpenMP pools; 1 is the figure that "
                  "compares)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  sub->add_flag("--json", o->json, "Print a JSON array of objects instead of lines");
  sub->add_flag("--peak", o->peak, "Also print td::matmul's 1024x1024 float32 GFLOP/s");
  sub->add_option("--workload", o->workloads, "Run only these public workloads")->delimiter(',');
  auto* mlp =
      sub->add_option("--mlp", o->mlp, "Custom workload: MLP sizes in,hidden...,out (runs only it)")
          ->delimiter(',')
          ->check(whole_number());
  sub->add_option("--sets", o->sets, "Custom workload: parameter sets")
      ->capture_default_str()
      ->check(whole_number());
  sub->add_option("--batch", o->batch, "Custom workload: input rows")
      ->capture_default_str()
      ->check(whole_number());
  sub->add_flag("--per-set", o->per_set, "Custom workload: a per-set input (in_dims 0)");
  sub->add_option("--dropout", o->dropout,
                  "Custom workload: Dropout(p) after the first ReLU, "
                  "train mode")
      ->check(finite_number())
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--randomness", o->randomness, "error | different | same")
      ->capture_default_str()
      ->check(CLI::IsMember({"error", "different", "same"}));
  sub->add_option("--chunk-size", o->chunk_size, "chunk_size of the chunked measurement")
      ->capture_default_str()
      ->check(whole_number());
  sub->add_option("--name", o->name, "Custom workload: its name")->capture_default_str();
  auto* model = sub->add_option("--model", o->model,
                                "Custom workload: any module, as a spec with PyTorch's constructor "
                                "arguments (as tdvmap run's --model; runs only it)");
  sub->add_option("--input-shape", o->input_shape,
                  "Custom --model workload: a set's input shape, e.g. 8,3,32,32 (random normal)")
      ->delimiter(',')
      ->check(whole_number());
  sub->add_option("--inputs", o->inputs,
                  "Custom --model workload: pass the input this many times (3 for "
                  "self-attention's query, key and value)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{16}));
  sub->add_option("--index-range", o->index_range,
                  "Custom --model workload: an int64 input of indices in [0, N) (Embedding)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  sub->add_flag("--train", o->train, "Custom --model workload: training mode");
  sub->add_option("--loss", o->loss,
                  "Custom --model workload: score each set's output with this loss (reduction "
                  "mean) against a shared random target")
      ->check(CLI::IsMember(loss_names()));
  for (const char* flag : {"--batch", "--dropout"}) sub->get_option(flag)->needs(mlp);
  for (const char* flag : {"--input-shape", "--inputs", "--index-range", "--train", "--loss"})
    sub->get_option(flag)->needs(model);
  sub->footer(
      "Output: name<TAB>vmap_us=..<TAB>loop_us=..<TAB>chunk8_us=..<TAB>gflops=..<TAB>peak_mb=..\n"
      "  <TAB>chunk_peak_mb=..<TAB>out=[..]; gflops counts 2*in*out per row per Linear per set\n"
      "  (for a --model: 2 per multiply-add of its GEMMs and convolutions); out is the first\n"
      "  output's shape;\n"
      "  peak_mb is the engine's peak allocation during one call minus its allocation at the\n"
      "  start, in MiB.\n"
      "Under mpirun (several ranks): name<TAB>ranks=N<TAB>one_rank_us=..<TAB>ranks_us=..\n"
      "  <TAB>speedup=..: the whole ensemble on rank 0 alone, then shared among the ranks.\n"
      "Examples:\n"
      "  tdvmap bench\n"
      "  tdvmap bench --workload mlp32_shared,mlp8_large --json\n"
      "  tdvmap bench --sets 48 --mlp 64,192,192,10 --batch 100 --per-set --name my_case\n"
      "  tdvmap bench --sets 32 --mlp 64,256,256,10 --dropout 0.1 --randomness different\n"
      "  tdvmap bench --sets 16 --input-shape 8,3,32,32 --name cnn16 --model \\\n"
      "      'Sequential(Conv2d(3,16,3,padding=1), ReLU(), MaxPool2d(2), Flatten(), "
      "Linear(4096,10))'\n"
      "  tdvmap bench --sets 8 --model 'MultiheadAttention(64, 4, batch_first=True)' \\\n"
      "      --input-shape 16,32,64 --inputs 3\n"
      "  tdvmap bench --sets 64 --input-shape 256,32 --name mlp64_xent --loss cross_entropy \\\n"
      "      --model 'Sequential(Linear(32,64), ReLU(), Linear(64,64), ReLU(), Linear(64,10))'\n"
      "  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE tdvmap bench --threads 1 --peak\n"
      "  mpirun -np 2 tdvmap bench --sets 16 --mlp 256,1024,1024,10 --batch 256  # strong scaling");
  return {"bench", [o, sub, mlp, model] {
            for (const char* flag : {"--sets", "--per-set", "--randomness", "--name"})
              if (sub->get_option(flag)->count() > 0 && mlp->count() + model->count() == 0)
                throw UsageError(std::string(flag) + " requires --mlp or --model");
            return run_bench(*o);
          }};
}

}  // namespace tdvmap
