"""`trainready image import`: a registry image pinned by digest → one squashfs (the site's `enroot import`,
SOURCE_DATE_EPOCH set: the same image gives the same bytes) and its record beside it.

What is imported is what was verified: the manifest is fetched and checked against the pin here (registry.py),
and enroot fetches it again on its own (src/docker.sh: first asking for an index, then for the manifest an
index entry names) and checks no manifest against anything.  So the manifest enroot parsed is seen as it got it
(seen.py: a curl of ours before the real one on its PATH) and must hash to the verified one; and enroot runs with
a cache of its own, empty at the start: every blob it used is then in it, named by the sha256 enroot checked it
against, and that set must be the verified manifest's config and layers.  A registry (or a proxy) that answers
enroot otherwise than it answered trainready makes the import fail, naming both, and nothing is published.

Atomic: enroot writes `.NAME.sqsh.part-PID` in the destination folder; only a complete import whose manifest was
checked against the pin is renamed to NAME.sqsh, then its record written; a failure or an interruption removes
the part file and writes nothing.  An existing NAME.sqsh with another sha256 is never overwritten."""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from trainready.bundle.layout import sha256_file
from trainready.errors import ImageError, UsageError
from trainready.image import enroot, ref as refs, registry, seen
from trainready.image.record import SCHEMA, record_path
from trainready.util.atomic import atomic_write_json, fsync_path


@dataclass(frozen=True)
class Imported:
    sqsh: Path
    record: Path
    doc: dict[str, Any]
    fresh: bool
    """False: the same file (same sha256) was already there."""


def target(ref: refs.ImageRef, out: str | None) -> Path:
    """--out FILE (ending .sqsh), or --out DIR (default: here) with the name from the image and its digest."""
    p = Path(out or ".").expanduser()
    if p.suffix == ".sqsh":
        if not p.parent.is_dir():
            raise UsageError(f"--out {out}: no such folder {p.parent}")
        return p.resolve()
    if not p.is_dir():
        raise UsageError(f"--out {out}: expected an existing folder or a FILE.sqsh")
    return (p / f"{ref.file_stem()}.sqsh").resolve()


def pin(e: enroot.Enroot, ref: refs.ImageRef, resolve: bool, say: Callable[[str], None]) -> refs.ImageRef:
    """The reference pinned: as given, or (--resolve) its tag resolved with `enroot digest`."""
    if ref.digest is not None:
        return ref
    if not resolve:
        refs.require_pin(ref)
    d = enroot.digest(e, ref.uri())
    say(f"resolved {ref.given} to {d} (enroot digest)")
    return ref.pinned(d)


def import_image(given: str, out: str | None, resolve: bool, say: Callable[[str], None]) -> Imported:
    ref = refs.parse(given)
    if ref.digest is None and not resolve:
        refs.require_pin(ref)
    e = enroot.find()
    ref = pin(e, ref, resolve, say)
    dest = target(ref, out)
    man = registry.verified(e, ref)
    say(f"manifest {ref.digest} checked (sha256 of the registry's manifest = the pin); {len(man.layers)} layer(s)")
    part = dest.with_name(f".{dest.name}.part-{os.getpid()}")
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or 0)
    t0 = time.monotonic()
    work = fresh_cache(e, dest)
    try:
        (work / "cache").mkdir()
        enroot.run_import(e, ref.uri(), part, epoch, {"ENROOT_CACHE_PATH": str(work / "cache"), **seen.prepare(work)})
        parsed_is_verified(man, seen.used_manifest(work), ref)
        held_to(man, fetched(work / "cache"), ref)
        wall = time.monotonic() - t0
        sha, size = "sha256:" + sha256_file(part), part.stat().st_size
        doc = record_doc(ref, man, e, dest, sha, size, wall, epoch)
        return publish(part, dest, doc)
    finally:
        part.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)


