"""Save a checkpoint so that a crash at any instant leaves the previous one usable.

Order (every rank unless noted):
  1. rank 0 clears a stale ``step-N.tmp/`` and creates it;           barrier
  2. `torch.distributed.checkpoint.save` of {"model", "optim"} from
     `get_state_dict` into ``step-N.tmp/`` (one file per rank, fsynced);
  3. write ``train-rank-R.json`` atomically (fsync + rename);
  4. hash + fsync own files, gather the hashes on rank 0;
  5. rank 0: write ``manifest.json``, fsync the dir, rename ``step-N.tmp`` →
     ``step-N`` (``step-N.r<ns>`` if step N exists: the live directory is never
     renamed), fsync the parent, update ``latest`` atomically, then delete older
     copies of step N;  barrier.
A `kill -9` at any instant leaves ``latest`` naming a complete checkpoint; the
loader never looks at ``*.tmp``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException  # a BaseException, not an Exception
from torch.distributed.checkpoint.state_dict import get_state_dict

from trainready.ckpt import manifest
from trainready.util.atomic import atomic_write_json, atomic_write_text, fsync_dir

LATEST = "latest"


def step_dir(root: Path, step: int) -> Path:
    return root / f"step-{step}"


def publish(root: Path, tmp: Path, step: int) -> Path:
    """Rank 0: make the finished ``tmp`` the checkpoint `latest` names, never touching the live one.

    ``tmp`` is renamed to a name no directory has (``step-N``, or ``step-N.r<ns>`` when
    step N is being saved again), then `latest` is replaced atomically, and only then
    are the older directories of step N deleted.  A kill at any instant leaves `latest`
    naming a complete directory: the previous one until the pointer moved, the new one after.
    """
    final = step_dir(root, step)
    if final.exists() or final.is_symlink():
        final = root / f"step-{step}.r{time.time_ns():x}"
    os.replace(tmp, final)
    fsync_dir(root)
    atomic_write_text(root / LATEST, final.name + "\n")
    for old in root.iterdir():  # earlier saves of this step (step-N, step-N.r*, step-N.old-*), now unreferenced
        mine = old.name == f"step-{step}" or old.name.startswith(f"step-{step}.")
        if mine and old != final and old != tmp and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    return final


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


WRITE_THREADS = max(1, min(8, os.cpu_count() or 1))  # parallel DCP writer threads (files) per rank
_PINNED: dict[str, torch.Tensor] = {}  # one reusable pinned staging buffer per process


def release_staging() -> None:
    """Forget the pinned staging buffer, and empty torch's pinned-host cache where this
    torch has it, so that the next save pays the pinned allocation again (as a
    training job's first save does).  Used before every timed save (ckpt/throughput.py)."""
    _PINNED.clear()
    empty = getattr(torch._C, "_host_emptyCache", None)  # private; present in torch >= 2.1
    if torch.cuda.is_available() and callable(empty):
        empty()


def writer(path: Path, tuned: bool = True) -> dcp.FileSystemWriter:
    """DCP's file writer.  `tuned`: WRITE_THREADS threads each writing its own file
    (DCP's default: one thread, one file per rank), and no fsync inside DCP: the
    manifest step fsyncs every file itself, overlapped with hashing it
    (`manifest.hash_and_sync`), before anything is renamed — durability is the same."""
    if not tuned:
        return dcp.FileSystemWriter(str(path))
    return dcp.FileSystemWriter(str(path), single_file_per_rank=True, sync_files=False, thread_count=WRITE_THREADS)


def stage_to_cpu(state: Any) -> Any:
    """Copy every plain CUDA tensor into one reused pinned host buffer (one burst of
    async D2H copies, one sync) instead of DCP's per-tensor `.cpu()` to pageable
    memory.  DTensors (FSDP2 shards) are left to DCP, which needs their placement."""
    leaves: list[torch.Tensor] = []

    def collect(x: Any) -> None:
        if isinstance(x, dict):
            for v in x.values():
                collect(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                collect(v)
        elif type(x) is torch.Tensor and x.is_cuda:
            leaves.append(x)

    collect(state)
    if not leaves:
        return state
    align = 64  # bytes; keeps every view aligned for any dtype
    offsets, total = [], 0
    for t in leaves:
        offsets.append(total)
        total += (t.numel() * t.element_size() + align - 1) // align * align
    buf = _PINNED.get("buf")
    if buf is None or buf.numel() < total:
        buf = _PINNED["buf"] = torch.empty(total, dtype=torch.uint8, pin_memory=True)
    mapping: dict[int, torch.Tensor] = {}
    for t, off in zip(leaves, offsets):
        n = t.numel() * t.element_size()
        host = buf[off:off + n].view(t.dtype).view(t.shape)
        host.copy_(t, non_blocking=True)
        mapping[id(t)] = host
    torch.cuda.synchronize()

    def rebuild(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: rebuild(v) for k, v in x.items()}
        if isinstance(x, list):
            return [rebuild(v) for v in x]
        if isinstance(x, tuple):
            return tuple(rebuild(v) for v in x)
        return mapping.get(id(x), x) if isinstance(x, torch.Tensor) else x

    return rebuild(state)


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
    msd, osd = get_state_dict(model, optimizer)
    return save_state(root, step, {"model": msd, "optim": osd}, train_state, rank, world_size, tuned)


def save_state(
    root: Path,
    step: int,
    state: dict[str, Any],
    train_state: dict[str, Any],
    rank: int = 0,
    world_size: int = 1,
    tuned: bool = True,
) -> Path:
    """Save any DCP state dict with the tmp → manifest → rename → `latest` protocol.

    A write that fails because the disk filled (ENOSPC, EDQUOT, EIO) raises CheckpointWriteError
    on every rank, naming the path; rank 0 removes what it had written, so neither a ``step-N``
    directory nor a `latest` pointer to one is left behind (a previous checkpoint stays as it was).
    """
    root = Path(root)
    tmp = root / f"step-{step}.tmp"
    if rank == 0:
        root.mkdir(parents=True, exist_ok=True)
        if tmp.exists():
            shutil.rmtree(tmp)  # left by a killed save
        tmp.mkdir()
    barrier()
    mine: dict[str, Any] = {}
    err: BaseException | None = None
    try:
        with _quiet_disk_errors_in_threads(tmp):
            dcp.save(stage_to_cpu(state) if tuned else state, storage_writer=writer(tmp, tuned))
        atomic_write_json(tmp / f"train-rank-{rank}.json", {"rank": rank, "world_size": world_size, "step": step, **train_state})
        mine = manifest.hash_and_sync(manifest.files_of_rank(tmp, rank))  # fsync + sha256, overlapped
        failed = None
    except (Exception, CheckpointException) as exc:  # noqa: BLE001 - every rank must hear of it, or the others wait forever
        failed, err = _failure(exc, tmp, rank), exc
    every = gather_to_all((mine, failed))
    _raise_first([f for _, f in every], root, tmp, step, rank, err if failed and failed[0] != "disk" else None)
    if rank == 0:
        try:
            hashes: dict[str, Any] = {}
            for part, _ in every:
                hashes.update(part)
            atomic_write_json(tmp / manifest.MANIFEST, manifest.build(step, world_size, hashes))
            fsync_dir(tmp)
            publish(root, tmp, step)
            failed = None
        except Exception as exc:  # noqa: BLE001
            failed, err = _failure(exc, tmp, rank), exc
    _raise_first(gather_to_all(failed if rank == 0 else None)[:1], root, tmp, step, rank,
                 err if rank == 0 and failed and failed[0] != "disk" else None)
    return root / (root / LATEST).read_text().strip()  # what rank 0 published


WRITER_JOIN_S = 60.0  # seconds to wait for each of a failed save's writer threads to finish its file


@contextlib.contextmanager
def _quiet_disk_errors_in_threads(tmp: Path) -> Iterator[None]:
    """DCP's writer threads let a disk error escape to threading.excepthook (a traceback on stderr)
    besides handing it to dcp.save; save_state reports it in one line, so the hook stays quiet for it.
    On the way out, the writer threads the save started are waited for (<= WRITER_JOIN_S each): when one
    thread's write fails, dcp.save raises while the others may still hold files open in `tmp`, and a file
    removed while open keeps its blocks, so the next save on a full disk would fail too."""
    from trainready.util.diskspace import disk_failure

    previous = threading.excepthook
    before = set(threading.enumerate())

    def hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is None or disk_failure(args.exc_value, tmp) is None:
            previous(args)

    threading.excepthook = hook
    try:
        yield
    finally:
        for t in set(threading.enumerate()) - before:
            if t is not threading.current_thread() and not t.daemon:
                t.join(WRITER_JOIN_S)
        threading.excepthook = previous


def _failure(exc: BaseException, tmp: Path, rank: int) -> tuple[str, str]:
    """(kind, text): kind "disk" when the disk at `tmp` filled or failed, else "error"."""
    from trainready.util.diskspace import disk_failure

    disk = disk_failure(exc, tmp)
    text = f"{disk} writing {tmp}" if disk else f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return ("disk" if disk else "error", f"rank {rank}: {text}")


def _raise_first(failures: list[Any], root: Path, tmp: Path, step: int, rank: int, own: BaseException | None) -> None:
    """If any rank failed: rank 0 unpublishes on a disk failure; each rank raises (`own`: this rank's
    own non-disk error, re-raised as it was)."""
    from trainready.errors import CheckpointWriteError

    bad = [f for f in failures if f]
    if not bad:
        return
    kind, text = bad[0][0], bad[0][1]
    if kind == "disk" and rank == 0:
        unpublish(root, tmp, step)
    if own is not None:
        raise own
    if kind == "disk":
        raise CheckpointWriteError(f"saving step {step} failed: {text}; nothing was published: no step-{step} "
                                   f"directory and `{LATEST}` unchanged")
    raise CheckpointWriteError(f"saving step {step} failed on {text}")


def unpublish(root: Path, tmp: Path, step: int) -> None:
    """After a failed save: remove ``step-N.tmp`` and any directory of step N that `latest` does not name."""
    pointer = root / LATEST
    live = pointer.read_text().strip() if pointer.is_file() else ""
    shutil.rmtree(tmp, ignore_errors=True)
    for d in list(root.iterdir()) if root.is_dir() else []:
        ours = d.name == f"step-{step}" or d.name.startswith(f"step-{step}.")
        if ours and d.name != live and d.is_dir():
            shutil.rmtree(d, ignore_errors=True)
