// tdvmap demo: the reference page's two examples and a population of small MLPs (where batching
// pays), as a short report.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tools/tdvmap/common.h"
#include "vmap/functional_vmap.h"

namespace tdvmap {
namespace {

using td::Tensor;
using td::TensorDict;
namespace nn = td::nn;

struct DemoOptions {
  int sets = 256;
  double min_time = 0.2;
};

std::string first_values(const Tensor& t, int n) {
  std::vector<float> v = t.contiguous().to_vector<float>();
  std::string out;
  char buf[32];
  for (int i = 0; i < n && i < static_cast<int>(v.size()); ++i) {
    std::snprintf(buf, sizeof buf, "%s%.4f", i ? ", " : "", v[i]);
    out += buf;
  }
  return out;
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.contiguous().to_vector<float>(), y = b.contiguous().to_vector<float>();
  float m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

int run_demo(const DemoOptions& o) {
  td::manual_seed(0);
  std::cout << "td functional_vmap demo: one module, many stacked parameter sets, one call\n\n";

  // 1. The reference page's examples.
  std::vector<std::shared_ptr<nn::Linear>> nets;
  for (int i = 0; i < 4; ++i) nets.push_back(std::make_shared<nn::Linear>(3, 1));
  TensorDict params = TensorDict::from_modules(nets);
  Tensor x = td::randn({10, 3});
  Tensor y = nn::functional_vmap(*nets[0], {.params = params, .args = {x}}).tensor();
  Tensor y1 = (*nets[1])({x}).tensor();
  std::cout << "1. Four Linear(3, 1), parameters stacked with TensorDict::from_modules: batch_size "
            << shape_text(params.batch_size()) << "\n"
            << "   shared input x " << shape_text(x.shape()) << "\n"
            << "   functional_vmap(nets[0], {.params, .args = {x}}).shape = "
            << shape_text(y.shape()) << "\n"
            << "   set 1, first values: " << first_values(y[1], 3)
            << "   (nets[1](x): " << first_values(y1, 3) << ")\n";

  Tensor x_per_set = td::randn({4, 10, 3});
  Tensor z =
      nn::functional_vmap(
          *nets[0], {.params = params, .kwargs = {{"input", x_per_set}}, .in_dims = {{"input", 0}}})
          .tensor();
  Tensor z2 = (*nets[2])({x_per_set[2]}).tensor();
  std::cout << "2. Per-set input x " << shape_text(x_per_set.shape())
            << " with in_dims {\"input\": 0}: output shape " << shape_text(z.shape()) << "\n"
            << "   set 2 equals nets[2](x[2]): max |difference| = " << max_abs_diff(z[2], z2)
            << "\n\n";

  // 2. Where batching pays: many small models, batched against a loop over the sets.
  const std::vector<int64_t> sizes = {16, 32, 32, 4};
  std::vector<std::shared_ptr<nn::Module>> mlps;
  for (int i = 0; i < o.sets; ++i) mlps.push_back(make_mlp(sizes, 0.0));
  for (auto& m : mlps) m->eval();
  TensorDict mlp_params = TensorDict::from_modules(mlps);
  Tensor input = td::randn({64, 16});
  nn::FunctionalVmapOptions batched{.params = mlp_params, .args = {input}};
  nn::FunctionalVmapOptions looped = batched;
  looped.loop = true;
  Tensor out = nn::functional_vmap(*mlps[0], batched).tensor();
  Tensor ref = nn::functional_vmap(*mlps[0], looped).tensor();
  std::cout << "3. A population of " << o.sets
            << " small MLPs Linear(16,32) ReLU Linear(32,32) ReLU Linear(32,4), shared input "
            << shape_text(input.shape()) << "\n"
            << "   output " << shape_text(out.shape())
            << ", max |vmap - loop| = " << max_abs_diff(out, ref) << "\n";
  std::vector<double> us = medians_us({[&] { nn::functional_vmap(*mlps[0], batched); },
                                       [&] { nn::functional_vmap(*mlps[0], looped); }},
                                      o.min_time, 3);
  const double t_vmap = us[0], t_loop = us[1];
  char buf[240];
  std::snprintf(buf, sizeof buf,
                "   functional_vmap: %.0f us per call; the same sets one at a time (loop = true): "
                "%.0f us per call\n   functional_vmap is %.2fx %s here\n",
                t_vmap, t_loop, t_vmap <= t_loop ? t_loop / t_vmap : t_vmap / t_loop,
                t_vmap <= t_loop ? "faster" : "slower");
  std::cout << buf
            << "\nNext: 'tdvmap bench' for the benchmark workloads, 'tdvmap run --help' to run "
               "an ensemble exported from PyTorch;\nPyTorch side by side: "
               "tools/bench_vs_torch.py (figures in the README's Performance section).\n";
  return 0;
}

}  // namespace

Command add_demo_command(CLI::App& app) {
  auto o = std::make_shared<DemoOptions>();
  CLI::App* sub =
      app.add_subcommand("demo",
                         "Run the reference examples and a population of small MLPs, timing "
                         "functional_vmap against a loop over the sets");
  sub->add_option("--sets", o->sets, "Number of small MLPs in the population")
      ->capture_default_str()
      ->check(whole_number())
      ->check(CLI::Range(1, 100000));
  sub->add_option("--min-time", o->min_time, "Seconds per timing")
      ->capture_default_str()
      ->check(finite_number())
      ->check(CLI::Range(0.0, 1e6));
  sub->footer("Example:\n  tdvmap demo\n  tdvmap demo --sets 64");
  return {"demo", [o] { return run_demo(*o); }};
}

}  // namespace tdvmap
