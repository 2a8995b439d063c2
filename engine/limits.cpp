#include "engine/limits.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <exception>

#include "engine/errors.h"

namespace td {

namespace {
std::atomic<int64_t> g_budget{0};  // 0: the default

int64_t default_budget() {
  static const int64_t b = [] {
    if (const char* env = std::getenv("TD_MEMORY_BUDGET")) {
      try {
        const long long v = std::stoll(env);
        if (v > 0) return static_cast<int64_t>(v);
      } catch (const std::exception&) {  // not a number: the default
      }
    }
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    // half: what is planned is a lower bound, and a load holds its data twice for a while
    if (pages > 0 && page > 0) return static_cast<int64_t>(pages) * page / 2;
    return int64_t{1} << 33;  // 8 GiB when the system does not say
  }();
  return b;
}
}  // namespace

int64_t memory_budget() {
  const int64_t b = g_budget.load();
  return b > 0 ? b : default_budget();
}

void set_memory_budget(int64_t bytes) { g_budget.store(bytes > 0 ? bytes : 0); }

void check_memory_budget(const char* op, int64_t count, int64_t bytes_each, const char* what) {
  int64_t total = 0;
  const bool overflow =
      count < 0 || bytes_each < 0 || __builtin_mul_overflow(count, bytes_each, &total);
  const int64_t budget = memory_budget();
  if (overflow || total > budget)
    throw_error<RuntimeError>("[", op, "] ", count, " ", what, " need at least ",
                              overflow ? std::string("more than 2^63") : std::to_string(total),
                              " bytes, beyond the memory budget of ", budget,
                              " bytes (td::set_memory_budget or TD_MEMORY_BUDGET raise it)");
}

}  // namespace td
