# chainrules-mpi (include/chainrules/mpi.h, docs/mpi.md): MPI communication recorded on the
# tape. Its own library, libchainrules-mpi, over libchainrules and the MPI found by
# find_package(MPI); not built (with a message) when MPI is absent. Installed with its own
# pkg-config file, chainrules-mpi.pc. Sets CR_MPI_FOUND for tests/, examples/ and bench/,
# and CR_MPIEXEC_ARGS: the launcher's arguments before the rank count (mpirun -np N), with
# --allow-run-as-root when configured as root (as CI runs).
option(CR_MPI "Build chainrules-mpi when MPI is found" ON)
set(CR_MPI_FOUND OFF)
# The fuzzing tree builds the library and the harnesses only.
if(CR_MPI AND NOT CR_FUZZ)
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
    set(CR_MPI_FOUND ON)
  else()
    message(STATUS "chainrules-mpi: MPI not found, not built "
                   "(Debian: libopenmpi-dev openmpi-bin; tools/deps.sh installs them)")
  endif()
endif()

if(CR_MPI_FOUND)
  add_library(chainrules-mpi ${CMAKE_CURRENT_SOURCE_DIR}/src/mpi/mpi.c
                            ${CMAKE_CURRENT_SOURCE_DIR}/src/mpi/dual.c)
  add_library(chainrules::chainrules-mpi ALIAS chainrules-mpi)
  target_link_libraries(chainrules-mpi PUBLIC chainrules MPI::MPI_C)
  set_target_properties(chainrules-mpi PROPERTIES
    C_VISIBILITY_PRESET hidden
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}
    POSITION_INDEPENDENT_CODE ON
    EXPORT_NAME chainrules-mpi)
  if(BUILD_SHARED_LIBS)
    target_compile_definitions(chainrules-mpi PRIVATE CR_SHARED_BUILD)
  endif()
  cr_set_warnings(chainrules-mpi)

  # The launcher: mpirun -np N --oversubscribe (more ranks than cores), and as root
  # --allow-run-as-root (OpenMPI refuses root otherwise).
  set(CR_MPIEXEC_ARGS ${MPIEXEC_PREFLAGS})
  execute_process(COMMAND id -u OUTPUT_VARIABLE cr_uid OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE cr_mpiexec_version
                  ERROR_QUIET)
  if(cr_mpiexec_version MATCHES "Open MPI|OpenRTE")
    list(APPEND CR_MPIEXEC_ARGS --oversubscribe)
    if(cr_uid STREQUAL "0")
      list(APPEND CR_MPIEXEC_ARGS --allow-run-as-root)
    endif()
  endif()
endif()
