#!/usr/bin/env bash
# A local OCI registry on 127.0.0.1 for the image tests: Debian's docker-registry (github.com/distribution/
# distribution 2.8) with a config of its own, and a small test image pushed into it with skopeo.
#
#   scripts/local-registry.sh up [--port P] [--big MB]
#                      start the registry (127.0.0.1:P only, default 5611; storage under its own state folder),
#                      build a small image from a local root file system (a few text files in one layer, an OCI
#                      layout written here) and push it as trainready/small:v1 with skopeo, and the same with one file
#                      more as trainready/other:v1; --big MB: also push
#                      trainready/big:v1, one layer of MB MiB of random bytes (an import that takes a moment).
#                      Prints the pushed references pinned by digest, one a line: "NAME:TAG@sha256:HEX".
#                      Idempotent: a registry already up is reused; an image already pushed is pushed again
#                      unchanged (the layout is reproducible: same bytes, same digest).
#   scripts/local-registry.sh down [--port P]    stop the registry this script started, remove its state
#   scripts/local-registry.sh status [--port P]  exit 0 when the registry answers on /v2/, else 1
#
# It never installs a package: where docker-registry or skopeo is missing (or it cannot bind the port) it prints
# ONE line "local-registry: cannot start: ..." and exits 3, so the tests skip saying why (.ci/run installs
# docker-registry and skopeo).  The registry speaks plain HTTP: enroot fetches from it only with
# ENROOT_ALLOW_HTTP set (enroot's docs, "Configuration"), skopeo with --dest-tls-verify=false.
set -u

PORT=5611 BIG=0

cannot() { echo "local-registry: cannot start: $*"; exit 3; }
say() { echo "local-registry: $*" >&2; }

paths() {  # state of the registry on port $PORT
    STATE=${LOCAL_REGISTRY_STATE:-/tmp/trainready-registry-$PORT}
    PIDF=$STATE/registry.pid LOGF=$STATE/registry.log CONF=$STATE/config.yml
}

alive() { [ -f "$PIDF" ] && kill -0 "$(cat "$PIDF")" 2>/dev/null; }
answers() { curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/v2/" 2>/dev/null; }

write_config() {
    mkdir -p "$STATE/data"
    cat >"$CONF" <<EOF
# written by trainready scripts/local-registry.sh
version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: $STATE/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$PORT
EOF
}

start() {
    command -v docker-registry >/dev/null || cannot "docker-registry not installed (apt-get install docker-registry; .ci/run installs it)"
    command -v skopeo >/dev/null || cannot "skopeo not installed (apt-get install skopeo; .ci/run installs it)"
    if alive && answers; then return 0; fi
    write_config
    setsid docker-registry serve "$CONF" >>"$LOGF" 2>&1 </dev/null &
    echo $! >"$PIDF"
    local i
    for i in $(seq 1 50); do
        answers && return 0
        alive || cannot "docker-registry exited: $(grep -v '^$' "$LOGF" | tail -1)"
        sleep 0.1
    done
    cannot "docker-registry does not answer on 127.0.0.1:$PORT within 5 s (see $LOGF)"
}

blob() {  # $1: layout, $2: file -> moves it into the layout's blobs, prints "sha256:HEX SIZE"
    local hex size
    hex=$(sha256sum "$2" | cut -d' ' -f1) size=$(stat -c %s "$2")
    mv "$2" "$1/blobs/sha256/$hex"
    echo "sha256:$hex $size"
}

layout() {  # $1: rootfs, $2: layout dir, $3: tag -> an OCI image layout of one uncompressed layer (reproducible)
    local root=$1 out=$2 tag=$3 layer cfg man diff
    rm -rf "$out" && mkdir -p "$out/blobs/sha256"
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$root" -cf "$out/layer.tar" .
    read -r layer lsize < <(blob "$out" "$out/layer.tar")
    diff=$layer  # uncompressed: the layer's digest is its diff_id
    # a history entry: docker-registry 2.8 answers a request by tag without an Accept header (enroot's first request)
    # with the image converted to a schema 1 manifest, which needs one
    printf '{"architecture":"amd64","os":"linux","created":"1970-01-01T00:00:00Z","config":{"Env":["PATH=/usr/bin:/bin"]},"rootfs":{"type":"layers","diff_ids":["%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"scripts/local-registry.sh"}]}' \
        "$diff" >"$out/config.json"
    read -r cfg csize < <(blob "$out" "$out/config.json")
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"%s","size":%s}]}' \
        "$cfg" "$csize" "$layer" "$lsize" >"$out/manifest.json"
    read -r man msize < <(blob "$out" "$out/manifest.json")
    printf '{"imageLayoutVersion":"1.0.0"}' >"$out/oci-layout"
    printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"}}]}' \
        "$man" "$msize" "$tag" >"$out/index.json"
    echo "$man"
}

