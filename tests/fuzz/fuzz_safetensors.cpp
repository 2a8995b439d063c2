// Fuzz target: TensorDict::load_safetensors on arbitrary bytes. Any td exception is a clean
// refusal; a crash, a sanitizer report, another exception type or a hang is a finding.

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = td::fuzz::as_file(data, size);
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
