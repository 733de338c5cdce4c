# CR_FUZZ: the libFuzzer harnesses of fuzz/ (docs/fuzzing.md). Needs clang with its
# libFuzzer runtime (Debian: clang-19 and libclang-rt-19-dev; `make fuzz` installs them and
# configures build-fuzz/ with CC=clang-19). Every target of the tree is built with
# AddressSanitizer + UBSan (CR_SANITIZE is forced to "address;undefined") and with
# -fsanitize=fuzzer-no-link, so that the library's branches feed the fuzzer's coverage; the
# harnesses alone link -fsanitize=fuzzer (libFuzzer's main).
if(CR_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "CR_FUZZ=ON needs clang (CC=clang-19; Debian: clang-19 "
                        "libclang-rt-19-dev), not ${CMAKE_C_COMPILER_ID}")
  endif()
  if(CR_VALGRIND)
    message(FATAL_ERROR "CR_FUZZ and CR_VALGRIND cannot be combined")
  endif()
  # A normal variable shadows the cache entry for the rest of the configuration.
  set(CR_SANITIZE "address;undefined")
  include(CheckCSourceCompiles)
  include(CMakePushCheckState)
  cmake_push_check_state(RESET)
  set(CMAKE_REQUIRED_QUIET ON)
  set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer,address,undefined")
  check_c_source_compiles(
    "#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }"
    CR_FUZZ_LINKS)
  cmake_pop_check_state()
  if(NOT CR_FUZZ_LINKS)
    message(FATAL_ERROR "CR_FUZZ=ON: ${CMAKE_C_COMPILER} cannot link -fsanitize=fuzzer "
                        "(Debian: install libclang-rt-19-dev for clang-19)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
