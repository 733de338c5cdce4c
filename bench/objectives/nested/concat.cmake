# cmake -DOUT=file -DIN="a;b;c" -P concat.cmake: OUT is the concatenation of the IN files
# (the input of a second differentiation: the primal, the tool's first output and the
# function that calls it).
set(text "")
foreach(f IN LISTS IN)
  file(READ "${f}" part)
  string(APPEND text "${part}\n")
endforeach()
file(WRITE "${OUT}.tmp" "${text}")
file(RENAME "${OUT}.tmp" "${OUT}")
