"""The checkpoint manifest: sha256 and size of every file, written last.

Layout of one checkpoint directory ``step-N/``::

    .metadata              DCP's global plan (rank 0)
    __R_0.distcp           DCP tensor data of rank R (single file per rank)
    train-rank-R.json      step, LR scheduler, data position, RNG of rank R
    manifest.json          {"format", "step", "world_size", "files": {name: {"sha256", "bytes"}}}

A directory without `manifest.json` is half-written; a file whose sha256 or size
differs from the manifest is corrupted.  Either is a `CheckpointError`, never a load.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from trainready.errors import CheckpointError

FORMAT = "trainready.ckpt/1"
MANIFEST = "manifest.json"
CHUNK = 8 << 20  # 8 MiB reads: large enough to run hashlib at its full speed


def hash_file(path: Path, fsync: bool = True) -> dict[str, Any]:
    """sha256 + byte count of one file; also fsyncs it (cheap if DCP already did)."""
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as fh:
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while True:
            got = fh.readinto(buf)
            if not got:
                break
            h.update(view[:got])
            n += got
        if fsync:
            os.fsync(fh.fileno())
    return {"sha256": h.hexdigest(), "bytes": n}


def files_of_rank(directory: Path, rank: int) -> list[Path]:
    """The files rank `rank` wrote into a checkpoint directory (DCP's naming: __R_i.distcp)."""
    mine = [p for p in directory.iterdir() if p.name.startswith(f"__{rank}_") or p.name == f"train-rank-{rank}.json"]
    if rank == 0:
        mine += [p for p in directory.iterdir() if p.name == ".metadata"]
    return sorted(mine)


def build(step: int, world_size: int, hashes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"format": FORMAT, "step": step, "world_size": world_size, "files": dict(sorted(hashes.items()))}


def read(directory: Path) -> dict[str, Any]:
    """Read and sanity-check a manifest; missing or malformed → CheckpointError."""
    path = directory / MANIFEST
    if not path.is_file():
        raise CheckpointError(f"{directory}: no {MANIFEST}: the checkpoint is half-written (a save did not finish)")
    try:
        man = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: unreadable manifest ({exc})") from None
    if not isinstance(man, dict) or man.get("format") != FORMAT or not isinstance(man.get("files"), dict):
        raise CheckpointError(f"{path}: not a {FORMAT} manifest (found format {man.get('format') if isinstance(man, dict) else type(man).__name__!r})")
    return man


def verify_files(directory: Path, man: dict[str, Any], names: list[str]) -> list[str]:
    """Check the named files against the manifest; return one problem line per bad file."""
    problems = []
    for name in names:
        want = man["files"][name]
        path = directory / name
        if not path.is_file():
            problems.append(f"{path}: listed in the manifest but missing")
            continue
        size = path.stat().st_size
        if size != want["bytes"]:
            problems.append(f"{path}: {size} bytes, manifest says {want['bytes']} (truncated or overwritten)")
            continue
        got = hash_file(path, fsync=False)["sha256"]
        if got != want["sha256"]:
            problems.append(
                f"{path}: sha256 {got[:12]}… does not match the manifest's {want['sha256'][:12]}… (corrupted)"
            )
    return problems
