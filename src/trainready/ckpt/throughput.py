"""Checkpoint throughput on the target directory, judged against the disk itself.

In one run, alternating, on the same directory and byte count N:
  raw write   one file, 64 MiB sequential writes from host memory, fsync (the disk's ceiling)
  dcp plain   `dcp.save` with DCP's default FileSystemWriter (1 thread, per-tensor `.cpu()`)
  dcp tuned   `dcp.save` after pinned staging, WRITE_THREADS writer threads, DCP's fsync (no manifest)
  save        trainready's save: pinned staging (buffer allocated inside the timing: no
              timed save reuses one from an earlier step), WRITE_THREADS writer threads, fsync,
              parallel sha256 manifest, rename, `latest` (the whole crash-safe protocol)
  raw read / load   after evicting the files from the page cache (POSIX_FADV_DONTNEED)
GB/s = N / seconds / 1e9; ratios divide by the raw figure of the same round; medians over rounds.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp

from trainready.ckpt.load import resolve_latest, verify
from trainready.ckpt.save import WRITE_THREADS, release_staging, save_state, stage_to_cpu
from trainready.records import Metric, Outcome, Status, Threshold

TARGET = 0.85  # save ÷ raw write+fsync: within 15% of what the disk itself sustains (trainready's target)
BLOCK = 64 << 20  # raw writes/reads of 64 MiB


def synthetic_state(nbytes: int, device: torch.device) -> dict[str, Any]:
    """~nbytes of fp32 tensors shaped like a model + AdamW: 48 large tensors + 200 small (4 KiB) ones."""
    small = {f"norm{i}": torch.randn(1024, device=device) for i in range(200)}
    per = max(1, (nbytes - 200 * 4096) // 48 // 4)
    big = {f"w{i}": torch.randn(per, device=device) for i in range(48)}
    return {"model": {**big, **small}}


def state_bytes(state: Any) -> int:
    if isinstance(state, dict):
        return sum(state_bytes(v) for v in state.values())
    return state.numel() * state.element_size() if isinstance(state, torch.Tensor) else 0


def evict(path: Path) -> None:
    """Drop a file's (clean) pages from the page cache so the next read hits the disk."""
    for p in ([path] if path.is_file() else [q for q in path.rglob("*") if q.is_file()]):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def raw_write(path: Path, nbytes: int, block: bytearray) -> float:
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        left = nbytes
        while left:
            left -= os.write(fd, memoryview(block)[: min(len(block), left)])
        os.fsync(fd)
    finally:
        os.close(fd)
    dfd = os.open(path.parent, os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)
    return time.perf_counter() - t0


def raw_read(path: Path) -> float:
    evict(path)
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as fh:
        buf = bytearray(BLOCK)
        while fh.readinto(buf):
            pass
    return time.perf_counter() - t0


def measure(directory: Path, nbytes: int = 256 << 20, rounds: int = 3, device: str = "auto") -> dict[str, Any]:
    dev = torch.device("cuda" if device == "auto" and torch.cuda.is_available() else ("cpu" if device == "auto" else device))
    from trainready.util.diskspace import require_free

    # Two saves of the state coexist (save and save_steady) plus manifests: 2 x nbytes + 64 MiB.
    require_free(directory, 2 * nbytes + (64 << 20), "two checkpoint saves of the throughput state + 64 MiB")
    directory.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ckpt-throughput-", dir=directory))
    state = synthetic_state(nbytes, dev)
    n = state_bytes(state)
    block = bytearray(os.urandom(min(BLOCK, n)))
    times: dict[str, list[float]] = {
        k: [] for k in ("raw_write", "dcp_plain", "dcp_tuned", "save", "save_steady", "raw_read", "load")}
    warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
    try:
        for i in range(rounds):
            _raw_and_dcp_round(work, i, state, dev, block, n, times)
            _save_and_load_round(work, i, state, dev, times)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    gbps = {k: n / statistics.median(v) / 1e9 for k, v in times.items()}
    ratio = {
        "save/raw_write": gbps["save"] / gbps["raw_write"],
        "save_steady/raw_write": gbps["save_steady"] / gbps["raw_write"],
        "dcp_plain/raw_write": gbps["dcp_plain"] / gbps["raw_write"],
        "dcp_tuned/raw_write": gbps["dcp_tuned"] / gbps["raw_write"],
        "load/raw_read": gbps["load"] / gbps["raw_read"],
        "load/raw_write": gbps["load"] / gbps["raw_write"],
    }
    per_round = {k: [round(t, 4) for t in v] for k, v in times.items()}
    return {"bytes": n, "device": str(dev), "rounds": rounds, "write_threads": WRITE_THREADS,
            "gbps": gbps, "ratio": ratio, "seconds": per_round, "dir": str(directory)}


