# Finds td's dependencies, all from Debian packages (third_party/debian_packages.txt).
find_package(Threads REQUIRED)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(xtl REQUIRED)
find_package(xsimd REQUIRED)
find_package(xtensor REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
if(TD_BUILD_TESTS)
  find_package(doctest REQUIRED)
endif()
if(TD_BUILD_TOOLS)
  find_package(CLI11 REQUIRED)
endif()

find_library(TD_OPENBLAS_LIBRARY NAMES openblas
  PATHS /usr/lib/x86_64-linux-gnu/openblas-pthread /usr/lib/x86_64-linux-gnu)
if(TD_OPENBLAS_LIBRARY)
  option(TD_USE_OPENBLAS "Use OpenBLAS as Eigen's BLAS backend" ON)
else()
  option(TD_USE_OPENBLAS "Use OpenBLAS as Eigen's BLAS backend" OFF)
endif()

# libzip for PyTorch's .pt checkpoints (zip archives): optional, see TD_TORCH_CHECKPOINTS.
set(TD_USE_LIBZIP OFF)
if(NOT TD_TORCH_CHECKPOINTS STREQUAL "OFF")
  find_path(TD_LIBZIP_INCLUDE_DIR zip.h)
  find_library(TD_LIBZIP_LIBRARY NAMES zip)
  if(TD_LIBZIP_INCLUDE_DIR AND TD_LIBZIP_LIBRARY)
    set(TD_USE_LIBZIP ON)
  elseif(TD_TORCH_CHECKPOINTS STREQUAL "ON")
    message(FATAL_ERROR "TD_TORCH_CHECKPOINTS=ON but libzip was not found (apt-get install libzip-dev)")
  endif()
endif()
message(STATUS "td: PyTorch .pt checkpoints: ${TD_USE_LIBZIP} (TD_TORCH_CHECKPOINTS=${TD_TORCH_CHECKPOINTS})")

# MPI for sharding an ensemble's sets across processes (vmap/distributed.h, target td::mpi):
# optional, see TD_MPI.
set(TD_USE_MPI OFF)
if(NOT TD_MPI STREQUAL "OFF")
  set(MPI_CXX_SKIP_MPICXX ON)  # the C API only, through the C++ compiler
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(TD_USE_MPI ON)
  elseif(TD_MPI STREQUAL "ON")
    message(FATAL_ERROR "TD_MPI=ON but MPI was not found (apt-get install libopenmpi-dev openmpi-bin)")
  endif()
endif()
message(STATUS "td: MPI (td::mpi): ${TD_USE_MPI} (TD_MPI=${TD_MPI})")
