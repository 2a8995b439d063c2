# Compiles engine/kernels/ once per instruction-set level into the td library (isa.h says which
# levels; isa.cpp picks one at run time). Each level's objects are linked into one relocatable
# object whose only global symbols are its own namespace's (td::kernels::isa_<level>): the
# inline functions of Eigen, xsimd and the standard library that a level compiled with its own
# instructions stay private to it, so the linker cannot hand an AVX-512 copy to baseline code.

set(TD_GCC12_AVX512_FLAGS "")
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  # GCC 12's SLP vectoriser builds wrong 256-bit constants with AVX-512 when the top elements are
  # zero (Shape{1, 1, 0, 0} read [1, 1, 1, 1]); its AVX-512 intrinsics also warn of their own
  # deliberately uninitialised temporaries.
  set(TD_GCC12_AVX512_FLAGS -fno-tree-slp-vectorize -Wno-uninitialized -Wno-maybe-uninitialized)
endif()

# The norms' y = (x - mean) * inv * w + b rounds twice at every level, as when the ops compiled it
# for the baseline alone: a level with FMA would fuse it and change the norms' last bits.
set_source_files_properties(${PROJECT_SOURCE_DIR}/engine/kernels/norm.cpp
                            PROPERTIES COMPILE_OPTIONS -ffp-contract=off)

function(td_kernel_objects level)
  set(lib td_kernels_${level})
  add_library(${lib} OBJECT ${TD_KERNEL_SOURCES})
  target_include_directories(${lib} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${lib} PRIVATE TD_ISA=isa_${level})
  if(TD_USE_OPENBLAS)
    # Eigen forwards its GEMMs to OpenBLAS (which picks its own kernels for the CPU)
    target_compile_definitions(${lib} PRIVATE EIGEN_USE_BLAS TD_WITH_OPENBLAS)
  endif()
  target_compile_options(${lib} PRIVATE -Wall -Wextra ${ARGN} ${TD_SAN_FLAGS})
  target_link_libraries(${lib} PRIVATE Eigen3::Eigen xtensor xsimd Threads::Threads)
endfunction()

if(TD_NATIVE)
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS -march=native)
  check_cxx_source_compiles("#ifndef __AVX512F__\n#error no AVX-512\n#endif\nint main() {}"
                            TD_NATIVE_AVX512)
  unset(CMAKE_REQUIRED_FLAGS)
  set(native_flags -march=native)
  if(TD_NATIVE_AVX512)
    list(APPEND native_flags ${TD_GCC12_AVX512_FLAGS})
  endif()
  td_kernel_objects(native ${native_flags})
  target_compile_definitions(td PRIVATE TD_ISA_NATIVE)
  target_compile_options(td PRIVATE ${native_flags})
  target_sources(td PRIVATE $<TARGET_OBJECTS:td_kernels_native>)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  # GCC makes a static inside an inline function a "unique" global, which the step below cannot
  # make private (each level would define it): as a weak one it can.
  set(private_statics "")
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    set(private_statics -fno-gnu-unique)
  endif()
  # A subset of the levels builds faster: tools/check.sh's sanitizer builds, which run one level,
  # compile only that one (baseline always stays, for CPUs below the others)
  set(TD_KERNEL_LEVELS "baseline;avx2;avx512" CACHE STRING
      "x86-64 kernel levels compiled into td (a subset of baseline;avx2;avx512)")
  set(levels baseline ${TD_KERNEL_LEVELS})
  list(REMOVE_DUPLICATES levels)
  set(level_flags_baseline "")
  set(level_flags_avx2 -march=x86-64-v3)
  set(level_flags_avx512 -march=x86-64-v4 ${TD_GCC12_AVX512_FLAGS})
  foreach(level ${levels})
    if(NOT level MATCHES "^(baseline|avx2|avx512)$")
      message(FATAL_ERROR "TD_KERNEL_LEVELS: '${level}' is not one of baseline, avx2, avx512")
    endif()
    td_kernel_objects(${level} ${level_flags_${level}} ${private_statics})
    target_compile_definitions(td PRIVATE TD_ISA_HAS_${level})
  endforeach()
  target_compile_definitions(td PRIVATE TD_ISA_MULTI)
  # GNU ld: --force-group-allocation (which lld lacks, clang's CMAKE_LINKER) dissolves the COMDAT
  # groups so that objcopy can make their symbols private
  find_program(TD_GNU_LD NAMES ld.bfd ld REQUIRED)
  foreach(level ${levels})
    set(merged ${CMAKE_CURRENT_BINARY_DIR}/td_kernels_${level}.o)
    string(LENGTH "isa_${level}" len)
    add_custom_command(OUTPUT ${merged}
      COMMAND ${TD_GNU_LD} -r --force-group-allocation -o ${merged}.all
              $<TARGET_OBJECTS:td_kernels_${level}>
      COMMAND ${CMAKE_OBJCOPY} -w --keep-global-symbol=_ZN2td7kernels${len}isa_${level}*
              ${merged}.all ${merged}
      DEPENDS $<TARGET_OBJECTS:td_kernels_${level}>
      COMMENT "Linking the ${level} kernels into one object"
      COMMAND_EXPAND_LISTS VERBATIM)
    target_sources(td PRIVATE ${merged})
    add_dependencies(td td_kernels_${level})
  endforeach()
else()
  td_kernel_objects(baseline)
  target_sources(td PRIVATE $<TARGET_OBJECTS:td_kernels_baseline>)
endif()
