#include "engine/storage.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace td {
namespace {
std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};

void note_alloc(int64_t n) {
  int64_t now = g_current.fetch_add(n) + n;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}
}  // namespace

Storage::Storage(size_t nbytes) : nbytes_(nbytes) {
  size_t rounded = (nbytes + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!data_) throw std::bad_alloc();
  note_alloc(static_cast<int64_t>(nbytes));
}

Storage::~Storage() {
  std::free(data_);
  g_current.fetch_sub(static_cast<int64_t>(nbytes_));
}

std::shared_ptr<Storage> make_storage(size_t nbytes) { return std::make_shared<Storage>(nbytes); }

MemoryStats memory_stats() { return {g_current.load(), g_peak.load()}; }
void reset_peak_memory() { g_peak.store(g_current.load()); }

}  // namespace td
