"""Save a checkpoint so that a crash at any instant leaves the previous one usable.

Order (every rank unless noted):
  1. rank 0 clears a stale ``step-N.tmp/`` and creates it;           barrier
  2. `torch.distributed.checkpoint.save` of {"model", "optim"} from
     `get_state_dict` into ``step-N.tmp/`` (one file per rank, fsynced);
  3. write ``train-rank-R.json`` atomically (fsync + rename);
  4. hash + fsync own files, gather the hashes on rank 0;
  5. rank 0: write ``manifest.json``, fsync the dir, rename ``step-N.tmp`` →
     ``step-N``, fsync the parent, then update ``latest`` atomically — LAST;  barrier.
A `kill -9` before 5 completes leaves ``latest`` on the previous checkpoint; the
loader never looks at ``*.tmp``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict

from trainready.ckpt import manifest
from trainready.util.atomic import atomic_write_json, atomic_write_text, fsync_dir

LATEST = "latest"


def step_dir(root: Path, step: int) -> Path:
    return root / f"step-{step}"


def _dist() -> bool:
    return dist.is_available() and dist.is_initialized()


def barrier() -> None:
    if _dist():
        dist.barrier()


def gather_to_all(obj: Any) -> list[Any]:
    """all_gather_object, or [obj] without a process group."""
    if not _dist():
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def writer(path: Path, tuned: bool = True) -> dcp.FileSystemWriter:
    """DCP's file writer. One file per rank, fsynced; `tuned` adds parallel writer
    threads (see ckpt/throughput.py for the measurement that chose them)."""
    if not tuned:
        return dcp.FileSystemWriter(str(path))
    return dcp.FileSystemWriter(str(path), single_file_per_rank=True, sync_files=True, thread_count=1)


def save_checkpoint(
    root: Path,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    train_state: dict[str, Any],
    rank: int = 0,
    world_size: int = 1,
    tuned: bool = True,
) -> Path:
    """Collective: every rank calls it. Returns the final ``step-N`` directory."""
    root = Path(root)
    tmp = root / f"step-{step}.tmp"
    if rank == 0:
        root.mkdir(parents=True, exist_ok=True)
        if tmp.exists():
            shutil.rmtree(tmp)  # left by a killed save
        tmp.mkdir()
    barrier()
    msd, osd = get_state_dict(model, optimizer)
    dcp.save({"model": msd, "optim": osd}, storage_writer=writer(tmp, tuned))
    atomic_write_json(tmp / f"train-rank-{rank}.json", {"rank": rank, "world_size": world_size, "step": step, **train_state})
    mine = {p.name: manifest.hash_file(p) for p in manifest.files_of_rank(tmp, rank)}
    every = gather_to_all(mine)
    final = step_dir(root, step)
    if rank == 0:
        hashes: dict[str, Any] = {}
        for part in every:
            hashes.update(part)
        atomic_write_json(tmp / manifest.MANIFEST, manifest.build(step, world_size, hashes))
        fsync_dir(tmp)
        old = None
        if final.exists():  # re-saving a step: keep the old one until `latest` moved
            old = root / f"step-{step}.old-{os.getpid()}"
            os.replace(final, old)
        os.replace(tmp, final)
        fsync_dir(root)
        atomic_write_text(root / LATEST, final.name + "\n")
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    barrier()
    return final
