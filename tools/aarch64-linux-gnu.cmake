# CMake toolchain for an arm64 (aarch64) cross build with Debian's g++-aarch64-linux-gnu; the
# test binaries run under qemu-user. Used by tools/check_arm64.sh:
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=tools/aarch64-linux-gnu.cmake -DTD_NATIVE=OFF
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Libraries and headers for the target come from the cross compiler's tree only
# (libc6-dev-arm64-cross, libstdc++); programs (python3, qemu) from the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
# td's dependencies are header-only and their headers arch-independent, so the host's Debian
# packages serve: their CMake package files are searched on the host too (after the target tree).
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# Debian installs xtensor's and xsimd's package files under the host's multiarch directory, which
# a search for aarch64 does not look into.
foreach(pkg xtensor xsimd)
  set(dir /usr/lib/${CMAKE_HOST_SYSTEM_PROCESSOR}-linux-gnu/cmake/${pkg})
  if(NOT DEFINED ${pkg}_DIR AND EXISTS ${dir}/${pkg}Config.cmake)
    set(${pkg}_DIR ${dir} CACHE PATH "")
  endif()
endforeach()
# Their headers live in the host's /usr/include. -idirafter searches it only after the cross
# compiler's own directories, so the aarch64 C library headers always win; it also makes CMake
# count /usr/include as implicit, so the imported targets do not put it first with -isystem.
set(CMAKE_CXX_FLAGS_INIT "-idirafter /usr/include")

# ctest (and the tdvmap tests' wrapper) run the aarch64 binaries through qemu-user.
find_program(TD_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${TD_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
