#!/bin/sh
# Runs the README's two commands (`make demo`, `make test`) on a fresh Debian 12: a minimal
# bookworm system made by debootstrap, with only `make` added, so that a package the build
# needs but the machine at hand happens to have is found missing here.
#
#   sudo tools/fresh-debian-check.sh [WORKDIR] [-- command]
#
# WORKDIR (default /tmp/chainrules-fresh-debian) receives the system and a clone of this
# repository's HEAD (committed work only). The command run inside, as root, defaults to
# `make demo && make test`; for instance `-- 'CI=true bash .ci/run'` runs CI's script.
# Needs root, debootstrap (installed if missing) and Debian's mirror. Exits with the
# command's status; the system is kept for a second run (delete WORKDIR to start afresh).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
work=/tmp/chainrules-fresh-debian
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    work=$1
    shift
fi
cmd='make demo && make test'
if [ $# -gt 0 ] && [ "$1" = "--" ]; then
    shift
    [ $# -gt 0 ] && cmd=$*
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "fresh-debian-check: needs root (debootstrap, chroot)" >&2
    exit 1
fi
command -v debootstrap >/dev/null 2>&1 || apt-get install -y -qq debootstrap
root=$work/root
if [ ! -x "$root/usr/bin/make" ]; then
    mkdir -p "$work"
    debootstrap --variant=minbase --include=make,ca-certificates bookworm "$root" \
        http://deb.debian.org/debian
fi
rm -rf "$root/src"
git clone -q "$here" "$root/src"
cp /etc/resolv.conf "$root/etc/resolv.conf"

mounted=""
# shellcheck disable=SC2317 # called by the trap
cleanup() {
    for m in $mounted; do umount "$m" 2>/dev/null || true; done
}
trap cleanup EXIT
mount -t proc proc "$root/proc" && mounted="$root/proc"
mount --bind /dev "$root/dev" && mounted="$root/dev $mounted"
mount --bind /dev/pts "$root/dev/pts" && mounted="$root/dev/pts $mounted"

status=0
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    sh -c "cd /src && $cmd" || status=$?
echo "fresh-debian-check: '$cmd' exited with $status"
exit $status
