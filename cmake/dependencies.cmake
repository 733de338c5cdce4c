# Third-party dependencies of the library: threads, libm, and the optional CBLAS/LAPACKE
# backends (found through pkg-config, DESIGN.md §4).
#
# Sets:
#   CR_LIBM              libm must be linked explicitly (true on glibc)
#   CR_HAVE_CBLAS        CBLAS found and links (a program calling cblas_ddot builds)
#   CR_HAVE_LAPACKE      LAPACKE found and links (a program calling LAPACKE_dgesv builds)
#   CR_CBLAS_PC          pkg-config module that provided CBLAS   (for chainrules.pc)
#   CR_LAPACKE_PC        pkg-config module that provided LAPACKE (for chainrules.pc)
#   CR_BACKEND_TARGETS   imported targets to link (PkgConfig::CR_CBLAS, PkgConfig::CR_LAPACKE)
#   CR_BACKEND_DEFINES   CR_HAVE_CBLAS=1 / CR_HAVE_LAPACKE=1
include(CheckLibraryExists)
include(CheckCSourceCompiles)
include(CMakePushCheckState)

set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)

check_library_exists(m cos "" CR_LIBM)

set(CR_HAVE_CBLAS OFF)
set(CR_HAVE_LAPACKE OFF)
set(CR_CBLAS_PC "")
set(CR_LAPACKE_PC "")
set(CR_BACKEND_TARGETS "")
set(CR_BACKEND_DEFINES "")

if(CR_WITH_CBLAS OR CR_WITH_LAPACKE OR CR_BUILD_TESTS)
  find_package(PkgConfig)
endif()

# cr_check_backend(<prefix> <symbol-call> <header> <pc-modules>...)
# Finds the first of <pc-modules>, then checks that a program including <header> and
# calling <symbol-call> compiles and links with it. On success sets CR_<prefix>_PC to the
# module name and appends PkgConfig::CR_<prefix> to CR_BACKEND_TARGETS.
macro(cr_check_backend prefix call header)
  set(CR_${prefix}_FOUND OFF)
  if(PKG_CONFIG_FOUND)
    pkg_search_module(CR_${prefix} QUIET IMPORTED_TARGET GLOBAL ${ARGN})
  endif()
  if(CR_${prefix}_FOUND)
    cmake_push_check_state(RESET)
    set(CMAKE_REQUIRED_QUIET ON)
    set(CMAKE_REQUIRED_LIBRARIES PkgConfig::CR_${prefix} m)
    check_c_source_compiles("#include <${header}>\nint main(void) { ${call}; return 0; }"
                            CR_${prefix}_LINKS)
    cmake_pop_check_state()
    if(CR_${prefix}_LINKS)
      set(CR_HAVE_${prefix} ON)
      set(CR_${prefix}_PC ${CR_${prefix}_MODULE_NAME})
      list(APPEND CR_BACKEND_TARGETS PkgConfig::CR_${prefix})
      list(APPEND CR_BACKEND_DEFINES CR_HAVE_${prefix}=1)
    else()
      message(WARNING "chainrules: pkg-config module ${CR_${prefix}_MODULE_NAME} found but "
                      "a program using ${header} does not link; building without ${prefix}")
    endif()
  else()
    message(WARNING "chainrules: none of the pkg-config modules '${ARGN}' found; the "
                    "${prefix} rule families are left out (Debian: see tools/deps.sh)")
  endif()
endmacro()

if(CR_WITH_CBLAS)
  cr_check_backend(CBLAS "double x = 1.0; (void)cblas_ddot(1, &x, 1, &x, 1)" cblas.h
                   cblas openblas)
endif()
if(CR_WITH_LAPACKE)
  cr_check_backend(LAPACKE
    "double a = 2.0, b = 1.0; lapack_int p; (void)LAPACKE_dgesv(LAPACK_COL_MAJOR, 1, 1, &a, 1, &p, &b, 1)"
    lapacke.h lapacke)
endif()
