#!/bin/sh
# Line coverage of the library's sources after a test run in a --coverage build tree.
#
#   tools/coverage.sh BUILD_DIR [OUT_DIR]
#
# Runs gcov over every object of the library in BUILD_DIR (made by `make coverage`) and
# prints, per source file under src/, the lines executed and the lines not executed, then
# the totals per directory and overall. The annotated sources (FILE.gcov, where `#####`
# marks a line no test ran) are left in OUT_DIR (default BUILD_DIR/coverage).
set -eu

build=${1:?usage: tools/coverage.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/coverage}
# the library's objects: the object library that both the shared and the static library use
objdir=
for t in cr_objects chainrules chainrules_static; do
    if [ -d "$build/CMakeFiles/$t.dir/src" ]; then
        objdir=$build/CMakeFiles/$t.dir/src
        break
    fi
done
[ -n "$objdir" ] || { echo "coverage.sh: no library objects in $build (run make coverage)" >&2; exit 1; }
command -v gcov >/dev/null 2>&1 || { echo "coverage.sh: gcov not found" >&2; exit 1; }

mkdir -p "$out"
out=$(cd "$out" && pwd)
objdir=$(cd "$objdir" && pwd)
build=$(cd "$build" && pwd)
rm -f "$out"/*.gcov

# gcov names its output after the source's base name; two sources of the same name
# (core/array.c, rulesets/array/...) are kept apart by running each directory (at any
# depth: src/rulesets/array/, src/rulesets/linalg/, ...) on its own and prefixing its
# path, with @ for /.
for dir in $(cd "$objdir" && find . -mindepth 1 -type d | sed 's|^\./||' | sort); do
    d=$dir
    dir=$objdir/$dir/
    ls "$dir"*.gcda >/dev/null 2>&1 || continue
    tmp=$(mktemp -d)
    # gcov runs where the compiler ran (the build tree), so that source paths recorded
    # relative to it (ccache's CCACHE_BASEDIR) are found; its output is moved to tmp.
    (cd "$build" && gcov -o "$dir" "$dir"*.gcda >/dev/null 2>&1 && mv ./*.gcov "$tmp"/) || true
    for f in "$tmp"/*.gcov; do
        [ -e "$f" ] || continue
        # Only the library's own sources (not the headers of the system or of include/).
        src=$(sed -n '1s/^ *-: *0:Source://p' "$f")
        case "$(dirname "$src")" in
            */src/"$d") mv "$f" "$out/$(echo "$d" | tr / @)@$(basename "$f")" ;;
        esac
    done
    rm -rf "$tmp"
done

printf '%-40s %8s %8s %7s\n' file lines missed cover
for f in "$out"/*.gcov; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .gcov | tr @ /)
    awk -v name="src/$name" -F: '
        $1 ~ /#####/ { miss++; total++; next }
        $1 ~ /^ *[0-9]+\*? *$/ { total++ }
        END { if (total > 0) printf "%-40s %8d %8d %6.1f%%\n", name, total, miss, 100 * (total - miss) / total }
    ' "$f"
done | sort | tee "$out/summary.txt"
awk '{ split($1, p, "/"); d = p[2]; t[d] += $2; m[d] += $3; T += $2; M += $3 }
     END {
         for (d in t) printf "%-40s %8d %8d %6.1f%%\n", "src/" d "/", t[d], m[d], 100 * (t[d] - m[d]) / t[d]
         printf "%-40s %8d %8d %6.1f%%\n", "total", T, M, 100 * (T - M) / T
     }' "$out/summary.txt" | sort
