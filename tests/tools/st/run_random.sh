#!/usr/bin/env bash
# Random C programs through chainrules-ad (docs/source-transformation-testing.md).
#
# For each of FILES seeds: tests/tools/st/gen_random_c writes a program of FUNCS functions and its
# harness; chainrules-ad differentiates every function in reverse and forward mode; the
# program and its derivative file are compiled with the build's compiler and flags, the
# harness (the tape versions, the checks of st_harness.h) without optimisation; the harness
# compares f_rev, f_fwd and f_fwdv with the tape and with central differences; the functions
# the Jacobian mode accepts (no call with active arguments of a function that is not inlined)
# are transformed again with --jacobian (prog_jac.c) and f_jacfwd is compared too. Then every
# case of tests/tools/st/regressions/ goes through the same steps (checked against differences).
#
#   run_random.sh --gen G --tool T --cc CC --cflags "..." --incs "dir|dir" --libs "lib|-lm"
#                 --work DIR --regressions DIR [--files N] [--funcs F] [--seed S] [--jobs J]
#                 [--toolflags "..."]
#
# Environment (overrides): ST_RANDOM_FILES, ST_RANDOM_FUNCS, ST_RANDOM_SEED (the first seed),
# ST_RANDOM_JOBS, ST_RANDOM_CFLAGS (the flags of the program and its derivatives),
# ST_RANDOM_TOOLFLAGS (more chainrules-ad options for the reverse/forward/vector file, e.g.
# --lane-ranges),
# ST_RANDOM_GENFLAGS (more generator options: --checkpoint, --calls-in-conditions), ST_KEEP=1
# (keep the work files of passing seeds too). The long run (docs/source-transformation-testing.md):
#   ST_RANDOM_FILES=250 ST_RANDOM_FUNCS=40 ST_RANDOM_SEED=1000 ST_RANDOM_JOBS=1 \
#   ST_RANDOM_CFLAGS=-O0 ctest -R st_random --output-on-failure --timeout 20000
# Replay one file: ST_RANDOM_FILES=1 ST_RANDOM_SEED=<seed> ... (its files stay in the work
# directory: seed-<seed>/prog.c, prog_ad.c, harness.c, and the commands in seed-<seed>/log).
# Exit: 0 all passed, 1 a failure, 77 the tool is not built (CTest's SKIP_RETURN_CODE).
set -u

gen="" tool="" cc="cc" cflags="" incs="" libs="" work="" regdir="" toolflags=""
files=8 funcs=20 seed=1 jobs=2
while [ $# -gt 0 ]; do
    case "$1" in
    --gen) gen="$2"; shift 2 ;;
    --tool) tool="$2"; shift 2 ;;
    --cc) cc="$2"; shift 2 ;;
    --cflags) cflags="$2"; shift 2 ;;
    --incs) incs="$2"; shift 2 ;;
    --libs) libs="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --regressions) regdir="$2"; shift 2 ;;
    --files) files="$2"; shift 2 ;;
    --funcs) funcs="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --toolflags) toolflags="$2"; shift 2 ;;
    *) echo "run_random.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
files="${ST_RANDOM_FILES:-$files}"
funcs="${ST_RANDOM_FUNCS:-$funcs}"
seed="${ST_RANDOM_SEED:-$seed}"
jobs="${ST_RANDOM_JOBS:-$jobs}"
cflags="${ST_RANDOM_CFLAGS:-$cflags}"
toolflags="${ST_RANDOM_TOOLFLAGS:-$toolflags}"
# shellcheck disable=SC2206
tool_flags=($toolflags)
# the harness draws sparse directions for f_fwdv when the tool is given options (lane ranges)
sparse_dirs=0
[ -n "$toolflags" ] && sparse_dirs=1
# shellcheck disable=SC2206
genflags=(${ST_RANDOM_GENFLAGS:-})

