#!/usr/bin/env bash
# Cross-builds td and its whole test suite for arm64 (aarch64) with Debian's cross compiler and
# runs ctest with every test binary (td_tests, tdvmap, the installed-package consumer) executed
# under qemu-user. Not part of tools/check.sh: it takes about an hour on 2 cores. Installs the
# missing Debian packages first (needs root). Extra arguments go to ctest (e.g. -R cli_).
set -euo pipefail
cd "$(dirname "$0")/.."
third_party/install_deps.sh
# The cross compiler and the emulator. td's other dependencies are header-only, so the host's
# packages serve the cross build (tools/aarch64-linux-gnu.cmake); OpenBLAS is left out.
pkgs=(g++-aarch64-linux-gnu qemu-user)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "td: installing missing Debian packages: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "td: need root to apt-get install ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

jobs=2
# TD_NATIVE=OFF: -march=native means nothing to a cross compiler; aarch64 always has NEON, which
# xsimd and Eigen use without it. TD_MPI=OFF: the host's MPI is x86-64's (td::mpi is tested natively).
cmake -S . -B build-arm64 -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/tools/aarch64-linux-gnu.cmake" -DTD_NATIVE=OFF -DTD_USE_OPENBLAS=OFF \
  -DTD_MPI=OFF
nice -n 10 cmake --build build-arm64 -j"$jobs"
# Emulation is several times slower than the host: a generous per-test timeout.
nice -n 10 ctest --test-dir build-arm64 --output-on-failure -j"$jobs" --timeout 1200 "$@"
