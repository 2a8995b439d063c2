#!/usr/bin/env bash
# Builds td's .deb with cpack from the build tree in $1, unpacks it into a scratch root, and
# builds the consumer program against it twice: with find_package(td) and with pkg-config.
set -euo pipefail
build=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" > cpack.log)
deb=$(ls "$work"/*.deb)
dpkg-deb -x "$deb" "$work/root"
cmake -S "$src" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/root/usr" > /dev/null
cmake --build "$work/cmake" --target consumer > /dev/null
"$work/cmake/consumer"
pc_dir=$(dirname "$(find "$work/root" -name td.pc)")
# shellcheck disable=SC2046
c++ -O2 "$src/main.cpp" -o "$work/pc_consumer" $(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags --libs td)
"$work/pc_consumer"
test -x "$work/root/usr/bin/tdvmap" && "$work/root/usr/bin/tdvmap" --version | head -1