def _raw_and_dcp_round(work: Path, i: int, state: dict[str, Any], dev: torch.device, block: bytearray, n: int,
                       times: dict[str, list[float]]) -> None:
    """Round i of the references: raw write+fsync and raw read of n bytes, plain and tuned `dcp.save`."""
    times["raw_write"].append(raw_write(work / "raw.bin", n, block))
    times["raw_read"].append(raw_read(work / "raw.bin"))
    (work / "raw.bin").unlink()
    plain = work / f"plain-{i}"
    t0 = time.perf_counter()
    dcp.save(state, storage_writer=dcp.FileSystemWriter(str(plain)))
    if dev.type == "cuda":
        torch.cuda.synchronize()
    times["dcp_plain"].append(time.perf_counter() - t0)
    shutil.rmtree(plain)
    release_staging()  # every timed save allocates its pinned buffer, as a job's first save does
    t0 = time.perf_counter()  # the tuned writer alone: what the sha256 manifest + rename add is save - this
    dcp.save(stage_to_cpu(state), storage_writer=dcp.FileSystemWriter(
        str(plain), single_file_per_rank=True, sync_files=True, thread_count=WRITE_THREADS))
    times["dcp_tuned"].append(time.perf_counter() - t0)
    shutil.rmtree(plain)


def _save_and_load_round(work: Path, i: int, state: dict[str, Any], dev: torch.device,
                         times: dict[str, list[float]]) -> None:
    """Round i of trainready's own save (first and steady state) and of the load from a cold page cache."""
    release_staging()  # not the buffer the dcp_tuned step allocated
    t0 = time.perf_counter()
    save_state(work / "ckpt", i, state, {})
    times["save"].append(time.perf_counter() - t0)
    # Steady state: a training job's later checkpoints reuse the staging buffer its
    # first one allocated (checkpoint every N steps); both figures are reported.
    t0 = time.perf_counter()
    save_state(work / "ckpt", 1000 + i, state, {})
    times["save_steady"].append(time.perf_counter() - t0)
    target = resolve_latest(work / "ckpt")
    evict(target)
    into = {"model": {k: torch.empty_like(v) for k, v in state["model"].items()}}
    t0 = time.perf_counter()
    verify(target)
    dcp.load(into, checkpoint_id=str(target))
    if dev.type == "cuda":
        torch.cuda.synchronize()
    times["load"].append(time.perf_counter() - t0)
    if i == 0 and not all(torch.equal(into["model"][k], v) for k, v in state["model"].items()):
        raise RuntimeError("throughput: loaded tensors differ from the saved ones")
    shutil.rmtree(work / "ckpt")


def judge(res: dict[str, Any], directory: Path) -> Outcome:
    """PASS iff save >= TARGET x raw write+fsync; the message shows the threshold it was judged by
    and says which ratios are shown but not judged (load vs raw read)."""
    g, r = res["gbps"], res["ratio"]
    thr = Threshold(">=", TARGET, "1", f"trainready's target: save >= {TARGET} x raw write+fsync of the same bytes")
    metrics = [Metric.of("ckpt_gbps", v, "GB/s", None, op=k, device=res["device"]) for k, v in g.items()]
    metrics += [Metric.of("ckpt_ratio", v, "1", thr if k == "save/raw_write" else None, ratio=k) for k, v in r.items()]
    ok = r["save/raw_write"] >= TARGET
    msg = (f"save {g['save']:.2f} GB/s = {r['save/raw_write']:.2f} x raw write+fsync {g['raw_write']:.2f} GB/s, "
           f"judged against >= {TARGET} x ({'met' if ok else 'NOT met'}; first save, staging allocated; "
           f"{r['save_steady/raw_write']:.2f} x when reused; plain dcp.save {r['dcp_plain/raw_write']:.2f} x); "
           f"load {g['load']:.2f} GB/s = {r['load/raw_read']:.2f} x raw read (shown, not judged); "
           f"{res['bytes'] / 1e9:.2f} GB on {res['device']}, {directory}")
    status = Status.PASS if ok else Status.WARN
    return Outcome(status, msg, tuple(metrics), details={**res, "threshold": {"save/raw_write": f">= {TARGET}"}},
                   remedy="" if ok else "Saving is slower than the disk allows; see docs/resume.md (throughput).")
