#pragma once
// Reference-counted, 64-byte aligned buffers, and the engine's allocation statistics.
#include <cstddef>
#include <cstdint>
#include <memory>

namespace td {

class Storage {
 public:
  explicit Storage(size_t nbytes);  // uninitialised
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }

 private:
  void* data_;
  size_t nbytes_;
};

std::shared_ptr<Storage> make_storage(size_t nbytes);

// Bytes the engine has live now, and the most it had live since the last reset.
struct MemoryStats {
  int64_t current_bytes;
  int64_t peak_bytes;
};
MemoryStats memory_stats();
void reset_peak_memory();  // peak := current
// Returns the blocks the caching allocator keeps for reuse to the system.
void empty_cache();

}  // namespace td
