# Install rules: the library, the public headers (include/ plus the generated version.h;
# src/ headers are never installed), chainrules.pc and the CMake package
# (chainrules-config.cmake, chainrules-config-version.cmake, chainrules-targets.cmake).
include(CMakePackageConfigHelpers)

set(CR_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/chainrules
    CACHE STRING "Where chainrules-config.cmake is installed (relative to the prefix)")
set(CR_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig
    CACHE STRING "Where chainrules.pc is installed (relative to the prefix)")

install(TARGETS chainrules EXPORT chainrules-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/chainrules/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/chainrules)
# The license (MIT) goes with every installed copy: <prefix>/share/doc/chainrules/LICENSE.
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})

# --- pkg-config -----------------------------------------------------------------------
# A static chainrules needs its backends at link time: `pkg-config --static` pulls them
# in through Requires.private (and the thread flags through Libs.private).
set(CR_PC_REQUIRES_PRIVATE "")
foreach(m IN ITEMS ${CR_CBLAS_PC} ${CR_LAPACKE_PC})
  if(m)
    string(APPEND CR_PC_REQUIRES_PRIVATE " ${m}")
  endif()
endforeach()
string(STRIP "${CR_PC_REQUIRES_PRIVATE}" CR_PC_REQUIRES_PRIVATE)
set(CR_PC_LIBS_PRIVATE "${CMAKE_THREAD_LIBS_INIT}")
foreach(d IN ITEMS LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${d}}")
    set(CR_PC_${d} "${CMAKE_INSTALL_${d}}")
  else()
    set(CR_PC_${d} "\${prefix}/${CMAKE_INSTALL_${d}}")
  endif()
endforeach()
# The prefix is only known at install time (cmake --install --prefix may override
# CMAKE_INSTALL_PREFIX), so the file is configured twice: now with everything but the
# prefix, then by the install script below.
set(CR_PC_PREFIX "@CR_PC_PREFIX@")
configure_file(${PROJECT_SOURCE_DIR}/chainrules.pc.in
               ${PROJECT_BINARY_DIR}/pkgconfig/chainrules.pc.in @ONLY)
install(CODE "
  set(CR_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${PROJECT_BINARY_DIR}/pkgconfig/chainrules.pc.in\"
                 \"${PROJECT_BINARY_DIR}/pkgconfig/install/chainrules.pc\" @ONLY)
")
install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/install/chainrules.pc
  DESTINATION ${CR_PKGCONFIG_DIR})

# --- CMake package --------------------------------------------------------------------
get_target_property(cr_type chainrules TYPE)
if(cr_type STREQUAL "STATIC_LIBRARY")
  set(CR_STATIC_LIB ON)
else()
  set(CR_STATIC_LIB OFF)
endif()
install(EXPORT chainrules-targets NAMESPACE chainrules:: DESTINATION ${CR_CMAKE_DIR})
install(FILES ${PROJECT_SOURCE_DIR}/cmake/chainrules-ad.cmake DESTINATION ${CR_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/chainrules-config.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/chainrules-config.cmake
  INSTALL_DESTINATION ${CR_CMAKE_DIR})
# Before 1.0 any minor release may break the API (STYLE.md §12).
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(cr_compat SameMinorVersion)
else()
  set(cr_compat SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/chainrules-config-version.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${cr_compat})
install(FILES ${PROJECT_BINARY_DIR}/cmake/chainrules-config.cmake
              ${PROJECT_BINARY_DIR}/cmake/chainrules-config-version.cmake
  DESTINATION ${CR_CMAKE_DIR})
