# Third-party dependencies of the rtx library.
#
# Provides:
#   OpenMP::OpenMP_CXX, fmt::fmt, spdlog::spdlog, ZLIB::ZLIB  (imported targets)
#   rtx::blas  an interface target with the CBLAS include path and OpenBLAS
include_guard(GLOBAL)

find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(fmt CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(ZLIB REQUIRED)  # gzip-compressed dataset files (IDX)

# --- BLAS: OpenBLAS through pkg-config first, then FindBLAS. ---------------
add_library(rtx_blas INTERFACE)
add_library(rtx::blas ALIAS rtx_blas)

find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(RTX_OPENBLAS QUIET IMPORTED_TARGET openblas)
endif()

if(RTX_OPENBLAS_FOUND)
  message(STATUS "rtx: BLAS = OpenBLAS ${RTX_OPENBLAS_VERSION} (pkg-config)")
  target_link_libraries(rtx_blas INTERFACE PkgConfig::RTX_OPENBLAS)
else()
  set(BLA_VENDOR OpenBLAS)
  find_package(BLAS)
  if(NOT BLAS_FOUND)
    unset(BLA_VENDOR)
    find_package(BLAS REQUIRED)
  endif()
  find_path(RTX_CBLAS_INCLUDE_DIR cblas.h
    PATH_SUFFIXES openblas openblas-pthread x86_64-linux-gnu/openblas-pthread)
  if(NOT RTX_CBLAS_INCLUDE_DIR)
    message(FATAL_ERROR "rtx: cblas.h not found (install libopenblas-dev)")
  endif()
  message(STATUS "rtx: BLAS = ${BLAS_LIBRARIES} (FindBLAS), cblas.h in ${RTX_CBLAS_INCLUDE_DIR}")
  target_link_libraries(rtx_blas INTERFACE BLAS::BLAS)
  target_include_directories(rtx_blas INTERFACE "${RTX_CBLAS_INCLUDE_DIR}")
endif()
