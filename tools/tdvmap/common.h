#pragma once
// Shared pieces of the tdvmap subcommands: error kinds, timing, the benchmark MLP.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/shape.h"

namespace CLI {
class App;
}
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

// "[4, 10, 1]" (as PyTorch prints a size) or, compact, "[4,10,1]".
std::string shape_text(const td::Shape& s, bool compact = false);

// Sets td's thread count (and with it OpenBLAS's pool) and the OpenBLAS/OpenMP environment.
void set_thread_count(int threads);

// Linear(a,b) ReLU [Dropout(p)] Linear(b,c) ReLU ... Linear(y,z): ReLU after every Linear but
// the last; the Dropout (p > 0) only after the first ReLU, as BENCHMARKS.md's MLP.
std::shared_ptr<td::nn::Module> make_mlp(const std::vector<int64_t>& sizes, double dropout);

// Useful float ops of one call of make_mlp(sizes) on `rows` rows: 2*in*out per row per Linear
// (the GEMMs only; bias and activations are not counted).
double mlp_flops(const std::vector<int64_t>& sizes, int64_t rows);

// Median wall time of fn in microseconds: two warm-up calls, then at least `repeat` calls and
// at least `min_time` seconds. Only the call itself is inside the clock.
template <class Fn>
double median_us(Fn&& fn, double min_time, int repeat) {
  using Clock = std::chrono::steady_clock;
  fn();
  fn();
  std::vector<double> times;
  const auto deadline = Clock::now() + std::chrono::duration<double>(min_time);
  while (static_cast<int>(times.size()) < repeat || Clock::now() < deadline) {
    const auto t0 = Clock::now();
    fn();
    const auto t1 = Clock::now();
    times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  auto mid = times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2);
  std::nth_element(times.begin(), mid, times.end());
  return *mid;
}

// The subcommands, each in its own file: adds it to app and returns how to run it.
Command add_demo_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_ops_command(CLI::App& app);
Command add_run_command(CLI::App& app);

}  // namespace tdvmap