def fresh_cache(e: enroot.Enroot, dest: Path) -> Path:
    """An empty folder for this import (enroot's cache, the curl wrapper and what it saw): inside the site's
    ENROOT_CACHE_PATH (the file system chosen for layers) where it exists, else beside DEST."""
    site = Path(e.config.get("ENROOT_CACHE_PATH") or "").expanduser()
    where = site if str(site) not in ("", ".") and site.is_dir() and os.access(site, os.W_OK) else dest.parent
    return Path(tempfile.mkdtemp(prefix=".trainready-import-", dir=where))


def fetched(cache: Path) -> set[str]:
    """The blobs enroot fetched into its cache: each file named by the sha256 enroot checked its bytes against."""
    return {f"sha256:{p.name}" for p in cache.iterdir() if re.fullmatch(r"[0-9a-f]{64}", p.name)}


def parsed_is_verified(man: registry.Manifest, used: tuple[str, str] | None, ref: refs.ImageRef) -> None:
    """The manifest enroot took its config and layers from must be the verified one; else one ImageError."""
    pinned = man.platform_digest or man.digest
    if used is None:
        raise ImageError(f"{ref.uri(False)}: the manifest enroot fetched was not seen (its curl calls were not those "
                         "of enroot's src/docker.sh), so it cannot be held to the pin; nothing published")
    if used[1] != pinned:
        raise ImageError(f"{ref.uri(False)}: enroot fetched another manifest than the pin: {used[1]} from {used[0]}, "
                         f"where the verified manifest is {pinned}; nothing published")


def held_to(man: registry.Manifest, got: set[str], ref: refs.ImageRef) -> None:
    """The blobs enroot used must be exactly the verified manifest's config and layers; else one ImageError."""
    want = {man.config, *man.layers}
    if got == want:
        return
    pinned = man.platform_digest or man.digest
    extra, missing = sorted(got - want), sorted(want - got)
    raise ImageError(f"{ref.uri(False)}: enroot fetched another image than the pin: the verified manifest {pinned} "
                     f"(config {man.config}) names {', '.join(missing) or 'no other blob'}, enroot fetched "
                     f"{', '.join(extra) or 'fewer blobs'} instead; nothing published")


def record_doc(ref: refs.ImageRef, man: registry.Manifest, e: enroot.Enroot, dest: Path, sha: str, size: int,
               wall: float, epoch: int) -> dict[str, Any]:
    """The versioned record (no credential: the reference's user name at most, never a password or token)."""
    return {"schema": SCHEMA, "file": dest.name, "reference": ref.uri(), "given": ref.given,
            "registry": ref.registry, "image": ref.image, "tag": ref.tag, "digest": ref.digest,
            "platform_digest": man.platform_digest, "config_digest": man.config, "layers": list(man.layers),
            "sha256": sha, "size_bytes": size,
            "enroot": {"version": e.version, "path": e.path, "squash_options": e.config.get("ENROOT_SQUASH_OPTIONS", ""),
                       "source_date_epoch": epoch},
            "import_s": round(wall, 3), "imported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": socket.gethostname()}


def publish(part: Path, dest: Path, doc: dict[str, Any]) -> Imported:
    """PART → DEST and its record, unless DEST holds another file or is a symbolic link, dangling or not (then
    nothing changes: one ImageError)."""
    rec = record_path(dest)
    if dest.is_symlink():
        raise ImageError(f"{dest} is a symbolic link (to {os.readlink(dest)}): not overwritten, not followed "
                         "(remove it, or import to another --out)")
    if dest.exists():
        have = "sha256:" + sha256_file(dest)
        if have != doc["sha256"]:
            raise ImageError(f"{dest} exists with {have}; this import of {doc['reference']} is {doc['sha256']}: "
                             "not overwritten (remove it, or import to another --out)")
        atomic_write_json(rec, doc)
        return Imported(dest, rec, doc, False)
    fsync_path(part)
    try:
        os.link(part, dest)  # never over a file another import published meanwhile (the part is removed after)
    except FileExistsError:  # another import published it meanwhile: judged as above, once
        if not dest.exists() or dest.is_symlink():
            raise ImageError(f"{dest}: appeared during the import and is not a file: not overwritten") from None
        return publish(part, dest, doc)
    fsync_path(dest.parent)
    atomic_write_json(rec, doc)
    return Imported(dest, rec, doc, True)
