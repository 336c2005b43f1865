"""The parent side of the resume protocol: declare the tolerance, run A, B and a
fresh C (each a new set of processes via `launch`), plant faults, judge.

Verdict order: a rank failure → FAIL naming the rank; a rejected checkpoint →
FAIL with the checksum finding; A and B disagree before step K → FAIL
(the training itself is nondeterministic, not the resume); a component of C
that already matched A before loading → ERROR (the test could pass by accident);
else PASS iff every component of C matches A within the declared tolerance.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime as dt
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from trainready.ckpt.load import resolve_latest
from trainready.ranks.launch import LaunchResult, launch
from trainready.data.identity import DataIdentity
from trainready.resume.compare import Tolerance
from trainready.resume.job import RankJob
from trainready.resume.sizing import ModelChoice
from trainready.resume.verdict import judge
from trainready.records import Outcome, Status
from trainready.train.loop import CUBLAS_WORKSPACE, TrainConfig
from trainready.util.atomic import atomic_write_json

PLANTS = ("skip_rng", "skip_rng_python", "skip_rng_numpy", "skip_data", "skip_lr", "flip_byte", "fill_disk")


@dataclass(frozen=True)
class ProtocolConfig:
    train: TrainConfig
    checkpoint_step: int
    data: str  # token file / Megatron prefix (already validated by the caller)
    dtype: str | None
    root: Path  # where this run's checkpoints and evidence go
    world_size: int = 1
    backend: str = "gloo"
    tolerance: Tolerance = field(default_factory=Tolerance)
    plants: tuple[str, ...] = ()
    timeout_s: float = 300.0  # per run (A, B, C)
    model: ModelChoice | None = None  # the model trained and why its vocabulary is what it is
    identity: DataIdentity | None = None  # which data: absolute paths, bytes, tokens, dtype, digests


def flip_byte(directory: Path) -> Path:
    """Planted fault: flip one byte in the middle of the largest data file."""
    victim = max((p for p in directory.iterdir() if p.name.endswith(".distcp")), key=lambda p: p.stat().st_size)
    with open(victim, "r+b") as fh:
        fh.seek(victim.stat().st_size // 2)
        b = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([b[0] ^ 0xFF]))
    return victim


@dataclass(frozen=True)
class RunDone:
    """One of the runs A, B, C: what its ranks returned and how long it took."""

    role: str
    result: LaunchResult
    wall_s: float


def run_protocol(pc: ProtocolConfig, progress: Callable[[str], None] | None = None) -> Outcome:
    say = progress or (lambda _msg: None)
    for p in pc.plants:
        if p not in PLANTS:
            raise ValueError(f"unknown resume plant {p!r} (known: {', '.join(PLANTS)})")
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    run_dir = Path(pc.root) / f"resume-{stamp}-{os.getpid()}-{time.monotonic_ns() % 10**6}"
    out, ckpt = run_dir / "evidence", run_dir / "ckpt"
    out.mkdir(parents=True)
    declared = _declare(pc, out)
    job = RankJob(role="A", train=pc.train, data=pc.data, dtype=pc.dtype, ckpt_dir=ckpt, out_dir=out,
                  checkpoint_step=pc.checkpoint_step, tolerance=pc.tolerance, plants=tuple(pc.plants))
    runs: dict[str, Any] = {}
    walls: dict[str, float] = {}
    t_all = time.perf_counter()
    plan = _plan(pc)
    for stage in (_runs_a_b(pc, job, plan, say), None):
        if stage is None:
            say(plan["C"])
            stage = [_run(pc, job, "C")]
        for done in stage:
            walls[done.role] = done.wall_s
            failed = _failed(pc, done, plan, {"declared": declared, "run_dir": str(run_dir)})
            if failed is not None:
                return failed
            runs[done.role] = done.result.values
            if done.role == "B" and "flip_byte" in pc.plants:
                victim = flip_byte(resolve_latest(ckpt))
                say(f"planted: flipped a byte of {victim.name}")
    walls["total"] = time.perf_counter() - t_all
    return judge(runs, declared, walls, pc, str(run_dir))


def _declare(pc: ProtocolConfig, out: Path) -> dict[str, Any]:
    """What the runs will be judged by, written to OUT/declared.json before any run starts."""
    declared = {
        "tolerance": {"atol": pc.tolerance.atol, "rtol": pc.tolerance.rtol, "mode": pc.tolerance.describe()},
        "train": pc.train.to_json(),
        "checkpoint_step": pc.checkpoint_step,
        "world_size": pc.world_size,
        "backend": pc.backend,
        "data": pc.identity.to_json() if pc.identity else {"path": pc.data},
        "model": pc.model.to_json() if pc.model else None,
        "declared_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    atomic_write_json(out / "declared.json", declared)
    return declared


def _plan(pc: ProtocolConfig) -> dict[str, str]:
    n, k = pc.train.steps, pc.checkpoint_step
    return {"A": f"A: 0→{n} uninterrupted", "B": f"B: 0→{k}, save", "C": f"C: fresh, load {k}, {k}→{n}"}


def _run(pc: ProtocolConfig, job: RankJob, role: str) -> RunDone:
    """Run `role` on its own fresh set of ranks."""
    env = {"CUBLAS_WORKSPACE_CONFIG": CUBLAS_WORKSPACE} if pc.train.deterministic else {}
    t0 = time.perf_counter()
    res = launch("trainready.resume.worker:resume_rank", pc.world_size, pc.backend,
                 {"job": dataclasses.replace(job, role=role)}, timeout_s=pc.timeout_s, env=env,
                 # One intra-op thread per CPU rank: OpenMP's spinning barriers make 2+
                 # threads ~10x slower on a shared, oversubscribed CPU (measured here).
                 threads_per_rank=1 if pc.backend == "gloo" else None)
    return RunDone(role, res, time.perf_counter() - t0)


def _runs_a_b(pc: ProtocolConfig, job: RankJob, plan: dict[str, str], say: Callable[[str], None]) -> list[RunDone]:
    """A and B are independent: on GPUs (latency-bound, small model) they run side by side as two separate
    process groups; on CPU ranks they would only share cores, so B starts after A (and not if A failed).
    C always starts after both, as a fresh set of processes."""
    if pc.backend == "nccl":
        say(f"{plan['A']}  ||  {plan['B']}")
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            return list(pool.map(lambda role: _run(pc, job, role), ("A", "B")))
    first: list[RunDone] = []
    for role in ("A", "B"):
        say(plan[role])
        first.append(_run(pc, job, role))
        if not first[-1].result.ok:
            break
    return first


def _failed(pc: ProtocolConfig, done: RunDone, plan: dict[str, str], details: dict[str, Any]) -> Outcome | None:
    """FAIL naming the run when its ranks failed or B could not save its checkpoint; else None."""
    res = done.result
    if not res.ok:
        return Outcome(
            Status.FAIL,
            f"run {done.role} ({plan[done.role]}) failed on {pc.world_size} {pc.backend} rank(s): {res.describe()}",
            remedy="The named rank's error is above; rerun `trainready resume` with TRAINREADY_DEBUG=1.",
            details=details,
        )
    saved = next((v["save_error"] for v in res.values if v.get("save_error")), None)
    if saved:
        return Outcome(Status.FAIL, f"run B could not save its checkpoint at step {pc.checkpoint_step}: {saved}",
                       remedy="The filesystem of --dir filled or failed during the save; free space there "
                       "(or give another --dir) and run again.", details=details)
    return None


def config_for(train: TrainConfig, **changes: Any) -> TrainConfig:
    return dataclasses.replace(train, **changes)
