#include "engine/storage.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

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

// A caching allocator: freed blocks are kept by size and handed out again, so the buffers of a
// repeated call (an ensemble evaluated again and again) cost neither malloc nor page faults.
class BlockCache {
 public:
  static size_t round(size_t n) {
    if (n <= 4096) return n == 0 ? 64 : (n + 63) / 64 * 64;
    return (n + 4095) / 4096 * 4096;
  }
  // A block of 2 MiB or more starts on a 2 MiB boundary and asks for transparent huge pages:
  // an ensemble's stacked weights are read once per call, and with 4 KiB pages their TLB misses
  // cost 2-3% of mlp32_shared (7.43 -> 7.25 ms; one 256x256 Linear over 32 sets 6.1 -> 5.8 ms).
  static void* allocate(size_t rounded) {
    constexpr size_t kHuge = size_t{2} << 20;
    if (rounded < kHuge) return std::aligned_alloc(64, rounded);
    void* p = nullptr;  // posix_memalign: the size need not be a multiple of the alignment
    if (posix_memalign(&p, kHuge, rounded) != 0) return nullptr;
    madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure leaves 4 KiB pages
    return p;
  }
  void* get(size_t rounded) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(rounded);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= rounded;
        return p;
      }
    }
    void* p = allocate(rounded);
    if (!p) {
      release_all();
      p = allocate(rounded);
      if (!p) throw std::bad_alloc();
    }
    return p;
  }
  // noexcept: called from ~Storage, also while an exception unwinds. When memory is so short
  // that the free list cannot grow, the block is freed instead.
  void put(void* p, size_t rounded) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (kSanitizing || cached_ + rounded > kMaxCached) {
      std::free(p);
      return;
    }
    try {
      free_[rounded].push_back(p);
    } catch (const std::bad_alloc&) {
      std::free(p);
      return;
    }
    cached_ += rounded;
  }
  void release_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) std::free(p);
    free_.clear();
    cached_ = 0;
  }

 private:
  static constexpr size_t kMaxCached = size_t{1} << 30;
#ifdef __SANITIZE_ADDRESS__
  static constexpr bool kSanitizing = true;  // let ASan see every use after free
#else
  static constexpr bool kSanitizing = false;
#endif
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache();  // never destroyed: storages may outlive statics
  return *c;
}

}  // namespace

Storage::Storage(size_t nbytes) : nbytes_(nbytes) {
  data_ = cache().get(BlockCache::round(nbytes));
  note_alloc(static_cast<int64_t>(nbytes));
}

Storage::~Storage() {
  cache().put(data_, BlockCache::round(nbytes_));
  g_current.fetch_sub(static_cast<int64_t>(nbytes_));
}

std::shared_ptr<Storage> make_storage(size_t nbytes) { return std::make_shared<Storage>(nbytes); }

MemoryStats memory_stats() { return {g_current.load(), g_peak.load()}; }
void reset_peak_memory() { g_peak.store(g_current.load()); }
void empty_cache() { cache().release_all(); }

}  // namespace td
