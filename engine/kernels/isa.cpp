// Chooses the kernels' level once, from the CPU and TD_ISA, and defines the kernel entry points:
// each calls its variant of that level. Compiled for the baseline only.
#include "engine/kernels/isa.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "engine/kernels/kernels.h"

namespace td {
namespace kernels {
namespace {

constexpr const char* kNames[] = {"baseline", "avx2", "avx512", "native"};

#if defined(TD_ISA_MULTI)
bool cpu_runs(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
#if defined(__clang__) && __clang_major__ < 16
    // no level names before clang 16: the levels' defining features (every CPU with them has
    // the rest of its level: LZCNT, MOVBE, F16C)
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl") && cpu_runs(Isa::avx2);
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
#else
    case Isa::avx512:
      return __builtin_cpu_supports("x86-64-v4");
    case Isa::avx2:
      return __builtin_cpu_supports("x86-64-v3");
#endif
    default:
      return isa == Isa::baseline;
  }
}
// best first; the build may leave out avx2 and avx512 (TD_KERNEL_LEVELS)
constexpr Isa kCompiled[] = {
#if defined(TD_ISA_HAS_avx512)
    Isa::avx512,
#endif
#if defined(TD_ISA_HAS_avx2)
    Isa::avx2,
#endif
    Isa::baseline};
#elif defined(TD_ISA_NATIVE)
bool cpu_runs(Isa isa) { return isa == Isa::native; }
constexpr Isa kCompiled[] = {Isa::native};
#else
bool cpu_runs(Isa isa) { return isa == Isa::baseline; }
constexpr Isa kCompiled[] = {Isa::baseline};
#endif

Isa choose() {
  const char* cap = std::getenv("TD_ISA");
  int limit = static_cast<int>(Isa::avx512);
  if (cap && *cap) {
    const std::string_view c(cap);
    if (c == "baseline")
      limit = static_cast<int>(Isa::baseline);
    else if (c == "avx2")
      limit = static_cast<int>(Isa::avx2);
    else if (c != "avx512")
      // not an exception: the first kernel call may come from a static initialiser
      std::fprintf(stderr, "td: TD_ISA='%.40s' is not one of baseline, avx2, avx512: ignored\n",
                   cap);
  }
  for (Isa isa : kCompiled)
    if (cpu_runs(isa) && (isa == Isa::native || static_cast<int>(isa) <= limit)) return isa;
  return kCompiled[std::size(kCompiled) - 1];
}

}  // namespace

Isa active_isa() {
  static const Isa isa = choose();
  return isa;
}

#if defined(TD_ISA_MULTI)
#if defined(TD_ISA_HAS_avx512)
#define TD_CASE_AVX512(name, args) \
  case Isa::avx512:                \
    return isa_avx512::name args;
#else
#define TD_CASE_AVX512(name, args)
#endif
#if defined(TD_ISA_HAS_avx2)
#define TD_CASE_AVX2(name, args) \
  case Isa::avx2:                \
    return isa_avx2::name args;
#else
#define TD_CASE_AVX2(name, args)
#endif
#define TD_KERNEL(ret, name, params, args) \
  ret name params {                        \
    switch (active_isa()) {                \
      TD_CASE_AVX512(name, args)           \
      TD_CASE_AVX2(name, args)             \
      default:                             \
        return isa_baseline::name args;    \
    }                                      \
  }
#elif defined(TD_ISA_NATIVE)
#define TD_KERNEL(ret, name, params, args) \
  ret name params { return isa_native::name args; }
#else
#define TD_KERNEL(ret, name, params, args) \
  ret name params { return isa_baseline::name args; }
#endif
#include "engine/kernels/kernels.def"
#undef TD_KERNEL

}  // namespace kernels

std::string kernel_isa() { return kernels::kNames[static_cast<int>(kernels::active_isa())]; }

std::vector<std::string> supported_isas() {
  std::vector<std::string> out;
  for (kernels::Isa isa : kernels::kCompiled)
    if (kernels::cpu_runs(isa)) out.emplace_back(kernels::kNames[static_cast<int>(isa)]);
  return out;
}

}  // namespace td
