// Fuzz target: TensorDict::load_safetensors on arbitrary bytes. Any td exception is a clean
// refusal; a crash, a sanitizer report, another exception type or a hang is a finding.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/engine.h"
#include "engine/limits.h"
#include "modules/modules.h"

namespace {
// The bytes as a regular file without touching the disk: a memfd, read through /proc/self/fd.
std::string as_file(const uint8_t* data, size_t size) {
  static const int fd = [] {
    td::set_memory_budget(int64_t{256} << 20);  // a fuzzed size must not reach the host's memory
    return ::memfd_create("td_fuzz_safetensors", 0);
  }();
  if (fd < 0 || ::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))
    __builtin_trap();
  return "/proc/self/fd/" + std::to_string(fd);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = as_file(data, size);
  try {
    const td::TensorDict d = td::TensorDict::load_safetensors(path);
    // what a caller does next: walk the keys, read every leaf, index the first set
    for (const auto& [key, t] : d.leaves()) {
      if (d.get(key).numel() != t.numel()) __builtin_trap();
      if (t.numel() > 0 && t.numel() < 4096) (void)t.sum().item<double>();
    }
    (void)d.keys(true, false);
    if (d.batch_dims() > 0 && d.batch_size()[0] > 0) (void)d[0];
  } catch (const td::ValueError&) {
  } catch (const td::KeyError&) {
  } catch (const td::TypeError&) {
  } catch (const td::IndexError&) {
  } catch (const td::RuntimeError&) {
  }
  return 0;
}
