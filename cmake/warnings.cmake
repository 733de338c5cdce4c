# The warning set of STYLE.md §10 (Lua's makefile list), for every C target of this
# repository: the library, tests, examples, tools and benchmarks.
# -Werror only when CR_WERROR is ON (CI sets it; see Makefile and .ci/run).
set(CR_WARNING_FLAGS
    -Wall -Wextra -pedantic -Wshadow -Wundef -Wwrite-strings -Wredundant-decls
    -Wdouble-promotion -Wmissing-prototypes -Wstrict-prototypes
    -Wold-style-definition -Wconversion -Wvla)

# cr_set_warnings(<target>...)
function(cr_set_warnings)
  foreach(target IN LISTS ARGN)
    if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:${CR_WARNING_FLAGS}>)
      if(CR_WERROR)
        target_compile_options(${target} PRIVATE -Werror)
      endif()
    elseif(MSVC)
      target_compile_options(${target} PRIVATE /W4 $<$<BOOL:${CR_WERROR}>:/WX>)
    endif()
  endforeach()
endfunction()
