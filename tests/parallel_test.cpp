// parallel_for and the worker pool behind it (engine/parallel.cpp).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "tests/test_util.h"

using namespace td;

// First in this file, so that in its own process (ctest) it runs before any set_num_threads.
TEST_CASE("one thread by default, OpenBLAS's GEMMs included") {
  manual_seed(3);
  Tensor a = randn({256, 512}), b = randn({512, 1024});
  Tensor by_default = matmul(a, b);
  set_num_threads(1);
  Tensor one = matmul(a, b);
  CHECK(num_threads() == 1);
  CHECK(equal(by_default, one));
}

namespace {
// Restores the thread count a test changed.
struct Threads {
  int before = num_threads();
  explicit Threads(int n) { set_num_threads(n); }
  ~Threads() { set_num_threads(before); }
};

// parallel_for over [0, n): every index exactly once, in as many ranges as asked.
void check_cover(int64_t n) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int> ranges{0};
  parallel_for(n, [&](int64_t b, int64_t e) {
    ranges.fetch_add(1);
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) REQUIRE(hits[static_cast<size_t>(i)].load() == 1);
  CHECK(ranges.load() == std::min<int64_t>(num_threads(), n));
}
}  // namespace

TEST_CASE("parallel_for covers the range once, job after job, as the thread count changes") {
  // 4 then 2 and 3 threads: workers the smaller counts do not use must still let jobs pass
  for (int t : {4, 2, 3, 1}) {
    Threads threads(t);
    for (int rep = 0; rep < 300; ++rep)
      for (int64_t n : {0, 1, 2, 5, 97}) check_cover(n);
  }
}

TEST_CASE("parallel_for rethrows a part's exception and the pool keeps working") {
  Threads threads(3);
  for (int rep = 0; rep < 50; ++rep) {
    CHECK_THROWS_WITH_AS(parallel_for(9,
                                      [](int64_t b, int64_t) {
                                        if (b >= 3) throw std::runtime_error("part failed");
                                      }),
                         "part failed", std::runtime_error);
    check_cover(10);
  }
}

TEST_CASE("parallel_for inside a part, and from two callers at once, runs without waiting") {
  Threads threads(2);
  std::atomic<int64_t> sum{0};
  parallel_for(4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      parallel_for(10, [&](int64_t b2, int64_t e2) {
        for (int64_t j = b2; j < e2; ++j) sum.fetch_add(i * 10 + j);
      });
  });
  CHECK(sum.load() == 39 * 40 / 2);
  // two caller threads: one gets the pool, the other runs its range itself
  std::vector<std::thread> callers;
  std::atomic<int64_t> totals[2] = {0, 0};
  for (int c = 0; c < 2; ++c)
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 200; ++rep)
        parallel_for(50, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) totals[c].fetch_add(i);
        });
    });
  for (auto& t : callers) t.join();
  CHECK(totals[0].load() == 200 * (49 * 50 / 2));
  CHECK(totals[1].load() == 200 * (49 * 50 / 2));
}

TEST_CASE("a forked child gets a pool of its own") {
  // tools/check_arm64.sh runs the suite under qemu-user, whose 7.2 (Debian 12's) aborts in a
  // forked child of a threaded program once the child starts a thread, before td runs there.
  if (std::getenv("TD_UNDER_EMULATOR")) {
    MESSAGE("skipped under emulation: qemu-user aborts when a forked child starts a thread");
    return;
  }
  Threads threads(2);
  check_cover(8);  // the parent's pool has a worker now
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    alarm(20);  // a child waiting on the parent's workers would hang: SIGALRM ends it
    std::atomic<int64_t> sum{0};
    for (int rep = 0; rep < 50; ++rep)
      parallel_for(10, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
      });
    _exit(sum.load() == 50 * 45 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  check_cover(8);  // and the parent's still works
}
