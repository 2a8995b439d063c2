#pragma once
// Shared pieces of the tdvmap subcommands: error kinds, timing, the benchmark MLP.
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/shape.h"

namespace CLI {
class App;
class Validator;
}  // namespace CLI
namespace td::nn {
class Module;
}

namespace tdvmap {

// A usage error (bad flag value, bad NAME=VALUE): exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One registered subcommand: run() is called when its name was given on the command line.
struct Command {
  std::string name;
  std::function<int()> run;
};

// Checks of an option's text, run before CLI11 converts it: CLI11 reads "-1" into a uint64_t as
// 2^64 - 1, clamps an integer beyond int64 to the limit, and takes "nan" as a number.
CLI::Validator whole_number();     // an integer that fits int64
CLI::Validator unsigned_number();  // an integer that fits uint64, without a sign
CLI::Validator finite_number();    // a finite floating-point number

// "[4, 10, 1]" (as PyTorch prints a size) or, compact, "[4,10,1]".
std::string shape_text(const td::Shape& s, bool compact = false);

// This process's rank and the number of ranks when an MPI launcher (mpirun, mpiexec) started it,
// read from the launcher's environment (Open MPI's OMPI_COMM_WORLD_*, else MPICH's PMI_*):
// {0, 1} for a plain start.
struct LaunchedRanks {
  int rank = 0;
  int size = 1;
};
LaunchedRanks launched_ranks();

// Sets td's thread count (and with it OpenBLAS's pool) and the OpenBLAS/OpenMP environment.
void set_thread_count(int threads);

// Linear(a,b) ReLU [Dropout(p)] Linear(b,c) ReLU ... Linear(y,z): ReLU after every Linear but
// the last; the Dropout (p > 0) only after the first ReLU, as BENCHMARKS.md's MLP.
std::shared_ptr<td::nn::Module> make_mlp(const std::vector<int64_t>& sizes, double dropout);

// Useful float ops of one call of make_mlp(sizes) on `rows` rows: 2*in*out per row per Linear
// (the GEMMs only; bias and activations are not counted).
double mlp_flops(const std::vector<int64_t>& sizes, int64_t rows);

// Median wall time per call of each fn, in microseconds. The fns run in turn, a block of calls
// each per round (about a tenth of min_time), so that a shared machine's slow spells fall on
// all of them alike and their ratios hold. Each fn: two warm-up calls, then at least `repeat`
// timed calls and `min_time` seconds. Only the calls are inside the clock.
std::vector<double> medians_us(const std::vector<std::function<void()>>& fns, double min_time,
                               int repeat);

template <class Fn>
double median_us(Fn&& fn, double min_time, int repeat) {
  return medians_us({std::function<void()>(fn)}, min_time, repeat)[0];
}

// The subcommands, each in its own file: adds it to app and returns how to run it.
Command add_demo_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_ops_command(CLI::App& app);
Command add_run_command(CLI::App& app);
Command add_stack_command(CLI::App& app);

}  // namespace tdvmap
