#!/usr/bin/env bash
# Builds td and runs every test: in Release once per kernel level the CPU supports, then at the
# best level under AddressSanitizer and UndefinedBehaviorSanitizer, and under ThreadSanitizer
# (the thread pool, concurrent blocks of sets, two threads on one module). Installs missing Debian
# packages first (needs root).
set -euo pipefail
cd "$(dirname "$0")/.."
third_party/install_deps.sh
jobs=2

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
# The kernels are compiled for several instruction-set levels and one is picked at run time: run
# the suite once per level this CPU supports (TD_ISA caps the choice), with OpenBLAS held to
# kernels of the same generation (its own dispatch would otherwise pick AVX-512 ones).
levels=$(build/tools/tdvmap/tdvmap --version | sed -n 's/.*this CPU runs \([a-z0-9 ]*\);.*/\1/p')
[ -n "$levels" ] || { echo "check.sh: tdvmap --version names no kernel level" >&2; exit 1; }
best=${levels%% *}
for level in $levels; do
  echo "== kernels: $level"
  blas=()  # the best level: OpenBLAS picks its kernels as on a user's machine
  case $level in
    "$best") ;;
    avx2) blas=(OPENBLAS_CORETYPE=Haswell) ;;
    baseline) blas=(OPENBLAS_CORETYPE=Prescott) ;;
  esac
  env TD_ISA="$level" "${blas[@]}" ctest --test-dir build --output-on-failure -j"$jobs"
done

# -O1 without debug info and only the level they run (and the baseline): the sanitizers need no
# more, and it builds much faster. Without MPI: the core must build and pass without it, and
# OpenMPI's own allocations and threads would drown the sanitizers' reports.
san_build=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DTD_KERNEL_LEVELS="$best"
           -DTD_MPI=OFF)
cmake -S . -B build-sanitize "${san_build[@]}" -DTD_SANITIZE=ON
cmake --build build-sanitize -j"$jobs"
# allocator_may_return_null: an impossible allocation fails as it does without ASan (a test
# checks it becomes td's RuntimeError) instead of ASan aborting the process
TD_ISA=$best ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-sanitize --output-on-failure -j"$jobs"

cmake -S . -B build-tsan "${san_build[@]}" -DTD_SANITIZE_THREAD=ON
cmake --build build-tsan -j"$jobs"
# die_after_fork=0: a test forks a child that starts a pool of its own, which TSan allows only
# when told; allocator_may_return_null as above. A reported race fails its test (exit code 66).
TD_ISA=$best TSAN_OPTIONS=die_after_fork=0:allocator_may_return_null=1:second_deadlock_stack=1 \
  ctest --test-dir build-tsan --output-on-failure -j"$jobs"
