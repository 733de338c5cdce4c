#!/bin/sh
# Checks that the Debian packages chainrules needs to build and test are installed.
#
#   tools/deps.sh [extra-package...]
#
# Silent when everything is there. When something is missing: as root, runs
# `apt-get update` once and `apt-get install -y` of the missing packages; otherwise prints
# the exact `sudo apt-get install -y ...` line and exits with status 1.
# Extra packages (for instance valgrind, clang-format, and clang-19 with libclang-rt-19-dev
# for `make fuzz`: the compiler, and its libFuzzer and sanitizer runtimes) are checked the
# same way; the Makefile passes them for the targets that need them.
# GradBench's evals (bench/gradbench.sh, the CTest test gradbench; docs/gradbench.md) need
# the extra packages python3-numpy python3-scipy python3-pydantic python3-dataclasses-json
# and nlohmann-json3-dev (GradBench's C++ `manual` tool): `sh tools/deps.sh python3-numpy
# python3-scipy python3-pydantic python3-dataclasses-json nlohmann-json3-dev`.
# `tools/deps.sh bench` checks those and the packages of the comparison only (never needed
# by the library or `make test`): python3-torch (GradBench's PyTorch tool), python3-matplotlib
# (bench/gradbench_plot.py) and libadolc-dev (GradBench's ADOL-C tool).
# On a system without dpkg-query (not Debian-like) it says so and checks nothing.
set -eu

# cmake, compilers, pkg-config; cmocka (unit tests); OpenBLAS (CBLAS) and LAPACKE
# (linear-algebra rules); MPFR (high-precision references) and cJSON (reports, and the
# requests of `chainrules-eval --json`, docs/eval.md) for tools/;
# g++ for the C++ header checks; doxygen for the API reference; gfortran for libgfortran's
# link library, which a static link against OpenBLAS needs (`pkg-config --static --libs
# chainrules` lists -lgfortran from OpenBLAS's and LAPACK's .pc files; the install check
# links that way), under a name that does not change with the compiler's version;
# OpenMPI (libopenmpi-dev, and openmpi-bin for mpirun) for chainrules-mpi and its tests.
required="cmake make gcc g++ pkg-config libcmocka-dev libopenblas-dev liblapacke-dev \
libclang-19-dev \
libmpfr-dev libcjson-dev doxygen gfortran \
libopenmpi-dev openmpi-bin"

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps.sh: dpkg-query not found (not a Debian-based system): not checking packages." >&2
    echo "deps.sh: needed: $required $*" >&2
    exit 0
fi

extra=""
for arg in "$@"; do
    case $arg in
        bench) extra="$extra python3-numpy python3-scipy python3-pydantic python3-dataclasses-json \
nlohmann-json3-dev libadolc-dev python3-torch python3-matplotlib" ;;
        *) extra="$extra $arg" ;;
    esac
done

missing=""
for pkg in $required $extra; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    case "$status" in
        *" installed") ;;
        *) missing="$missing $pkg" ;;
    esac
done
[ -z "$missing" ] && exit 0
missing=${missing# }

if [ "$(id -u)" -eq 0 ]; then
    echo "deps.sh: installing missing packages: $missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086 # one word per package
    apt-get install -y -qq --no-install-recommends $missing
    exit 0
fi

cat >&2 <<MSG
deps.sh: missing Debian packages: $missing
Install them with:

    sudo apt-get install -y $missing

then run the command again.
MSG
exit 1
