#!/usr/bin/env bash
# Builds the tdvmap tool and runs its demo. Installs missing Debian packages first (needs root).
set -euo pipefail
cd "$(dirname "$0")/.."
third_party/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j2 --target tdvmap
build/tools/tdvmap/tdvmap demo
