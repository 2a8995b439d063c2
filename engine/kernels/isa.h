#pragma once
// The instruction-set levels td's kernels are compiled for, and the one this process runs.
// On x86-64 every kernel is compiled three times: baseline (x86-64, SSE2), avx2 (x86-64-v3:
// AVX2, FMA, BMI2, F16C) and avx512 (x86-64-v4: AVX-512 F, BW, CD, DQ, VL); on other CPUs once,
// for the target's baseline (NEON on aarch64). -DTD_KERNEL_LEVELS=avx2 (say) leaves out the other
// x86-64 levels but the baseline; a -DTD_NATIVE=ON build has one level, "native", compiled for
// the building machine.
#include <string>
#include <vector>

namespace td {

// The level the kernels run: the best one this CPU supports, capped by the environment variable
// TD_ISA (baseline, avx2 or avx512; read once, on first use). An unknown TD_ISA is ignored, with
// a line on stderr. Results are bit for bit the same on every thread
// count and chunk size at any one level; from one level to another they may differ in the last
// bits (a fused multiply-add rounds once, and vector widths change the order of partial sums).
std::string kernel_isa();
// The levels this CPU can run, best first.
std::vector<std::string> supported_isas();

namespace kernels {
enum class Isa { baseline, avx2, avx512, native };
Isa active_isa();
}  // namespace kernels

}  // namespace td
