# chainrules_differentiate(): differentiate plain C at build time with chainrules-ad
# (docs/source-transformation.md, "Build integration").
#
#   chainrules_differentiate(TARGET app SOURCE model.c
#                            [REVERSE f ...] [REVERSE_SET f ...] [FORWARD g ...] [VECTOR h ...] [WRT x ...]
#                            [JACOBIAN j ...] [DIMS a=N ...]
#                            [EMIT_RULES f ...] [RULES_FUNCTION name] [RULES lib.so ...]
#                            [OUTPUT model_ad.c] [FLAGS -DX=1 ...] [LANE_RANGES])
#
# runs `chainrules-ad` on SOURCE whenever it changes and adds the generated file to TARGET
# (which must also compile SOURCE itself, and link chainrules). The input is parsed with the
# target's include directories and compile definitions, then FLAGS. The tool is the
# in-tree target `chainrules-ad` when there is one, else CHAINRULES_AD_EXECUTABLE (found
# next to the installed package).
function(chainrules_differentiate)
  cmake_parse_arguments(CRD "LANE_RANGES" "TARGET;SOURCE;OUTPUT;RULES_FUNCTION"
                        "REVERSE;REVERSE_SET;FORWARD;VECTOR;JACOBIAN;DIMS;WRT;EMIT_RULES;RULES;FLAGS" ${ARGN})
  if(NOT CRD_TARGET OR NOT CRD_SOURCE)
    message(FATAL_ERROR "chainrules_differentiate: TARGET and SOURCE are required")
  endif()
  if(NOT CRD_REVERSE AND NOT CRD_REVERSE_SET AND NOT CRD_FORWARD AND NOT CRD_VECTOR AND NOT CRD_JACOBIAN AND
     NOT CRD_EMIT_RULES)
    message(FATAL_ERROR
            "chainrules_differentiate: name functions with REVERSE, FORWARD, VECTOR or JACOBIAN")
  endif()
  get_filename_component(src "${CRD_SOURCE}" ABSOLUTE)
  if(CRD_OUTPUT)
    get_filename_component(out "${CRD_OUTPUT}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  else()
    get_filename_component(stem "${CRD_SOURCE}" NAME_WE)
    set(out "${CMAKE_CURRENT_BINARY_DIR}/${stem}_ad.c")
  endif()
  if(TARGET chainrules-ad)
    set(tool $<TARGET_FILE:chainrules-ad>)
    set(tool_dep chainrules-ad)
  elseif(CHAINRULES_AD_EXECUTABLE)
    set(tool "${CHAINRULES_AD_EXECUTABLE}")
    set(tool_dep "${CHAINRULES_AD_EXECUTABLE}")
  else()
    message(FATAL_ERROR "chainrules_differentiate: chainrules-ad was not found (install it, or set "
                        "CHAINRULES_AD_EXECUTABLE)")
  endif()
  set(args)
  foreach(mode REVERSE REVERSE_SET FORWARD VECTOR JACOBIAN DIMS WRT EMIT_RULES)
    if(CRD_${mode})
      string(TOLOWER "${mode}" opt)
      string(REPLACE "_" "-" opt "${opt}")
      list(JOIN CRD_${mode} "," names)
      list(APPEND args "--${opt}" "${names}")
    endif()
  endforeach()
  if(CRD_LANE_RANGES)
    list(APPEND args --lane-ranges)
  endif()
  if(CRD_RULES_FUNCTION)
    list(APPEND args --rules-function "${CRD_RULES_FUNCTION}")
  endif()
  foreach(lib IN LISTS CRD_RULES)
    list(APPEND args --rules "${lib}")
  endforeach()
  set(incs "$<TARGET_PROPERTY:${CRD_TARGET},INCLUDE_DIRECTORIES>")
  set(defs "$<TARGET_PROPERTY:${CRD_TARGET},COMPILE_DEFINITIONS>")
  add_custom_command(
    OUTPUT "${out}"
    COMMAND ${tool} ${args} -o "${out}" "${src}" --
            "$<$<BOOL:${incs}>:-I$<JOIN:${incs},;-I>>"
            "$<$<BOOL:${defs}>:-D$<JOIN:${defs},;-D>>" ${CRD_FLAGS}
    DEPENDS "${src}" ${tool_dep}
    IMPLICIT_DEPENDS C "${src}"
    COMMENT "chainrules-ad: differentiating ${CRD_SOURCE}"
    COMMAND_EXPAND_LISTS VERBATIM)
  target_sources(${CRD_TARGET} PRIVATE "${out}")
endfunction()
