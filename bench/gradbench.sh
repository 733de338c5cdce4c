#!/bin/sh
# GradBench's evals run here, for chainrules-c's two variants (chainrules-c, chainrules-c-tape),
# GradBench's `manual` C++ tool and its `adol-c` (C++ on Debian's libadolc-dev) and `pytorch`
# (Python on Debian's python3-torch) tools (docs/gradbench.md).
#
#   bench/gradbench.sh --setup            prepare the GradBench copy (below) and build `manual`
#   bench/gradbench.sh [--quick] [EVAL...]  run the evals (all by default) for every tool,
#                                          then print the table and draw the plot
#   bench/gradbench.sh --table            only the table and the plot, from the results there
#
# `bench/gradbench.sh ht ba` reruns ht (both variants) and ba only: the other results in OUT
# are kept, and the table is made of all of them. The packages: `tools/deps.sh bench`.
#
# Variables: GRADBENCH_REPO, a clone of https://github.com/gradbench/gradbench (bare or not;
# needed by --setup); GRADBENCH_DIR, the prepared copy (default build/gradbench, which the
# CTest test `gradbench` uses); BUILD (default build), where chainrules-gradbench is built;
# MIN_SECONDS (default 0.5) and MIN_RUNS (default 3), the evals' timing loop; TOOLS (default
# "chainrules-c chainrules-c-tape manual adol-c pytorch"); OUT (default $BUILD/gradbench-results), the logs and summaries.
# --quick runs the smallest size of every eval only. A tool runs only the evals it implements
# (GradBench's tools/TOOL/evals.txt: adol-c all but particle and saddle, pytorch gmm, hello,
# kmeans, lse and lstm; its ba answers fail and its ht times out in GradBench's own runs).
# TASKSET (e.g. "taskset -c 1") prefixes every tool's command. The load average at the start
# and the end of every eval is appended to $OUT/load.txt. The table (written to OUT) is made
# of the results in RESULTS (default OUT; several directories separated by spaces, e.g. two
# streams of evals run on two cores: a tool's eval found in several is a repeat, shown as its
# median and range), with the evals of REPLACE (directories) replacing those of RESULTS:
#   OUT=build/gb-new TOOLS="chainrules-c manual" bench/gradbench.sh lse
#   RESULTS="build/gb-core0 build/gb-core1" REPLACE=build/gb-new bench/gradbench.sh --table
#
# The copy holds GradBench's python/, cpp/, tools/manual/ and evals/ (with their data files
# as the repository stores them; files absent from the clone are left out, and the evals
# that need them skip those sizes). When evals/lstm/data/lstm_full.txt is absent (it is a
# large text file), a substitute is written from the ASCII text of the repository's
# Markdown files: the lstm eval only takes its first characters as bits, so the inputs
# differ from GradBench's published ones but are validated the same way.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$here/build}
GRADBENCH_DIR=${GRADBENCH_DIR:-$BUILD/gradbench}
MIN_SECONDS=${MIN_SECONDS:-0.5}
MIN_RUNS=${MIN_RUNS:-3}
TOOLS=${TOOLS:-chainrules-c chainrules-c-tape manual adol-c pytorch}
TASKSET=${TASKSET:-}
OUT=${OUT:-$BUILD/gradbench-results}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

setup() {
    if [ -z "${GRADBENCH_REPO:-}" ]; then
        echo "gradbench.sh: set GRADBENCH_REPO to a clone of https://github.com/gradbench/gradbench" >&2
        exit 2
    fi
    g="git -C $GRADBENCH_REPO"
    mkdir -p "$GRADBENCH_DIR"
    $g archive HEAD CONTRIBUTING.md python cpp tools/manual tools/adol-c tools/pytorch |
        tar -x -C "$GRADBENCH_DIR"
    $g ls-tree -r --name-only HEAD evals | while read -r f; do
        dst="$GRADBENCH_DIR/$f"
        [ -e "$dst" ] && continue
        if $g cat-file -e "HEAD:$f" 2>/dev/null; then
            mkdir -p "$(dirname "$dst")"
            $g show "HEAD:$f" >"$dst"
        else
            echo "gradbench.sh: $f is not in the clone: left out" >&2
        fi
    done
    txt="$GRADBENCH_DIR/evals/lstm/data/lstm_full.txt"
    if [ ! -e "$txt" ]; then
        mkdir -p "$(dirname "$txt")"
        $g ls-tree -r --name-only HEAD | grep '\.md$' | while read -r f; do
            $g show "HEAD:$f" 2>/dev/null || true
        done | LC_ALL=C tr -cd '\11\12\15\40-\176' >"$txt"
        echo "gradbench.sh: wrote a substitute lstm_full.txt ($(wc -c <"$txt") characters)" >&2
    fi
    if [ ! -e "$GRADBENCH_DIR/cpp/json.hpp" ]; then
        if [ -e /usr/include/nlohmann/json.hpp ]; then
            ln -s /usr/include/nlohmann/json.hpp "$GRADBENCH_DIR/cpp/json.hpp"
        else
            echo "gradbench.sh: GradBench's C++ tools need nlohmann/json.hpp (Debian nlohmann-json3-dev)" >&2
            exit 1
        fi
    fi
    make -s -C "$GRADBENCH_DIR/tools/manual" NATIVE=no
}

