# Runs doxygen with the top-level Doxyfile plus the paths of one build tree.
# cmake -DDOXYGEN=<exe> -DSOURCE_DIR=<src> -DBINARY_DIR=<build> -DVERSION=<x.y.z>
#       -DWERROR=<bool> -P cmake/doxygen.cmake
foreach(v DOXYGEN SOURCE_DIR BINARY_DIR VERSION)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "doxygen.cmake: -D${v}=... is required")
  endif()
endforeach()
if(WERROR)
  set(wae FAIL_ON_WARNINGS)
else()
  set(wae NO)
endif()
set(out "${BINARY_DIR}/docs")
file(MAKE_DIRECTORY "${out}")
file(WRITE "${out}/Doxyfile.build" "@INCLUDE = \"${SOURCE_DIR}/Doxyfile\"
INPUT = \"${SOURCE_DIR}/include\" \"${BINARY_DIR}/include\"
STRIP_FROM_PATH = \"${SOURCE_DIR}/include\" \"${BINARY_DIR}/include\"
STRIP_FROM_INC_PATH = \"${SOURCE_DIR}/include\" \"${BINARY_DIR}/include\"
INCLUDE_PATH = \"${SOURCE_DIR}/include\" \"${BINARY_DIR}/include\"
OUTPUT_DIRECTORY = \"${out}\"
PROJECT_NUMBER = ${VERSION}
WARN_AS_ERROR = ${wae}
WARN_LOGFILE =
")
execute_process(COMMAND "${DOXYGEN}" "${out}/Doxyfile.build"
                WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "doxygen failed (${rc}); warnings are errors (WERROR=${WERROR})")
endif()
message(STATUS "API reference: ${out}/html/index.html")
