#!/usr/bin/env bash
# Install check (ggml examples/test-cmake): installs chainrules into temporary prefixes and
# builds tests/install/consumer.c against them, through pkg-config (with the commands of
# docs/tutorial.md, taken from the page itself) and through find_package(chainrules CONFIG),
# then runs the programs.
#   1. the already built tree (--build; shared by default) is installed as it is;
#   2. the other kind (static, or shared for a tree built with BUILD_SHARED_LIBS=OFF): a
#      small separate build of the library alone.
# A shared library's exported symbols are checked too (the public cr_* API only, nothing
# internal), and the installed programs must find it without LD_LIBRARY_PATH.
# Usage: check.sh --source DIR --build DIR --work DIR --cc CC --cmake CMAKE --version X.Y.Z
#                 [--jobs N] [-- extra cmake arguments for the separate build]
set -euo pipefail

jobs=2
while [ $# -gt 0 ]; do
    case "$1" in
        --source) src=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        --cc) cc=$2; shift 2 ;;
        --cmake) cmake=$2; shift 2 ;;
        --version) version=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "check.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
: "${src:?--source missing}" "${build:?--build missing}" "${work:?--work missing}"
: "${cc:?--cc missing}" "${cmake:?--cmake missing}" "${version:?--version missing}"
other_args=("$@")

step() { printf '== install check: %s\n' "$*"; }
fail() { printf 'install check FAILED: %s\n' "$*" >&2; exit 1; }
# Runs a command quietly; prints its output only when it fails.
quiet() {
    local log="$work/last.log"
    if ! "$@" >"$log" 2>&1; then
        cat "$log" >&2
        fail "$*"
    fi
}

# Start from empty prefixes; the separate build trees are kept so that reruns are incremental.
mkdir -p "$work"
find "$work" -mindepth 1 -maxdepth 1 ! -name static-build ! -name shared-build -exec rm -rf {} +

# The tutorial's link commands, word for word: `cc -std=c11 app.c ...` for the shared
# library, and the same with --static for the static one.
tutorial="$src/docs/tutorial.md"
tutorial_cmd() { # tutorial_cmd shared|static
    local line
    if [ "$1" = static ]; then
        line=$(grep -o '^cc -std=c11 app\.c .*--static.*' "$tutorial" | head -n 1)
    else
        line=$(grep -o '^cc -std=c11 app\.c .*' "$tutorial" | grep -v -- '--static' | head -n 1)
    fi
    line=${line%%#*}
    [ -n "$line" ] || fail "docs/tutorial.md has no '$1' line 'cc -std=c11 app.c ...'"
    printf '%s\n' "$line"
}

# check_prefix <kind> <prefix> <pkg-config flags...>; sets consumers to the two programs.
check_prefix() {
    local kind=$1 prefix=$2
    shift 2
    local pc
    pc=$(find "$prefix" -name chainrules.pc -print -quit)
    [ -n "$pc" ] || fail "$kind: no chainrules.pc under $prefix"
    [ -f "$prefix/include/chainrules.h" ] || fail "$kind: include/chainrules.h not installed"
    [ -f "$prefix/include/chainrules/version.h" ] || fail "$kind: generated version.h not installed"
    # every public header of the tree, the generated parts dual_inline_rows_K.h among them
    local h
    for h in "$src"/include/chainrules/*.h; do
        [ -f "$prefix/include/chainrules/${h##*/}" ] || fail "$kind: chainrules/${h##*/} not installed"
    done
    cmp -s "$src/LICENSE" "$prefix/share/doc/chainrules/LICENSE" ||
        fail "$kind: LICENSE not installed as share/doc/chainrules/LICENSE"
    if find "$prefix/include" -name '*_impl.h' | grep -q .; then
        fail "$kind: private src/ headers were installed"
    fi
    find "$prefix" -name chainrules-config.cmake | grep -q . ||
        fail "$kind: chainrules-config.cmake not installed"

    # pkg-config, from the .pc file alone.
    local pcdir libdir
    pcdir=$(dirname "$pc")
    export PKG_CONFIG_PATH="$pcdir"
    pkg-config --print-errors --exists chainrules || fail "$kind: pkg-config cannot use $pc"
    local pcver
    pcver=$(pkg-config --modversion chainrules)
    [ "$pcver" = "$version" ] || fail "$kind: pkg-config version $pcver, expected $version"
    libdir=$(pkg-config --variable=libdir chainrules)
    local cflags libs
    cflags=$(pkg-config --cflags chainrules)
    libs=$(pkg-config "$@" --libs chainrules)
    step "$kind: pkg-config --cflags --libs $*: $cflags $libs"
    # The tutorial's command, run in a directory holding the consumer as app.c.
    local cmd appdir="$work/tutorial-$kind"
    cmd=$(tutorial_cmd "$kind")
    mkdir -p "$appdir"
    cp "$src/tests/install/consumer.c" "$appdir/app.c"
    step "$kind: $cmd"
    (cd "$appdir" && quiet sh -c "$cmd") || fail "$kind: the tutorial's command failed"
    local app
    app=$(find "$appdir" -maxdepth 1 -type f -perm -u+x -print -quit)
    [ -n "$app" ] || fail "$kind: the tutorial's command made no program"
    LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$app" ||
        fail "$kind: the program of the tutorial's command failed"
    # And with strict warnings.
    # shellcheck disable=SC2086 # word splitting of the flags is wanted
    quiet "$cc" -std=c11 -Wall -Wextra -pedantic -Werror $cflags \
        "$src/tests/install/consumer.c" -o "$work/consumer-pc-$kind" $libs
    LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/consumer-pc-$kind" ||
        fail "$kind: the pkg-config consumer failed"
    unset PKG_CONFIG_PATH

    # CMake package.
    step "$kind: find_package(chainrules $version CONFIG)"
    local expect_ad=OFF
    [ -x "$prefix/bin/chainrules-ad" ] && expect_ad=ON
    quiet "$cmake" -S "$src/tests/install" -B "$work/consumer-cmake-$kind" \
        -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCR_EXPECTED_VERSION="$version" -DCMAKE_BUILD_TYPE=Release -DCR_EXPECT_AD=$expect_ad
    quiet "$cmake" --build "$work/consumer-cmake-$kind"
    "$work/consumer-cmake-$kind/consumer" || fail "$kind: the CMake consumer failed"
    consumers=("$app" "$work/consumer-pc-$kind" "$work/consumer-cmake-$kind/consumer")
    if [ "$expect_ad" = ON ]; then
        # chainrules_differentiate() through the package, and the recipe without CMake
        # (docs/source-transformation.md): the tool, then the compiler with pkg-config.
        "$work/consumer-cmake-$kind/consumer_ad" >/dev/null ||
            fail "$kind: the chainrules_differentiate consumer failed"
        step "$kind: chainrules-ad -o model_ad.c model.c, then pkg-config"
        quiet "$prefix/bin/chainrules-ad" --reverse energy -o "$work/model_ad-$kind.c" \
            "$src/tests/install/model.c"
        export PKG_CONFIG_PATH="$pcdir"
        # shellcheck disable=SC2086 # word splitting of the flags is wanted
        quiet "$cc" -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags chainrules) \
            "$src/tests/install/consumer_ad.c" "$src/tests/install/model.c" \
            "$work/model_ad-$kind.c" -o "$work/consumer-ad-pc-$kind" $libs -lm
        unset PKG_CONFIG_PATH
        LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/consumer-ad-pc-$kind" \
            >/dev/null || fail "$kind: the pkg-config chainrules-ad consumer failed"
    fi
}

