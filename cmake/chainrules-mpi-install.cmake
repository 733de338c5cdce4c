# Install rules of chainrules-mpi (cmake/chainrules-mpi.cmake): the library and
# chainrules-mpi.pc, after install.cmake (which sets CR_PC_* and CR_PKGCONFIG_DIR).
install(TARGETS chainrules-mpi
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set(CR_MPI_PC_CFLAGS "")
foreach(d IN LISTS MPI_C_INCLUDE_DIRS)
  string(APPEND CR_MPI_PC_CFLAGS " -I${d}")
endforeach()
set(CR_MPI_PC_LIBS "")
foreach(l IN LISTS MPI_C_LIBRARIES)
  string(APPEND CR_MPI_PC_LIBS " ${l}")
endforeach()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/chainrules-mpi.pc.in
               ${PROJECT_BINARY_DIR}/pkgconfig/chainrules-mpi.pc.in @ONLY)
install(CODE "
  set(CR_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${PROJECT_BINARY_DIR}/pkgconfig/chainrules-mpi.pc.in\"
                 \"${PROJECT_BINARY_DIR}/pkgconfig/install/chainrules-mpi.pc\" @ONLY)
")
install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/install/chainrules-mpi.pc
  DESTINATION ${CR_PKGCONFIG_DIR})
