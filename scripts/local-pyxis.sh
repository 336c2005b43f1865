#!/usr/bin/env bash
# enroot + Pyxis for one cluster of scripts/local-slurm.sh (its `up --pyxis`), built from the upstream sources.
#
#   scripts/local-pyxis.sh build SRC PREFIX          build enroot and pyxis from SRC into PREFIX (a build whose
#                                                    stamp matches the sources and this Slurm is reused)
#   scripts/local-pyxis.sh register CONF_DIR PREFIX  write CONF_DIR/plugstack.conf (pyxis, required) and enroot's
#                                                    enroot.conf with private state, cache and runtime paths
#                                                    (unpacked containers on /dev/shm where it is a big tmpfs)
#   scripts/local-pyxis.sh unregister CONF_DIR       remove the plugstack.conf it wrote
#
# SRC: a folder with enroot-*-src.tar.gz and pyxis-*-src.tar.gz (the upstream releases as `git archive`:
# ../shared/thirdparty/ by default), or with the unpacked enroot-*/ and pyxis-*/ folders (an upstream checkout).
# The recipe (../shared/thirdparty/README.md): enroot with `FORCE_GLIBC=1` against Debian's glibc (no musl),
# Debian's makeself (the 2.4.5 that enroot pins) and libbsd, glibc 2.36's missing strlcpy/strlcat declared in a
# header given with -include; pyxis with `make` against libslurm-dev's spank.h (pyxis's README: since Slurm
# 21.08 pyxis must be compiled against the Slurm release that runs, or Slurm refuses to load it,
# "Incompatible plugin version").  Build deps (Debian): gawk squashfs-tools parallel bsdmainutils pigz makeself
# libslurm-dev libbsd-dev; .ci/run installs them, the tests never do.
#
# Prints ONE "local-slurm: cannot start: ..." line and exits 3 when it cannot (what is missing, or the build's
# own last line), as scripts/local-slurm.sh does.
set -u

MARK="# written by trainready scripts/local-pyxis.sh"
DEPS="gawk squashfs-tools parallel bsdmainutils pigz makeself libslurm-dev libbsd-dev"

cannot() { echo "local-slurm: cannot start: $*"; exit 3; }
say() { echo "local-pyxis: $*" >&2; }

missing_deps() {  # the build deps not installed, as Debian package names
    local p out=""
    for p in $DEPS; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || out="$out $p"; done
    echo "${out# }"
}

sources() {  # $1: SRC; prints the enroot and pyxis archives or folders, one a line
    local src=$1 e p
    e=$(ls -d "$src"/enroot-*-src.tar.gz "$src"/enroot-[0-9]*/ 2>/dev/null | head -1)
    p=$(ls -d "$src"/pyxis-*-src.tar.gz "$src"/pyxis-[0-9]*/ 2>/dev/null | head -1)
    [ -n "$e" ] && [ -n "$p" ] || cannot "no enroot-*-src.tar.gz and pyxis-*-src.tar.gz (or enroot-*/ pyxis-*/) in $src"
    printf '%s\n%s\n' "${e%/}" "${p%/}"
}

unpack() {  # $1: archive or folder, $2: destination folder (emptied)
    rm -rf "$2" && mkdir -p "$2"
    if [ -d "$1" ]; then cp -a "$1"/. "$2"/; else tar xzf "$1" -C "$2" --strip-components=1; fi
}

stamp_of() {  # what a build depends on: the sources' contents (not their paths) and the Slurm it is built for
    local f
    { for f in "$@"; do
          if [ -d "$f" ]; then (cd "$f" && find . -type f -exec sha256sum {} + | sort); else sha256sum <"$f"; fi
      done; dpkg-query -W libslurm-dev; } | sha256sum | cut -c1-16
}

build_enroot() {  # $1: source, $2: PREFIX, $3: build dir
    local b=$3/enroot
    unpack "$1" "$b"
    cp /usr/bin/makeself "$b/deps/makeself/makeself.sh" && mkdir -p "$b/deps/linux-headers"
    touch "$b/deps/linux-headers/.stamp"  # the system's kernel headers
    printf '#include <stddef.h>\nsize_t strlcpy(char *, const char *, size_t);\nsize_t strlcat(char *, const char *, size_t);\n' >"$b/strl.h"
    # CPPFLAGS from the environment (enroot's Makefile appends it; on make's command line it would replace the
    # -isystem flags of enroot's own deps/Makefile)
    ( cd "$b" && export CPPFLAGS="-include $b/strl.h" && make -s FORCE_GLIBC=1 prefix="$2" LDLIBS="-l:libbsd.a -l:libbsd.so" \
        && make -s install FORCE_GLIBC=1 prefix="$2" LDLIBS="-l:libbsd.a -l:libbsd.so" ) \
        >"$3/enroot.log" 2>&1 || cannot "enroot build failed: $(tail -1 "$3/enroot.log") (see $3/enroot.log)"
}

build_pyxis() {  # $1: source, $2: PREFIX, $3: build dir
    local b=$3/pyxis
    unpack "$1" "$b"
    ( cd "$b" && make -s && make -s install prefix="$2" ) >"$3/pyxis.log" 2>&1 \
        || cannot "pyxis build failed: $(tail -1 "$3/pyxis.log") (see $3/pyxis.log)"
}

