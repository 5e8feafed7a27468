# Finds lookback's dependencies (Debian 12 packages) and stops configuration with
# the exact package to install when one is missing.
find_package(PkgConfig QUIET)

function(lb_require found what package)
  if(NOT ${found})
    message(FATAL_ERROR "lookback needs ${what}. Install it with:\n  sudo apt-get install ${package}\n")
  endif()
endfunction()

lb_require(PKG_CONFIG_FOUND "pkg-config" "pkg-config")

# OpenBLAS through its cblas interface: every matmul goes through sgemm/dgemm.
pkg_check_modules(OPENBLAS IMPORTED_TARGET openblas)
lb_require(OPENBLAS_FOUND "OpenBLAS (cblas)" "libopenblas-dev")

# HDF5, serial C API.
pkg_check_modules(HDF5 IMPORTED_TARGET hdf5)
lb_require(HDF5_FOUND "HDF5 (C library)" "libhdf5-dev")

# zlib's crc32: the checksums of checkpoint tensors.
pkg_check_modules(ZLIB IMPORTED_TARGET zlib)
lb_require(ZLIB_FOUND "zlib" "zlib1g-dev")

# utf8proc: UTF-8 decoding and validation of text corpora (data/text.c).
pkg_check_modules(UTF8PROC IMPORTED_TARGET libutf8proc)
lb_require(UTF8PROC_FOUND "utf8proc (UTF-8 decoding)" "libutf8proc-dev")

# SentencePiece: the bpe and unigram tokenizers of text corpora (data/spm.cc), with its
# trainer; C++, so the C++ runtime is linked too.
pkg_check_modules(SENTENCEPIECE IMPORTED_TARGET sentencepiece)
lb_require(SENTENCEPIECE_FOUND "SentencePiece" "libsentencepiece-dev")

# OpenMP for threads over batch, heads and tiles.
find_package(OpenMP COMPONENTS C)
lb_require(OpenMP_C_FOUND "OpenMP" "libgomp1 (part of gcc)")

# libcsv (RFC 4180 CSV parser) for importing event logs (data/csv.c); it has no pkg-config file.
find_path(CSV_INCLUDE_DIR csv.h)
find_library(CSV_LIBRARY csv)
if(CSV_INCLUDE_DIR AND CSV_LIBRARY)
  set(CSV_FOUND ON)
endif()
lb_require(CSV_FOUND "libcsv (CSV parser)" "libcsv-dev")

# JSON through json-c: the events schema stored in data files and checkpoints (data/),
# and the command line's outputs.
pkg_check_modules(JSONC IMPORTED_TARGET json-c)
lb_require(JSONC_FOUND "json-c" "libjson-c-dev")

find_library(MATH_LIBRARY m)
set(LB_DEP_TARGETS PkgConfig::OPENBLAS PkgConfig::HDF5 PkgConfig::ZLIB PkgConfig::JSONC PkgConfig::UTF8PROC PkgConfig::SENTENCEPIECE stdc++ ${CSV_LIBRARY} OpenMP::OpenMP_C
    ${MATH_LIBRARY})

# glibc's vector math library (libmvec, part of libc6-dev on x86-64): float32 GELU on
# 16 or 8 lanes (kernels/gelu.h). Optional: without it GELU runs the scalar formula.
option(LOOKBACK_MVEC "float32 GELU on glibc's vector math library when it is found" ON)
set(LB_HAVE_MVEC OFF)
set(LB_PC_LIBS_PRIVATE "-lcsv -lstdc++ -lm -fopenmp")
if(LOOKBACK_MVEC AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  find_library(MVEC_LIBRARY mvec)
  if(MVEC_LIBRARY)
    set(LB_HAVE_MVEC ON)
    list(APPEND LB_DEP_TARGETS ${MVEC_LIBRARY})
    set(LB_PC_LIBS_PRIVATE "-lmvec ${LB_PC_LIBS_PRIVATE}")
  endif()
endif()

# MPI (Open MPI) for data-parallel training over processes and hosts. Optional: without
# it the library trains in one process and says so when started by mpirun.
option(LOOKBACK_MPI "Data-parallel training over MPI when an MPI library is found" ON)
set(LB_HAVE_MPI OFF)
set(LB_PC_REQUIRES "openblas hdf5 zlib json-c libutf8proc sentencepiece")
if(LOOKBACK_MPI)
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(LB_HAVE_MPI ON)
    list(APPEND LB_DEP_TARGETS MPI::MPI_C)
    set(LB_PC_REQUIRES "${LB_PC_REQUIRES} ompi-c")
  else()
    message(STATUS "MPI not found: building without data-parallel training "
                   "(sudo apt-get install libopenmpi-dev openmpi-bin to add it)")
  endif()
endif()

# The command line: plots through PLplot.
pkg_check_modules(PLPLOT IMPORTED_TARGET plplot)
lb_require(PLPLOT_FOUND "PLplot" "libplplot-dev")
set(LB_CLI_DEP_TARGETS PkgConfig::JSONC PkgConfig::PLPLOT)

if(LOOKBACK_BUILD_TESTS)
  pkg_check_modules(CUNIT IMPORTED_TARGET cunit)
  lb_require(CUNIT_FOUND "CUnit" "libcunit1-dev")
endif()
