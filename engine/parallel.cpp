#include "engine/parallel.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/errors.h"
#include "engine/kernels/kernels.h"

namespace td {
namespace {
std::atomic<int> g_threads{1};
thread_local int tl_serial = 0;
// OpenBLAS starts with a thread per core. It stays at one: its threads would cut a product by
// their count and change its last bits, so td's threads share the blocks of a product instead
// (eigen_kernels.cpp's blas_cut).
[[maybe_unused]] const bool g_blas_one_thread = [] {
  kernels::set_blas_threads(1);
  return true;
}();

// Workers that stay alive between calls: starting threads per parallel_for cost 20-50 us, as much
// as a small block of sets computes. Part p of a job goes to worker p - 1 (the caller runs part
// 0), and every worker reports each job done, with or without a part, so none can lag into the
// next job and the caller's task may live on its stack. One job at a time: a second caller, or
// a task that itself calls parallel_for, runs serially instead of waiting.
class Pool {
 public:
  // Never destroyed: workers may still wait when main returns. A forked child has none of the
  // parent's workers (and maybe a lock one of them held), so it starts a pool of its own.
  static Pool& instance() {
    static bool registered = [] {
      pthread_atfork(nullptr, nullptr, [] { current() = new Pool; });
      return true;
    }();
    (void)registered;
    return *current();
  }

  // false if the pool is busy with another job
  bool run(int64_t parts, const std::function<void(int64_t)>& task) {
    bool idle = false;
    if (!busy_.compare_exchange_strong(idle, true)) return false;
    while (static_cast<int64_t>(workers_.size()) < parts - 1) {
      const int64_t part = static_cast<int64_t>(workers_.size()) + 1;
      const uint64_t now = generation_.load();  // the worker's first job is the next one
      workers_.emplace_back([this, part, now] { work(part, now); });
      workers_.back().detach();
    }
    errors_.assign(static_cast<size_t>(parts), nullptr);
    task_ = &task;
    parts_ = parts;
    remaining_.store(static_cast<int64_t>(workers_.size()));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    run_part(0);
    for (int spin = 0; remaining_.load(std::memory_order_acquire) != 0; ++spin) {
      if (spin < kSpin) continue;
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [this] { return remaining_.load() == 0; });
    }
    task_ = nullptr;
    std::exception_ptr error;
    for (auto& e : errors_)
      if (e && !error) error = e;
    busy_.store(false);
    if (error) std::rethrow_exception(error);
    return true;
  }

 private:
  static Pool*& current() {
    static Pool* pool = new Pool;
    return pool;
  }

  // ~50 us of polling before a worker (or the waiting caller) sleeps: the next GEMM of a call
  // usually starts sooner, and a sleeping worker takes longer than that to wake.
  static constexpr int kSpin = 20000;

  void run_part(int64_t p) {
    try {
      (*task_)(p);
    } catch (...) {
      errors_[static_cast<size_t>(p)] = std::current_exception();
    }
  }

  void work(int64_t part, uint64_t seen) {
    for (;;) {
      uint64_t g = generation_.load(std::memory_order_acquire);
      for (int spin = 0; g == seen && spin < kSpin; ++spin)
        g = generation_.load(std::memory_order_acquire);
      if (g == seen) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return (g = generation_.load()) != seen; });
      }
      seen = g;
      if (part < parts_) run_part(part);
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_one();
      }
    }
  }

  std::atomic<bool> busy_{false};
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> remaining_{0};
  const std::function<void(int64_t)>* task_ = nullptr;
  int64_t parts_ = 0;
  std::vector<std::exception_ptr> errors_;
};
}  // namespace

void set_num_threads(int threads) {
  if (threads < 1)
    throw_error<ValueError>("[set_num_threads] needs at least 1 thread, got ", threads);
  g_threads.store(threads);
}

int num_threads() { return tl_serial > 0 ? 1 : g_threads.load(); }
int configured_threads() { return g_threads.load(); }

SerialScope::SerialScope() { ++tl_serial; }
SerialScope::~SerialScope() { --tl_serial; }

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t parts = std::min<int64_t>(num_threads(), n);
  if (parts > 1 &&
      Pool::instance().run(parts, [&](int64_t p) { fn(n * p / parts, n * (p + 1) / parts); }))
    return;
  if (n > 0) fn(0, n);
}

void parallel_claim(int64_t n, int64_t step, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t ranges = (n + step - 1) / step;
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranges));
  parallel_for(num_threads(), [&](int64_t, int64_t) {
    for (int64_t k; !failed.load() && (k = next.fetch_add(1)) < ranges;) {
      try {
        fn(k * step, std::min(n, (k + 1) * step));
      } catch (...) {
        errors[k] = std::current_exception();
        failed.store(true);
      }
    }
  });
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace td
