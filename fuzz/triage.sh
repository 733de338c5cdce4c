#!/bin/sh
# Replays crash inputs and prints one line per input: the sanitizer's summary and the first
# frames in src/ or tools/, to sort the findings of a long run (docs/fuzzing.md).
#
#   fuzz/triage.sh <build-dir> <harness> <input>...
set -u
build=${1:?usage: fuzz/triage.sh <build-dir> <harness> <input>...}
h=${2:?usage: fuzz/triage.sh <build-dir> <harness> <input>...}
shift 2
export OPENBLAS_NUM_THREADS=1
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && command -v llvm-symbolizer >/dev/null 2>&1; then
    ASAN_SYMBOLIZER_PATH=$(command -v llvm-symbolizer)
    export ASAN_SYMBOLIZER_PATH
fi
for f in "$@"; do
    out=$("$build/fuzz/$h" -timeout=10 "$f" 2>&1)
    what=$(printf '%s\n' "$out" | grep -E 'runtime error|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)' | head -n 1 |
        sed -e 's/^==[0-9]*==//' -e 's/ on address 0x[0-9a-f]*.*//' -e 's/ at pc .*//')
    where=$(printf '%s\n' "$out" | grep -E '#[0-9]+ 0x[0-9a-f]+ in [^ ]+ [^ ]*/(src|tools)/' | head -n 3 |
        awk '{ n = split($NF, p, "/"); printf "%s%s (%s)", (NR > 1 ? " < " : ""), $4, p[n] }')
    echo "$(basename "$f"): ${what:-no finding} | $where"
done
