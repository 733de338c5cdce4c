# Test of chainrules-eval (run by CTest as `cmake -DTOOL=<path> -P check_eval.cmake`): the
# output format on a few inputs (decimal %.17g and C99 hex %a of the primal, of the frule
# pushforward of each unit direction and of the rrule cotangents), complex and integer
# arguments, and exit status 2 for an unknown function or an unparsable argument.
if(NOT TOOL)
  message(FATAL_ERROR "usage: cmake -DTOOL=<chainrules-eval> -P check_eval.cmake")
endif()

set(num "-?(inf|nan|[0-9][0-9.]*(e[-+][0-9]+)?)")
set(hex "-?(inf|nan|0x[0-9a-f](\\.[0-9a-f]+)?p[-+][0-9]+)")

function(run expect_rc)
  execute_process(COMMAND ${TOOL} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "chainrules-eval ${ARGN}: exit status ${rc}, expected ${expect_rc}\n"
                        "${out}${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

function(expect pattern)
  if(NOT out MATCHES "${pattern}")
    message(FATAL_ERROR "output does not match '${pattern}':\n${out}")
  endif()
endfunction()

# atan2 at huge arguments: x²+y² would overflow, the partials are ±1/(4e200).
run(0 atan2 1e200 1e200)
expect("f = atan2\\(f64 ${num} ${hex}, f64 ${num} ${hex}\\)\n")
expect("y = 0.78539816339744828 0x1.921fb54442d18p-1\n")
expect("frule e1 = 4.9999999999999999e-201 0x1.87e92154ef7acp-666\n")
expect("frule e2 = -4.9999999999999999e-201 -0x1.87e92154ef7acp-666\n")
expect("rrule dx1 = 4.9999999999999999e-201 0x1.87e92154ef7acp-666\n")
expect("rrule dx2 = -4.9999999999999999e-201 -0x1.87e92154ef7acp-666\n")

# A complex argument: directions 1 and i; the pullback gives conj(f'(z)).
run(0 sin 0.5,1)
expect("y = ${num},${num} ${hex},${hex}\n")
expect("frule e1 = ${num},${num} ${hex},${hex}\n")
expect("frule e1\\*i = ${num},${num} ${hex},${hex}\n")
expect("rrule dx1 = ${num},${num} ${hex},${hex}\n")

# An integer argument gets NoTangent; a float computation stays float.
run(0 ldexp f32:3 int:4)
expect("y = 48 0x1.8p\\+5 \\(f32\\)\n")
expect("frule e1 = 16 0x1p\\+4 \\(f32\\)\n")
expect("rrule dx2 = NoTangent\n")

# A tuple output: one pullback per component.
run(0 sincos 0)
expect("y = \\(0 0x0p\\+0; 1 0x1p\\+0\\)\n")
expect("rrule y1 dx1 = 1 0x1p\\+0\n")
expect("rrule y2 dx1 = -?0 -?0x0p\\+0\n")

# Errors: unknown function, bad argument, wrong arity.
run(2 no_such_function 1)
if(NOT err MATCHES "unknown function 'no_such_function'")
  message(FATAL_ERROR "no message for an unknown function: ${err}")
endif()
run(2 sin one)
if(NOT err MATCHES "cannot parse argument 1 'one'")
  message(FATAL_ERROR "no message for a bad argument: ${err}")
endif()
run(2 atan2 1)

# --json (docs/eval.md): the request file piped through the tool gives one response line
# per request, errors included, and exit status 0; without libcjson it says it is
# unavailable. (tools/test_eval_json.c checks the numbers against finite differences.)
run(0 --help)
if(NOT out MATCHES "--json reads one JSON request per line")
  message(FATAL_ERROR "--help does not describe --json:\n${out}")
endif()
if(JSON)
  execute_process(COMMAND ${TOOL} --json INPUT_FILE ${REQUESTS} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "chainrules-eval --json < ${REQUESTS}: exit status ${rc}\n${err}")
  endif()
  file(STRINGS ${REQUESTS} requests)
  string(REGEX MATCHALL "[^\n]*\n" responses "${out}")
  list(LENGTH requests nreq)
  list(LENGTH responses nresp)
  if(NOT nreq EQUAL nresp)
    message(FATAL_ERROR "${nreq} requests but ${nresp} response lines:\n${out}")
  endif()
  expect("^{\"id\":\"det\",\"primal\":-2,\"type\":\"f64\",\"jvp\":[-0-9.e]+,\"vjp\":\\[\\[\\[")
  expect("\n{\"id\":\"sin-complex\",\"primal\":\\[[-0-9.e]+,[-0-9.e]+\\],\"type\":\"c128\",")
  expect("\n{\"id\":\"svd\",\"primal\":\\[\\[\\[[^\n]*\"type\":\\[\"f64\\[2,2\\]\",\"f64\\[2\\]\"")
  expect("\n{\"id\":\"log0\",\"primal\":\"-inf\",\"type\":\"f64\",\"jvp\":\"inf\"}\n")
  expect("\n{\"id\":\"error-unknown\",\"error\":\"unknown function 'no_such_function'\"}\n")
else()
  run(2 --json)
  if(NOT err MATCHES "--json is unavailable")
    message(FATAL_ERROR "no message for --json without libcjson: ${err}")
  endif()
endif()