# whether tool $1 implements eval $2 (GradBench's evals.txt; our variants implement all)
implements() {
    case $1 in
        chainrules-c | chainrules-c-tape | manual) return 0 ;;
        pytorch) list="gmm hello kmeans lse lstm" ;;
        *) list=$(awk 'NF == 1 { print $1 }' "$GRADBENCH_DIR/tools/$1/evals.txt" 2>/dev/null) ;;
    esac
    case " $(echo $list) " in *" $2 "*) return 0 ;; esac
    return 1
}

# eval arguments: the evals' default configurations (their run.py), or the smallest sizes
configs() {
    if [ "$quick" = 1 ]; then
        cat <<EOF
hello
lse -n 2500
llsq -n 16
det -l 5
kmeans -k 10 -n 1000 -d 8
ode -n 1000 -s 1
gmm -d 2 -k 5
ba --min 1 --max 1
ht --min 1 --max 1
ht --min 1 --max 1 --variant simple --model small
lstm -l 2 -c 1024
particle
saddle
EOF
    else
        cat <<EOF
hello
lse
llsq
det
kmeans
ode
gmm
ba
ht --max 11
ht --max 11 --variant simple --model small
lstm
particle
saddle
EOF
    fi
}

tool_cmd() {
    case $1 in
        chainrules-c) echo "$BUILD/tools/gradbench/chainrules-gradbench" ;;
        chainrules-c-tape) echo "$BUILD/tools/gradbench/chainrules-gradbench-tape" ;;
        manual) echo "$PY python/gradbench/gradbench/cpp.py manual" ;;
        adol-c) echo "$PY python/gradbench/gradbench/cpp.py adol-c" ;;
        pytorch) echo "$PY python/gradbench/gradbench/tools/pytorch/run.py" ;;
        *) echo "gradbench.sh: unknown tool $1" >&2; exit 2 ;;
    esac
}

table() {
    mkdir -p "$OUT"
    # shellcheck disable=SC2086 # TOOLS, RESULTS and REPLACE: one word per tool or directory
    "$PY" "$here/bench/gradbench_table.py" --results ${RESULTS:-"$OUT"} ${REPLACE:+--replace $REPLACE} \
        --tools $TOOLS ${GRADBENCH_REPO:+--nightly "$GRADBENCH_REPO"} --plot-data "$OUT/plot.json" \
        >"$OUT/table.md"
    "$PY" "$here/bench/gradbench_plot.py" "$OUT/plot.json" "$OUT/gradbench.svg"
    cat "$OUT/table.md"
}

# one line of $OUT/load.txt: the time (UTC), what starts or ends, the load averages (1, 5, 15
# minutes) and the cores; the table reports their range per eval
load() {
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $1 | load $(cut -d' ' -f1-3 /proc/loadavg) | cores $(nproc)" \
        >>"$OUT/load.txt"
}

quick=0
case "${1:-}" in
    --setup) setup; exit 0 ;;
    --table) table; exit 0 ;;
    --quick) quick=1; shift ;;
esac
mkdir -p "$OUT"
status=0
configs >"$OUT/configs"
while read -r name args; do
    if [ $# -gt 0 ]; then
        case " $* " in *" $name "*) ;; *) continue ;; esac
    fi
    load "start $name${args:+ $args}"
    for tool in $TOOLS; do
        implements "$tool" "$name" || continue
        tag=$(echo "$name $args" | tr ' ' '_' | tr -s '_' | sed 's/_$//; s/--//g')
        # shellcheck disable=SC2086 # the eval's arguments are words
        "$PY" "$here/tools/gradbench/run.py" --python "$PY" --gradbench "$GRADBENCH_DIR" \
            --tool "$TASKSET $(tool_cmd "$tool")" --tool-cwd "$GRADBENCH_DIR" --eval "$name" \
            --log "$OUT/$tool.$tag.jsonl" --summary "$OUT/$tool.$tag.summary" \
            -- $args --min-runs "$MIN_RUNS" --min-seconds "$MIN_SECONDS" || status=1
    done
    load "end $name${args:+ $args}"
done <"$OUT/configs"
table
exit $status
