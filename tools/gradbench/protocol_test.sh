#!/bin/sh
# The GradBench protocol without Python (CTest gradbench-protocol): chainrules-gradbench
# answers every message with its id, start with the tool's name, define with success for
# a known module only, evaluate with one "evaluate" timing per run (min_runs) and the
# function's value, bad input with success false and an error, end by exiting; saddle's
# rr (nested: reverse over reverse) in both variants (chainrules-c-tape: TOOL run as
# chainrules-gradbench-tape or with --tape).
#   protocol_test.sh TOOL [chainrules-c | chainrules-c-tape]
set -eu
tool=$1
name=${2:-chainrules-c}
out=$(printf '%s\n' \
    '{"id":0,"kind":"start","eval":"det"}' \
    '{"id":1,"kind":"define","module":"det"}' \
    '{"id":2,"kind":"define","module":"no-such-eval"}' \
    '{"id":3,"kind":"evaluate","module":"det","function":"gradient","input":{"A":[1,2,3,4],"ell":2,"min_runs":3,"min_seconds":0}}' \
    '{"id":4,"kind":"analysis","of":3,"valid":true}' \
    '{"id":5,"kind":"evaluate","module":"hello","function":"double","input":1.5}' \
    '{"id":6,"kind":"evaluate","module":"gmm","function":"objective","input":{"d":2}}' \
    '{"id":7,"kind":"evaluate","module":"saddle","function":"rr","input":{"start":[1,1]}}' \
    '{"id":8,"kind":"end"}' \
    '{"id":9,"kind":"start"}' | "$tool")
fail() { echo "protocol_test: $1"; echo "$out"; exit 1; }
line() { echo "$out" | sed -n "$1p"; }
[ "$(echo "$out" | wc -l)" -eq 9 ] || fail "expected 9 responses (none after end)"
line 1 | grep -q "^{\"id\":0,\"tool\":\"$name\"}\$" || fail "start"
line 2 | grep -q '^{"id":1,"success":true}$' || fail "define det"
line 3 | grep -q '"id":2,"success":false,"error":' || fail "define unknown"
# d det / dA of [[1, 2], [3, 4]] is the cofactor matrix [[4, -3], [-2, 1]]
line 4 | grep -q '"id":3,"success":true,"output":\[4,-3,-2,1\]' || fail "det gradient"
[ "$(line 4 | grep -o '"name":"evaluate"' | wc -l)" -eq 3 ] || fail "min_runs timings"
line 4 | grep -q '"name":"prepare"' || fail "prepare timing"
line 5 | grep -q '^{"id":4}$' || fail "analysis"
line 6 | grep -q '"id":5,"success":true,"output":3[,}]' || fail "hello double"
line 7 | grep -q '"id":6,"success":false,"error":"input has no field' || fail "bad input"
# the saddle point of (x1^2 + y1^2) - (x2^2 + y2^2) from (1, 1) is near the origin: four
# numbers below 1e-3 in magnitude
line 8 | grep -Eq '"id":7,"success":true,"output":\[(-?([0-9]\.[0-9]*e-0*([4-9]|[1-9][0-9])|0(\.0*)?),?){4}\]' ||
    fail "saddle rr"
line 9 | grep -q '^{"id":8}$' || fail "end"
echo "protocol_test: ok"
