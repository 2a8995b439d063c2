#pragma once
// The engine's thread count: batched GEMMs share their matrices, and blocks of large ones,
// across threads (OpenBLAS itself runs on one). Default 1.
#include <cstdint>
#include <functional>

namespace td {

void set_num_threads(int threads);  // ValueError if < 1
int num_threads();                  // 1 inside a SerialScope
// set_num_threads' count, also inside a SerialScope: what may shape a result (how a GEMM is cut
// into blocks), where num_threads() is how many threads may run now.
int configured_threads();

// While alive, num_threads() is 1 on this thread: work already shared out across the threads
// (functional_vmap's concurrent blocks of sets) runs its ops serially.
class SerialScope {
 public:
  SerialScope();
  ~SerialScope();
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;
};

// Runs fn(begin, end) over [0, n) split into num_threads() contiguous ranges, on this thread
// and num_threads() - 1 pooled workers; rethrows the first exception. While the pool serves
// one call, another (from a second thread, or from inside fn) runs its whole range itself.
void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

// Runs fn(begin, end) over [0, n) in ranges of `step` that the threads claim in turn (a thread
// the host slows down takes fewer). After a failure no range is claimed any more, and the
// exception of the first failing range is rethrown, as a loop in order would.
void parallel_claim(int64_t n, int64_t step, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace td
