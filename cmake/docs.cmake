# `docs` target: the API reference of include/ by doxygen, into <build>/docs/html.
# Warnings are errors unless -DCR_DOCS_WERROR=OFF. The Doxyfile at the top of the tree
# holds the settings; cmake/doxygen.cmake adds the paths of this build and runs it.
find_program(DOXYGEN_EXECUTABLE doxygen)
option(CR_DOCS_WERROR "Doxygen warnings fail the docs target" ON)
if(DOXYGEN_EXECUTABLE)
  set(CR_DOCS_COMMAND ${CMAKE_COMMAND}
      -DDOXYGEN=${DOXYGEN_EXECUTABLE}
      -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
      -DBINARY_DIR=${PROJECT_BINARY_DIR}
      -DVERSION=${PROJECT_VERSION})
  add_custom_target(docs
    COMMAND ${CR_DOCS_COMMAND} -DWERROR=${CR_DOCS_WERROR} -P ${PROJECT_SOURCE_DIR}/cmake/doxygen.cmake
    COMMENT "doxygen: API reference in ${PROJECT_BINARY_DIR}/docs/html"
    VERBATIM)
endif()
