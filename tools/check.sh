#!/usr/bin/env bash
# Builds td and runs every test: once in Release, once under AddressSanitizer and
# UndefinedBehaviorSanitizer, once under ThreadSanitizer (the thread pool, concurrent blocks of
# sets, two threads on one module). Installs missing Debian packages first (needs root).
set -euo pipefail
cd "$(dirname "$0")/.."
third_party/install_deps.sh
jobs=2

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

# -O1 without debug info: the sanitizers need no more, and it builds much faster
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DTD_SANITIZE=ON
cmake --build build-sanitize -j"$jobs"
# allocator_may_return_null: an impossible allocation fails as it does without ASan (a test
# checks it becomes td's RuntimeError) instead of ASan aborting the process
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-sanitize --output-on-failure -j"$jobs"

cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DTD_SANITIZE_THREAD=ON
cmake --build build-tsan -j"$jobs"
# die_after_fork=0: a test forks a child that starts a pool of its own, which TSan allows only
# when told; allocator_may_return_null as above. A reported race fails its test (exit code 66).
TSAN_OPTIONS=die_after_fork=0:allocator_may_return_null=1:second_deadlock_stack=1 \
  ctest --test-dir build-tsan --output-on-failure -j"$jobs"
