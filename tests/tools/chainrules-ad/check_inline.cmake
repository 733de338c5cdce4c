# The tool inlines small straight-line static helpers (tools/chainrules-ad/inline.c): the
# derivative files FILES must not hold a split forward/adjoint pair of any of the helpers
# named in HELPERS (cr_ad_<helper>_fw_<mask>), which a call that is not inlined gets.
foreach(f IN LISTS FILES)
  if(NOT EXISTS "${f}")
    message(FATAL_ERROR "${f}: missing")
  endif()
  file(READ "${f}" text)
  foreach(h IN LISTS HELPERS)
    if(text MATCHES "cr_ad_${h}_(fw|bw)_[0-9]+")
      message(FATAL_ERROR "${f}: the helper ${h} was not inlined (${CMAKE_MATCH_0})")
    endif()
  endforeach()
endforeach()
