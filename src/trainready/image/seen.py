"""The manifest enroot itself fetched during `enroot import`, seen as it got it.

enroot (src/docker.sh `docker::_download`) asks the registry twice through curl: first for an index only, then
for the single manifest (the index entry for this architecture, else the reference); the config and the layers
it imports are those that second manifest names, and it checks no manifest against anything.  `enroot import`
runs here with a `curl` of ours first on its PATH (WRAPPER: plain bash, every name through the environment or
its own arguments): for a GET of `/manifests/`, it keeps a copy of the body the real curl wrote and the Accept
header asked with; anything else it hands to the real curl untouched.  The manifest enroot used is the last
body fetched with enroot's single-manifest Accept header; its sha256 must be the verified manifest's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from trainready.errors import ImageError

# Runs as `curl ARGS...` for enroot; TR_REAL_CURL the real one, TR_SEEN the folder for the copies.
WRAPPER = r"""#!/bin/bash
set -u
url= head= accept= oi=-1 i=0 prev=
for a in "$@"; do
    [ "$prev" = "-o" ] && oi=$i
    case $a in
        -I|--head) head=1 ;;
        [Aa]ccept:*) accept=$a ;;
        http://*/manifests/*|https://*/manifests/*) url=$a ;;
    esac
    prev=$a i=$((i + 1))
done
[ -z "$url" ] || [ -n "$head" ] || [ "$oi" -lt 0 ] && exec "$TR_REAL_CURL" "$@"
args=("$@")
out=${args[$oi]}
n=$TR_SEEN/$(date +%s%N).$$
args[$oi]=$n.body
"$TR_REAL_CURL" "${args[@]}"
rc=$?
[ -f "$n.body" ] && cat -- "$n.body" >"$out"
printf '%s\n%s\n' "$accept" "$url" >"$n.meta"
exit $rc
"""
SINGLE = "application/vnd.oci.image.manifest.v1+json"  # in enroot's single-manifest Accept, never in its list one
LIST = "application/vnd.oci.image.index.v1+json"


def prepare(work: Path) -> dict[str, str]:
    """The environment that puts the wrapper before the real curl (work/bin) and its copies in work/seen."""
    real = shutil.which("curl")
    if real is None:
        raise ImageError("curl: not found on PATH (enroot fetches with it)")
    (work / "bin").mkdir()
    (work / "seen").mkdir()
    wrapper = work / "bin" / "curl"
    wrapper.write_text(WRAPPER)
    wrapper.chmod(0o755)
    return {"PATH": f"{work / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", "TR_REAL_CURL": real,
            "TR_SEEN": str(work / "seen")}


def used_manifest(work: Path) -> tuple[str, str] | None:
    """(url, sha256 of the body) of the manifest enroot parsed its config and layers from; None if none was seen."""
    last = None
    for meta in sorted((work / "seen").glob("*.meta")):
        accept, _, url = meta.read_text(errors="replace").partition("\n")
        body = meta.with_suffix(".body")
        if SINGLE in accept and LIST not in accept and body.is_file():
            last = (url.strip(), "sha256:" + hashlib.sha256(body.read_bytes()).hexdigest())
    return last
