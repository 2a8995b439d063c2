#!/usr/bin/env bash
# Builds one libFuzzer target of tests/fuzz with clang (-fsanitize=fuzzer,address,undefined) and
# runs it for SECONDS of wall time at the lowest priority:
#   tools/fuzz.sh safetensors|torch_checkpoint|model_spec|cli_args SECONDS
# New inputs go to build-fuzz/corpus/TARGET (the seeds in tests/fuzz/corpus/TARGET are read, not
# written); a crash is written to build-fuzz/artifacts/TARGET/ and fails the script: add it to
# tests/fuzz/corpus/TARGET/ once fixed, so the replay test keeps it. Installs what it misses
# (clang, libFuzzer, td's dependencies) with apt-get, as root.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: tools/fuzz.sh TARGET SECONDS}
seconds=${2:?usage: tools/fuzz.sh TARGET SECONDS}
case "$target" in
  safetensors | torch_checkpoint) max_len=16384 ;;
  model_spec | cli_args) max_len=4096 ;;
  *) echo "fuzz.sh: unknown target '$target' (safetensors, torch_checkpoint, model_spec, cli_args)" >&2; exit 2 ;;
esac

third_party/install_deps.sh
fuzzer_lib() { ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null; }
if ! command -v clang++ > /dev/null || [ -z "$(fuzzer_lib)" ]; then
  apt-get update -qq
  apt-get install -y -qq clang libclang-rt-14-dev
fi

# -O1 with debug info for readable reports; no -march=native, whose GCC workaround clang lacks
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g" -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link" \
  -DTD_SANITIZE=ON -DTD_NATIVE=OFF -DTD_BUILD_TESTS=OFF -DTD_FUZZ=ON > /dev/null
nice -n 10 cmake --build build-fuzz -j2 --target "fuzz_$target"

mkdir -p "build-fuzz/corpus/$target" "build-fuzz/artifacts/$target"
# allocator_may_return_null: an impossible allocation is td's RuntimeError, as without ASan
ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  nice -n 19 "build-fuzz/tests/fuzz/fuzz_$target" "build-fuzz/corpus/$target" "tests/fuzz/corpus/$target" \
  -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="build-fuzz/artifacts/$target/" -print_final_stats=1