if [ -z "$tool" ] || [ ! -x "$tool" ]; then
    echo "st_random: chainrules-ad is not built; skipped"
    exit 77
fi
if [ -z "$gen" ] || [ -z "$work" ]; then
    echo "run_random.sh: --gen and --work are required" >&2
    exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$work"

inc_flags=()
IFS='|' read -r -a inc_list <<<"$incs"
for d in "${inc_list[@]}"; do
    [ -n "$d" ] && inc_flags+=("-I$d")
done
inc_flags+=("-I$here")
IFS='|' read -r -a lib_list <<<"$libs"
# shellcheck disable=SC2206
cflag_list=($cflags)

# The sanitizers, when the compiler has them: the regression cases (and every case with
# ST_SANITIZE_ALL=1) compile the program and its derivatives with them, so that a write out
# of bounds in the generated code fails at any optimisation level.
san_flags=()
printf 'int main(void) { return 0; }\n' >"$work/probe.c"
if "$cc" -fsanitize=address,undefined "$work/probe.c" -o "$work/probe" >/dev/null 2>&1 &&
    "$work/probe" >/dev/null 2>&1; then
    san_flags=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
fi
export ASAN_OPTIONS=detect_leaks=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# One case: prog.c (and its harness.c) in directory $1, functions $2, point seed $3, whether
# to use the sanitizers $4. Writes $1/result: the harness's summary line, or a line saying
# which step failed.
run_case() {
    local dir="$1" names="$2" fwdv=1
    local flags=("${cflag_list[@]}")
    if [ "${4:-0}" = 1 ] || [ "${ST_SANITIZE_ALL:-0}" = 1 ]; then
        flags+=("${san_flags[@]}")
    fi
    local log="$dir/log"
    : >"$log"
    step() { echo "+ $*" >>"$log"; "$@" >>"$log" 2>&1; }
    if ! step "$tool" "${tool_flags[@]}" --reverse "$names" --forward "$names" --vector "$names" \
        -o "$dir/prog_ad.c" "$dir/prog.c" \
        -- -std=c11 "${inc_flags[@]}"; then
        echo "TOOL-ERROR $dir: chainrules-ad failed (see $log)" >"$dir/result"
        return
    fi
    grep -q '_fwdv *(' "$dir/prog_ad.c" || fwdv=0
    # the Jacobian entry: the functions it refuses are named in its messages and left out
    local jnames="$names" jdefs=() jobj=() try
    for try in 1 2 3 4; do
        [ -n "$jnames" ] || break
        local wrt="x" dims="x=6" p
        for p in a b y; do
            local fn
            for fn in ${jnames//,/ }; do
                if grep -Eq "^(double|void) $fn\(.*[ *]$p[,)]" "$dir/prog.c"; then
                    wrt="$wrt,$p"
                    [ "$p" = y ] && dims="$dims,y=3"
                    break
                fi
            done
        done
        if step "$tool" --jacobian "$jnames" --dims "$dims" --wrt "$wrt" -o "$dir/prog_jac.c" \
            "$dir/prog.c" -- -std=c11 "${inc_flags[@]}"; then
            local fn
            for fn in ${jnames//,/ }; do jdefs+=("-DST_JAC_$fn"); done
            jobj=("$dir/prog_jac.o")
            break
        fi
        local refused
        refused="$(grep -o "Jacobian mode of '[A-Za-z0-9_]*'" "$log" | sed "s/.*'\(.*\)'/\1/" | sort -u)"
        [ -n "$refused" ] || break
        local keep="" fn
        for fn in ${jnames//,/ }; do
            grep -qx "$fn" <<<"$refused" || keep="$keep${keep:+,}$fn"
        done
        jnames="$keep"
    done
    if [ ${#jobj[@]} -gt 0 ] &&
        ! step "$cc" -std=c11 "${flags[@]}" "${inc_flags[@]}" -c "$dir/prog_jac.c" -o "$dir/prog_jac.o"; then
        echo "COMPILE-ERROR $dir: the Jacobian entries do not compile (see $log)" >"$dir/result"
        return
    fi
    # f_rev_set: the functions --reverse-set accepts (prog_set.c); each refusal must be the
    # documented message, and the others are written in the same run
    local snames="$names" sdefs=() sobj=()
    for try in 1 2; do
        [ -n "$snames" ] || break
        echo "+ $tool --reverse-set $snames -o $dir/prog_set.c $dir/prog.c" >>"$log"
        if "$tool" --reverse-set "$snames" -o "$dir/prog_set.c" "$dir/prog.c" \
            -- -std=c11 "${inc_flags[@]}" >>"$log" 2>"$dir/set_err"; then
            cat "$dir/set_err" >>"$log"
            local fn
            for fn in ${snames//,/ }; do sdefs+=("-DST_SET_$fn"); done
            sobj=("$dir/prog_set.o")
            break
        fi
        cat "$dir/set_err" >>"$log"
        local bad_msg
        bad_msg="$(grep 'error:' "$dir/set_err" | grep -Ev "error: '([A-Za-z0-9_]+)_rev_set' \(--reverse-set\): cannot assign the shadow of '[A-Za-z0-9_]+' once per element: .+ \(use '\1_rev', which adds into it\)$")"
        if [ -n "$bad_msg" ] || [ "$try" = 2 ]; then
            echo "SET-ERROR $dir: --reverse-set failed other than by its documented refusal (see $log)" >"$dir/result"
            return
        fi
        local refused keep="" fn
        refused="$(grep -o "'[A-Za-z0-9_]*_rev_set' (--reverse-set)" "$dir/set_err" | sed "s/'\(.*\)_rev_set'.*/\1/" | sort -u)"
        for fn in ${snames//,/ }; do
            grep -qx "$fn" <<<"$refused" || keep="$keep${keep:+,}$fn"
        done
        snames="$keep"
    done
    if [ ${#sobj[@]} -gt 0 ] &&
        ! step "$cc" -std=c11 "${flags[@]}" "${inc_flags[@]}" -c "$dir/prog_set.c" -o "$dir/prog_set.o"; then
        echo "COMPILE-ERROR $dir: the f_rev_set file does not compile (see $log)" >"$dir/result"
        return
    fi
    if ! step "$cc" -std=c11 "${flags[@]}" "${inc_flags[@]}" -c "$dir/prog.c" -o "$dir/prog.o" ||
        ! step "$cc" -std=c11 "${flags[@]}" "${inc_flags[@]}" -c "$dir/prog_ad.c" -o "$dir/prog_ad.o"; then
        echo "COMPILE-ERROR $dir: the program or its derivatives do not compile (see $log)" >"$dir/result"
        return
    fi
    if ! step "$cc" -std=c11 -O0 -DST_FWDV=$fwdv -DST_SPARSE_DIRECTIONS=$sparse_dirs -DST_JAC=1 "${jdefs[@]}" \
        -DST_SET=1 "${sdefs[@]}" "${inc_flags[@]}" \
        -c "$dir/harness.c" -o "$dir/harness.o" ||
        ! step "$cc" "${flags[@]}" -o "$dir/check" "$dir/harness.o" "$dir/prog.o" "$dir/prog_ad.o" \
            "${jobj[@]}" "${sobj[@]}" "${lib_list[@]}"; then
        echo "COMPILE-ERROR $dir: the harness does not compile or link (see $log)" >"$dir/result"
        return
    fi
    echo "+ $dir/check $3" >>"$log"
    timeout 120 "$dir/check" "$3" >"$dir/out" 2>&1
    local rc=$?
    cat "$dir/out" >>"$log"
    local summary
    summary="$(grep '^st-random:' "$dir/out" | tail -1)"
    if [ -z "$summary" ]; then
        echo "CRASH $dir: the check stopped with status $rc (see $log)" >"$dir/result"
        return
    fi
    [ $fwdv = 0 ] && summary="$summary nofwdv=1"
    echo "$summary" >"$dir/result"
}

one_seed() {
    local s="$1" dir="$work/seed-$1"
    rm -rf "$dir"
    mkdir -p "$dir"
    local names
    if ! names="$("$gen" --seed "$s" --funcs "$funcs" "${genflags[@]}" --prog "$dir/prog.c" \
        --harness "$dir/harness.c")"; then
        echo "GEN-ERROR $dir" >"$dir/result"
        return
    fi
    run_case "$dir" "$names" "$s" 0
}

one_regression() {
    local src="$1" base dir names
    base="$(basename "$src" .c)"
    dir="$work/regression-$base"
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "$src" "$dir/prog.c"
    if ! names="$("$gen" --harness-for "$dir/prog.c" --harness "$dir/harness.c")"; then
        echo "GEN-ERROR $dir" >"$dir/result"
        return
    fi
    run_case "$dir" "$names" 1 1
}

rm -rf "$work"/regression-*
start=$(date +%s)
running=0
for ((k = 0; k < files; k++)); do
    one_seed $((seed + k)) &
    running=$((running + 1))
    if [ $running -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
done
if [ -n "$regdir" ] && [ -d "$regdir" ]; then
    for src in "$regdir"/*.c; do
        [ -e "$src" ] || continue
        one_regression "$src" &
        running=$((running + 1))
        if [ $running -ge "$jobs" ]; then
            wait -n
            running=$((running - 1))
        fi
    done
fi
wait
elapsed=$(($(date +%s) - start))

# Summary over the cases.
nfiles=0 fns=0 checked=0 tonly=0 skipped=0 failed=0 broken=0 nofwdv=0 jac=0 rset=0
for r in "$work"/seed-*/result "$work"/regression-*/result; do
    [ -e "$r" ] || continue
    dir="$(dirname "$r")"
    case "$(basename "$dir")" in
    seed-*)
        s="${dir##*/seed-}"
        if [ "$s" -lt "$seed" ] || [ "$s" -ge $((seed + files)) ]; then continue; fi
        ;;
    esac
    nfiles=$((nfiles + 1))
    line="$(cat "$r")"
    case "$line" in
    st-random:*)
        f=0
        for kv in $line; do
            case "$kv" in
            functions=*) fns=$((fns + ${kv#*=})) ;;
            checked=*) checked=$((checked + ${kv#*=})) ;;
            tape_only=*) tonly=$((tonly + ${kv#*=})) ;;
            skipped=*) skipped=$((skipped + ${kv#*=})) ;;
            failed=*) f=${kv#*=}; failed=$((failed + f)) ;;
            nofwdv=*) nofwdv=$((nofwdv + 1)) ;;
            jac_checked=*) jac=$((jac + ${kv#*=})) ;;
            set_checked=*) rset=$((rset + ${kv#*=})) ;;
            esac
        done
        if [ "$f" != 0 ]; then
            echo "---- $dir"
            grep -E -A4 '^FAIL|runtime error|ERROR: AddressSanitizer' "$dir/out" | head -40
        elif [ "${ST_KEEP:-0}" != 1 ]; then
            rm -f "$dir"/*.o "$dir/check"
        fi
        ;;
    *)
        broken=$((broken + 1))
        echo "---- $line"
        tail -15 "$dir/log"
        ;;
    esac
done
echo "st_random: cases=$nfiles functions=$fns checked=$checked tape_only=$tonly skipped=$skipped" \
    "failed=$failed broken_cases=$broken no_fwdv_cases=$nofwdv jacfwd_checked=$jac" \
    "rev_set_checked=$rset" \
    "seconds=$elapsed" \
    "seeds=$seed..$((seed + files - 1))"
[ "$failed" = 0 ] && [ "$broken" = 0 ]
