// Fuzz target: tdvmap's model spec parser on arbitrary text, and the builder on specs whose
// numbers are small (a fuzzed Linear(10^6, 10^6) would only test the host's memory).
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tools/tdvmap/model_spec.h"

namespace {
bool small(const tdvmap::SpecValue& v);
bool small(const tdvmap::SpecCall& c) {
  for (const auto& a : c.args)
    if (!small(a.value)) return false;
  return true;
}
bool small(const tdvmap::SpecValue& v) {
  using K = tdvmap::SpecValue::Kind;
  if (v.kind == K::Int) return v.i <= 32;
  if (v.kind == K::Float) return !(v.f > 32);
  if (v.kind == K::Call) return small(*v.call);
  for (const auto& item : v.items)
    if (!small(item)) return false;
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string spec(reinterpret_cast<const char*>(data), size);
  try {
    const tdvmap::SpecCall call = tdvmap::parse_model_spec(spec);
    if (small(call) && spec.size() < 512) {
      auto m = tdvmap::build_model(spec);
      (void)td::TensorDict::from_module(*m);
    }
  } catch (const tdvmap::SpecError& e) {
    (void)tdvmap::spec_caret(e);
  } catch (const std::invalid_argument&) {  // td::ValueError, td::TypeError
  } catch (const std::out_of_range&) {      // td::KeyError, td::IndexError
  } catch (const td::RuntimeError&) {
  }
  return 0;
}