# check_shared <prefix>: an installed shared library, its exports and its consumers.
check_shared() {
    local prefix=$1 so exported bad internal
    so=$(find "$prefix" -name 'libchainrules.so.*' -type f -print -quit)
    [ -n "$so" ] || fail "shared: libchainrules.so not installed"

    # Only the public API is exported: cr_* symbols, none of the internal cr__* ones.
    exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDRBVW]$/ { print $3 }' | sort)
    echo "$exported" | grep -qx 'cr_version_number' || fail "shared: cr_version_number not exported"
    bad=$(echo "$exported" | grep -v '^cr_' | grep -v '^_' || true)
    internal=$(echo "$exported" | grep '^cr__' || true)
    [ -z "$bad" ] || fail "shared: symbols outside the cr_ namespace exported: $(tr '\n' ' ' <<<"$bad")"
    [ -z "$internal" ] || fail "shared: internal symbols exported: $(tr '\n' ' ' <<<"$internal")"
    step "shared: $(echo "$exported" | wc -l) symbols exported from $(basename "$so"), all cr_*"

    check_prefix shared "$prefix"
    for exe in "${consumers[@]}"; do
        readelf -d "$exe" | grep -q 'NEEDED.*libchainrules\.so' ||
            fail "shared: $exe does not link libchainrules.so"
    done
    step "shared: the consumers link libchainrules.so"
    # The installed programs find the library through their RPATH ($ORIGIN/../lib).
    for exe in "$prefix/bin/"*; do
        [ -x "$exe" ] || continue
        if env -u LD_LIBRARY_PATH ldd "$exe" | grep -q 'not found'; then
            fail "shared: the installed $(basename "$exe") does not find its libraries"
        fi
    done
}

# check_static <prefix>: an installed static library and its consumers.
check_static() {
    local prefix=$1
    find "$prefix" -name 'libchainrules.a' | grep -q . || fail "static: libchainrules.a not installed"
    if find "$prefix" -name 'libchainrules.so*' | grep -q .; then
        fail "static: a shared library was installed"
    fi
    check_prefix static "$prefix" --static
    for exe in "${consumers[@]}"; do
        if readelf -d "$exe" | grep -q 'NEEDED.*libchainrules'; then
            fail "static: $exe needs a shared libchainrules"
        fi
    done
}

# 1. The tree that was built and tested (shared by default; a tree configured with
#    BUILD_SHARED_LIBS=OFF is the static one).
if grep -qx 'BUILD_SHARED_LIBS:BOOL=ON' "$build/CMakeCache.txt"; then
    tree=shared other=static other_shared=OFF
else
    tree=static other=shared other_shared=ON
fi
step "$tree: cmake --install $build"
quiet "$cmake" --install "$build" --prefix "$work/$tree"
"check_$tree" "$work/$tree"

# 2. The other kind: a build of the library alone.
step "$other: configure and build with BUILD_SHARED_LIBS=$other_shared"
quiet "$cmake" -S "$src" -B "$work/$other-build" "${other_args[@]}" \
    -DCMAKE_C_COMPILER="$cc" -DBUILD_SHARED_LIBS=$other_shared -DCR_BUILD_TESTS=OFF \
    -DCR_BUILD_EXAMPLES=OFF -DCR_BUILD_TOOLS=OFF -DCR_BUILD_BENCH=OFF
quiet "$cmake" --build "$work/$other-build" -j "$jobs"
quiet "$cmake" --install "$work/$other-build" --prefix "$work/$other"
"check_$other" "$work/$other"
step "OK"