push() {  # $1: rootfs, $2: name (trainready/NAME), prints NAME:v1@DIGEST
    local err
    layout "$1" "$STATE/oci-$2" v1 >/dev/null
    # a Docker v2 schema 2 manifest: docker-registry 2.8 answers a HEAD without an Accept header (enroot's first
    # request) with 404 for an OCI manifest.  The digest of the manifest as pushed: its sha256 is the pin
    err=$(skopeo copy -q --format v2s2 --dest-tls-verify=false --digestfile "$STATE/digest-$2" "oci:$STATE/oci-$2:v1" \
          "docker://127.0.0.1:$PORT/trainready/$2:v1" 2>&1) \
        || cannot "skopeo copy to 127.0.0.1:$PORT failed: $(echo "$err" | tail -1)"
    echo "trainready/$2:v1@$(cat "$STATE/digest-$2")"
}

small_rootfs() {  # a root file system of a few files, the same bytes every time
    local r=$STATE/rootfs-small
    rm -rf "$r" && mkdir -p "$r/etc" "$r/usr/share/trainready"
    printf 'PRETTY_NAME="trainready test image"\nID=trainready-test\n' >"$r/etc/os-release"
    printf 'a small image for the registry tests\n' >"$r/usr/share/trainready/README"
    echo "$r"
}

other_rootfs() {  # the small image and one file more: another image, another digest
    local r=$STATE/rootfs-other
    small_rootfs >/dev/null && rm -rf "$r" && cp -a "$STATE/rootfs-small" "$r"
    printf 'one file more\n' >"$r/usr/share/trainready/OTHER"
    echo "$r"
}

big_rootfs() {  # $1: MiB of random bytes in one file (kept between runs: the same layer, the same digest)
    local r=$STATE/rootfs-big-$1
    if [ ! -f "$r/blob.bin" ]; then
        mkdir -p "$r" && head -c "$(($1 * 1024 * 1024))" /dev/urandom >"$r/blob.bin.tmp" && mv "$r/blob.bin.tmp" "$r/blob.bin"
    fi
    echo "$r"
}

up() {
    start
    push "$(small_rootfs)" small
    push "$(other_rootfs)" other
    if [ "$BIG" -gt 0 ]; then push "$(big_rootfs "$BIG")" big; fi
}

down() {
    if alive; then
        local pid; pid=$(cat "$PIDF")
        kill "$pid" 2>/dev/null
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null
    fi
    case "$STATE" in /tmp/trainready-registry-*) rm -rf "$STATE" ;; *) rm -f "$PIDF" ;; esac
}

cmd=${1:-}; shift || true
while [ $# -gt 0 ]; do
    case "$1" in
        --port) PORT=${2:?--port needs a number}; shift 2 ;;
        --big) BIG=${2:?--big needs MiB}; shift 2 ;;
        *) echo "local-registry: unknown option '$1' (expected --port P, --big MB)" >&2; exit 2 ;;
    esac
done
case "$PORT$BIG" in *[!0-9]*) echo "local-registry: --port and --big take numbers" >&2; exit 2 ;; esac
paths
case "$cmd" in
    up) up ;;
    down) down ;;
    status) if alive && answers; then echo "local-registry: up on 127.0.0.1:$PORT"; else echo "local-registry: not up on 127.0.0.1:$PORT"; exit 1; fi ;;
    *) echo "usage: $0 up [--port P] [--big MB] | down [--port P] | status [--port P]" >&2; exit 2 ;;
esac
