#!/usr/bin/env bash
# The container image the Pyxis tests accept nodes in: Debian 12 minbase, its python3 (3.11), torch CPU and numpy
# (pinned below), as one squashfs file that enroot/Pyxis runs.  trainready is NOT in it: `cluster run` stages its
# own code onto the shared results path and mounts it (cluster/control/stage.py), as it does for a site's own image.
#
#   scripts/test-image.sh [CACHE_DIR]    prints the .sqsh path (built once: a file for this recipe already in
#                                        CACHE_DIR is reused; default $TRAINREADY_IMAGE_CACHE or
#                                        /var/cache/trainready/images)
#
# The cached file is named by the sha256 of the recipe (its pins and build lines): another recipe, another file.
# Measured on a 2-core x86 VM (Debian 12): debootstrap ~113 s, pip ~30 s, mksquashfs ~53 s (gzip); docs/development.md.
# Needs root, debootstrap and squashfs-tools (.ci/run installs them; the tests never do: without them this
# prints ONE "test-image: cannot build: ..." line and exits 3, and the tests skip with it).
set -u

SUITE=bookworm  # Debian 12: python3 is 3.11, the CPU torch wheel's cp311
TORCH=torch==2.13.0+cpu
NUMPY=numpy==2.4.6
PY=3.11

cannot() { echo "test-image: cannot build: $*"; exit 3; }
say() { echo "test-image: $*" >&2; }

CACHE=${1:-${TRAINREADY_IMAGE_CACHE:-/var/cache/trainready/images}}
# the recipe: the pins and the lines that build (comments and messages may change without a rebuild)
KEY=$(grep -E '^(SUITE|TORCH|NUMPY|PY)=|^debootstrap |--only-binary|^chroot |^mksquashfs ' "$0" | sha256sum | cut -c1-16)
OUT=$CACHE/test-image-$KEY.sqsh
[ -s "$OUT" ] && { echo "$OUT"; exit 0; }

[ "$(id -u)" = 0 ] || cannot "needs root (debootstrap)"
for b in debootstrap mksquashfs; do command -v $b >/dev/null 2>&1 || cannot "missing $b (apt-get install debootstrap squashfs-tools)"; done
# the mirror apt is configured with (deb822 sources or sources.list), else Debian's default
MIRROR=$(grep -hoE '^URIs: *\S+/debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | awk '{print $2}')
[ -n "$MIRROR" ] || MIRROR=$(grep -hoE '^deb +\S+/debian/? ' /etc/apt/sources.list 2>/dev/null | head -1 | awk '{print $2}')
MIRROR=${MIRROR:-http://deb.debian.org/debian}

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9  # two test workers: one builds, the other waits and reuses
[ -s "$OUT" ] && { echo "$OUT"; exit 0; }
WORK=$(mktemp -d "$CACHE/build-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
ROOT=$WORK/rootfs LOG=$CACHE/test-image-$KEY.log
t0=$SECONDS
debootstrap --variant=minbase --include=python3 "$SUITE" "$ROOT" "$MIRROR" >"$LOG" 2>&1 \
    || cannot "debootstrap $SUITE from $MIRROR failed: $(tail -1 "$LOG") (see $LOG)"
t1=$SECONDS
# the host's pip (its index and find-links configuration) installs the wheels into the image's site-packages
PIP=$(command -v pip3 || echo "python3 -m pip")
$PIP install -q --no-compile --target "$ROOT/usr/local/lib/python$PY/dist-packages" --python-version "$PY" \
    --only-binary=:all: --platform manylinux_2_28_x86_64 "$TORCH" "$NUMPY" >>"$LOG" 2>&1 \
    || cannot "pip install $TORCH $NUMPY into the image failed: $(tail -1 "$LOG") (see $LOG)"
# byte-code compiled by the image's own python3 (the host's may be another 3.11.x): without it every python
# process in every container compiles torch's modules again (`import torch` 2.9 CPU s without, 1.55 with, on a
# 2-core x86 VM), where a site's image ships compiled (pip's default).  Its exit status is not read: torch ships
# test files in a newer Python's syntax (torch/testing/_internal/py312_intrinsics.py), which no 3.11 compiles; the
# package itself must come out compiled.
chroot "$ROOT" python3 -m compileall -q -j 0 "/usr/local/lib/python$PY/dist-packages" >>"$LOG" 2>&1
[ -s "$ROOT/usr/local/lib/python$PY/dist-packages/torch/__pycache__/__init__.cpython-${PY/./}.pyc" ] \
    || cannot "compileall in the image left torch uncompiled: $(tail -1 "$LOG") (see $LOG)"
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/*
t2=$SECONDS
# lz4: enroot unpacks the image (unsquashfs) for every container Pyxis starts; lz4 unpacks this image in 1.8 CPU s
# where gzip (mksquashfs's default) took 7.4, on a 2-core x86 VM, at 1.5x the file size
mksquashfs "$ROOT" "$WORK/image.sqsh" -comp lz4 -noappend -quiet >>"$LOG" 2>&1 || cannot "mksquashfs failed: $(tail -1 "$LOG")"
mv "$WORK/image.sqsh" "$OUT"
say "built $OUT ($(du -m "$OUT" | cut -f1) MB): debootstrap $((t1 - t0)) s, pip $((t2 - t1)) s, mksquashfs $((SECONDS - t2)) s"
echo "$OUT"