build() {  # $1: SRC, $2: PREFIX
    local src=$1 prefix=$2 m s
    m=$(missing_deps)
    [ -z "$m" ] || cannot "pyxis/enroot build deps missing: $m (apt-get install $m; .ci/run installs them)"
    local list; list=$(sources "$src") || { echo "$list"; exit 3; }  # its "cannot start" line
    mapfile -t s <<<"$list"
    local stamp; stamp=$(stamp_of "${s[@]}")
    if [ -x "$prefix/bin/enroot" ] && [ -f "$prefix/lib/slurm/spank_pyxis.so" ] && [ "$(cat "$prefix/.stamp" 2>/dev/null)" = "$stamp" ]; then
        say "reusing the build in $prefix"; return 0
    fi
    local t0=$SECONDS
    rm -rf "$prefix" && mkdir -p "$prefix/build"
    build_enroot "${s[0]}" "$prefix" "$prefix/build"
    build_pyxis "${s[1]}" "$prefix" "$prefix/build"
    echo "$stamp" >"$prefix/.stamp"
    say "built $("$prefix/bin/enroot" version | head -1) and pyxis into $prefix in $((SECONDS - t0)) s"
}

# enroot's paths under PREFIX/state (private to this cluster), its containers and runtime per node: every node
# here is this one host, and Pyxis names a step's container pyxis_JOB.STEP on each node alike.  enroot evaluates
# its config's values in the environment pyxis runs it in, the task's: SLURM_TOPOLOGY_ADDR is the node's name
# there (slurmd sets it; without a topology plugin it is the node name itself)
# Unpacked containers (ENROOT_DATA_PATH) go to a tmpfs where /dev/shm is one with room for three: `enroot create`
# writes the image's ~30,000 files per container, and on this host's ext4 that took 15-21 CPU s of kernel time per
# 1.1 GB test image against 1.5 CPU s on tmpfs (unsquashfs, 3 runs each, 2-core x86 VM, Debian 12).  Sites do the
# same on nodes with the memory for it (enroot's docs: ENROOT_DATA_PATH on a tmpfs or local NVMe).
SHM_MIN_KB=$((8 * 1024 * 1024))  # 3 containers of the 1.1 GB test image, and room to spare

shm_dir() { echo "/dev/shm/trainready-$(basename "$1")"; }  # $1: CONF_DIR -> its folder on /dev/shm

data_root() {  # $1: CONF_DIR, $2: STATE -> where this cluster's unpacked containers go
    local avail
    avail=$(df -k --output=fstype,avail /dev/shm 2>/dev/null | awk 'NR == 2 && $1 == "tmpfs" {print $2}')
    if [ -n "$avail" ] && [ "$avail" -ge "$SHM_MIN_KB" ]; then shm_dir "$1"; else echo "$2/data"; fi
}

register() {  # $1: CONF_DIR, $2: PREFIX
    local conf=$1 prefix=$2 st=$2/state data
    data=$(data_root "$conf" "$st")
    mkdir -p "$st"/{cache,runtime,tmp,config} "$data"
    chmod 0700 "$st"/* "$data"
    cat >"$prefix/etc/enroot/enroot.conf" <<EOF
$MARK
ENROOT_RUNTIME_PATH $st/runtime/\${SLURM_TOPOLOGY_ADDR:-host}/user-\$(id -u)
ENROOT_CACHE_PATH $st/cache/group-\$(id -g)
ENROOT_DATA_PATH $data/\${SLURM_TOPOLOGY_ADDR:-host}/user-\$(id -u)
ENROOT_TEMP_PATH $st/tmp
ENROOT_CONFIG_PATH $st/config
ENROOT_SQUASH_OPTIONS -noI -noD -noF -noX -no-duplicates
EOF
    # pyxis's own paths (pyxis README, "Plugin arguments"): its runtime under the cluster's state too
    cat >"$conf/plugstack.conf" <<EOF
$MARK
required $prefix/lib/slurm/spank_pyxis.so runtime_path=$st/pyxis
EOF
    mkdir -p "$st/pyxis"
}

unregister() {  # $1: CONF_DIR
    [ -f "$1/plugstack.conf" ] && grep -qF "$MARK" "$1/plugstack.conf" && rm -f "$1/plugstack.conf"
    rm -rf "$(shm_dir "$1")"  # data_root's tmpfs folder, where it was used
    return 0
}

cmd=${1:-}
case "$cmd" in
    build) [ $# = 3 ] || { echo "usage: $0 build SRC PREFIX" >&2; exit 2; }; build "$2" "$3" ;;
    register) [ $# = 3 ] || { echo "usage: $0 register CONF_DIR PREFIX" >&2; exit 2; }; register "$2" "$3" ;;
    unregister) [ $# = 2 ] || { echo "usage: $0 unregister CONF_DIR" >&2; exit 2; }; unregister "$2" ;;
    *) echo "usage: $0 build SRC PREFIX | register CONF_DIR PREFIX | unregister CONF_DIR" >&2; exit 2 ;;
esac
