#!/bin/sh
# Runs each libFuzzer harness of a CR_FUZZ build for a bounded time, then replays the saved
# inputs of fuzz/regressions/ (docs/fuzzing.md). `make fuzz` calls it.
#
#   fuzz/run.sh <build-dir> <seconds-per-harness> [harness...]
#
# Each harness starts from its committed seeds (fuzz/corpus/<harness>/) and its dictionary
# (fuzz/<harness>.dict); the inputs it finds go to <build-dir>/fuzz/work/<harness>/ (the
# committed corpus is never written), a crashing input to <build-dir>/fuzz/artifacts/. The
# regression inputs are each run once. Exits 1 when a harness found a crash, leak,
# timeout or out-of-memory, or a regression input fails.
#
# Environment: FUZZ_TIMEOUT (seconds one input may take, 10), FUZZ_RSS_MB (2048),
# FUZZ_FLAGS (more libFuzzer flags, e.g. "-fork=1 -ignore_crashes=1" for a long run).
set -u

build=${1:?usage: fuzz/run.sh <build-dir> <seconds> [harness...]}
seconds=${2:?usage: fuzz/run.sh <build-dir> <seconds> [harness...]}
shift 2
src=$(cd "$(dirname "$0")" && pwd)
harnesses=${*:-fuzz_eval_json fuzz_tape fuzz_rules}
timeout=${FUZZ_TIMEOUT:-10}
rss=${FUZZ_RSS_MB:-2048}

# One thread in OpenBLAS (one core per harness); the sanitizers stop at the first error.
export OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# Stack traces with function names and lines (llvm-symbolizer of any LLVM version will do).
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
    for s in llvm-symbolizer-19 /usr/lib/llvm-19/bin/llvm-symbolizer llvm-symbolizer; do
        if command -v "$s" >/dev/null 2>&1; then
            ASAN_SYMBOLIZER_PATH=$(command -v "$s")
            export ASAN_SYMBOLIZER_PATH
            break
        fi
    done
fi

# Longest input of each harness (bytes).
max_len() {
    case $1 in
        fuzz_eval_json) echo 4096 ;;
        fuzz_tape) echo 2048 ;;
        *) echo 1024 ;;
    esac
}

failed=""
for h in $harnesses; do
    bin=$build/fuzz/$h
    if [ ! -x "$bin" ]; then
        echo "fuzz: $bin not built" >&2
        failed="$failed $h"
        continue
    fi
    work=$build/fuzz/work/$h
    art=$build/fuzz/artifacts/$h
    log=$build/fuzz/$h.log
    mkdir -p "$work" "$art"
    dict=""
    [ -f "$src/$h.dict" ] && dict="-dict=$src/$h.dict"
    echo "==> $h: $seconds s"
    # shellcheck disable=SC2086 # FUZZ_FLAGS and dict are lists of words
    "$bin" -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb="$rss" \
        -max_len="$(max_len "$h")" -print_final_stats=1 $dict -artifact_prefix="$art/" \
        ${FUZZ_FLAGS:-} "$work" "$src/corpus/$h" >"$log" 2>&1
    rc=$?
    # executions: the final statistics, or in fork mode the last "#N: cov: ..." line
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    [ -n "$runs" ] || runs=$(sed -n 's/^#\([0-9]*\): cov:.*/\1/p' "$log" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -n 1)
    echo "    $h: ${runs:-?} runs, ${cov:-no coverage line}, $(ls "$work" | wc -l) inputs in $work," \
        "$(ls "$art" | wc -l) in $art"
    if [ $rc -ne 0 ]; then
        echo "    $h FAILED (status $rc); the end of $log:"
        tail -n 60 "$log" | sed 's/^/    | /'
        failed="$failed $h"
    fi
done

# The regression inputs: each harness runs each of its saved inputs once (a README.md or
# *.txt beside them is a note, not an input).
for h in $harnesses; do
    dir=$src/regressions/$h
    [ -d "$dir" ] || continue
    bin=$build/fuzz/$h
    [ -x "$bin" ] || continue
    for f in "$dir"/*; do
        case $f in *.md | *.txt) continue ;; esac
        [ -f "$f" ] || continue
        if "$bin" -timeout="$timeout" -rss_limit_mb="$rss" "$f" >"$build/fuzz/replay.log" 2>&1; then
            echo "    regression $h/$(basename "$f"): ok"
        else
            echo "    regression $h/$(basename "$f") FAILED:"
            grep -E 'ERROR|SUMMARY|runtime error|#[0-9]+ 0x' "$build/fuzz/replay.log" | head -n 12 | sed 's/^/    | /'
            failed="$failed $h/$(basename "$f")"
        fi
    done
done

if [ -n "$failed" ]; then
    echo "fuzz: failed:$failed"
    exit 1
fi
echo "fuzz: every harness ran $seconds s without a finding; every regression input passes"
