#include "engine/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

#include "engine/errors.h"
#include "engine/kernels/kernels.h"

namespace td {
namespace {
std::atomic<int> g_threads{1};
}

void set_num_threads(int threads) {
  if (threads < 1) throw_error<ValueError>("[set_num_threads] needs at least 1 thread, got ", threads);
  g_threads.store(threads);
  kernels::set_blas_threads(threads);
}

int num_threads() { return g_threads.load(); }

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  int64_t parts = std::min<int64_t>(num_threads(), n);
  if (parts <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  std::vector<std::exception_ptr> errors(parts);
  std::vector<std::thread> workers;
  auto run = [&](int64_t p) {
    try {
      fn(n * p / parts, n * (p + 1) / parts);
    } catch (...) {
      errors[p] = std::current_exception();
    }
  };
  for (int64_t p = 1; p < parts; ++p) workers.emplace_back(run, p);
  run(0);
  for (auto& w : workers) w.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace td
