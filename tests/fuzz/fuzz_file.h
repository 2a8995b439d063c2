#pragma once
// The fuzz targets' input as a regular file without touching the disk: a memfd, read through
// /proc/self/fd. The first call also holds the memory budget to 256 MiB, so that a fuzzed size
// cannot reach the host's memory.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/limits.h"

namespace td::fuzz {

inline std::string as_file(const uint8_t* data, size_t size) {
  static const int fd = [] {
    td::set_memory_budget(int64_t{256} << 20);
    return ::memfd_create("td_fuzz_input", 0);
  }();
  if (fd < 0 || ::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))
    __builtin_trap();
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace td::fuzz
