"""The checkpoint manifest: sha256 and size of every file, written last.

Layout of one checkpoint directory ``step-N/``::

    .metadata              DCP's global plan (rank 0)
    __R_0.distcp           DCP tensor data of rank R (single file per rank)
    train-rank-R.json      step, LR scheduler, data position, RNG of rank R
    manifest.json          {"format", "step", "world_size", "files": {name: {"bytes", "piece_bytes", "sha256": [..]}}}

`sha256` lists the digest of each 64 MiB piece (hashed in parallel threads); a file
of at most 64 MiB has one entry, equal to `sha256sum FILE`.

A directory without `manifest.json` is half-written; a file whose sha256 or size
differs from the manifest is corrupted.  Either is a `CheckpointError`, never a load.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from trainready.errors import CheckpointError
from trainready.util.atomic import fsync_path

FORMAT = "trainready.ckpt/1"
MANIFEST = "manifest.json"
CHUNK = 8 << 20  # 8 MiB reads: large enough to run hashlib at its full speed
PIECE = 64 << 20  # each 64 MiB piece of a file has its own sha256, so pieces hash in parallel
HASH_THREADS = max(1, min(16, os.cpu_count() or 1))


def _hash_piece(path: Path, offset: int, length: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as fh:
        fh.seek(offset)
        left = length
        while left:
            block = fh.read(min(CHUNK, left))
            if not block:
                break
            h.update(block)  # hashlib releases the GIL for large buffers: pieces hash in parallel
            left -= len(block)
    return h.hexdigest()


def hash_file(path: Path, fsync: bool = True) -> dict[str, Any]:
    """sha256 of every PIECE-byte piece (threads in parallel) + byte count; also fsyncs the file.

    For a file of at most PIECE bytes the single entry equals `sha256sum FILE`.
    """
    size = path.stat().st_size
    spans = [(o, min(PIECE, size - o)) for o in range(0, size, PIECE)] or [(0, 0)]
    if len(spans) == 1:
        digests = [_hash_piece(path, 0, size)]
    else:
        with ThreadPoolExecutor(max_workers=min(len(spans), HASH_THREADS)) as pool:
            digests = list(pool.map(lambda s: _hash_piece(path, *s), spans))
    if fsync:
        fsync_path(path)
    return {"bytes": size, "piece_bytes": PIECE, "sha256": digests}


def hash_and_sync(paths: list[Path]) -> dict[str, dict[str, Any]]:
    """`hash_file` for many files at once, each file's fsync running beside its hashing.

    fsync waits on the disk, sha256 on the CPU: overlapped, the manifest costs
    about max(flush, hash) instead of their sum.  Keyed by file name.
    """
    with ThreadPoolExecutor(max_workers=len(paths) or 1) as syncers, ThreadPoolExecutor(max_workers=HASH_THREADS) as hashers:
        syncs = [syncers.submit(fsync_path, p) for p in paths]
        pieces = {}
        for p in paths:
            size = p.stat().st_size
            spans = [(o, min(PIECE, size - o)) for o in range(0, size, PIECE)] or [(0, 0)]
            pieces[p] = (size, [hashers.submit(_hash_piece, p, o, n) for o, n in spans])
        for f in syncs:
            f.result()
        return {p.name: {"bytes": size, "piece_bytes": PIECE, "sha256": [f.result() for f in futs]}
                for p, (size, futs) in pieces.items()}




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
        bad = [i for i, (g, w) in enumerate(zip(got, want["sha256"])) if g != w]
        if bad or len(got) != len(want["sha256"]):
            i = bad[0] if bad else 0
            where = f" (bytes {i * PIECE}-{min((i + 1) * PIECE, size)})" if len(got) > 1 else ""
            problems.append(
                f"{path}: sha256{where} {got[i][:12]}… does not match the manifest's {want['sha256'][i][:12]}… (corrupted)"
            )
    return problems
