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

from trainready.ranks.launch import LaunchResult, launch
from trainready.data.identity import DataIdentity
from trainready.resume.compare import Tolerance
from trainready.resume.job import RankJob
from trainready.resume.sizing import ModelChoice
from trainready.resume.verdict import judge
from trainready.records import Outcome, Status
from trainready.workload.loop import CUBLAS_WORKSPACE, TrainConfig
from trainready.util.atomic import atomic_write_json, atomic_write_text

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
    t_all = time.perf_counter()
    done = _run_all(pc, job, out / GO_FILE, say)
    walls = {d.role: d.wall_s for d in done.values()}
    for role in ("A", "B", "C"):  # the first run that failed is the finding
        failed = _failed(pc, done[role], _plan(pc), {"declared": declared, "run_dir": str(run_dir)}) \
            if role in done else None
        if failed is not None:
            return failed
    walls["total"] = time.perf_counter() - t_all
    out = judge({role: d.result.values for role, d in done.items()}, declared, walls, pc, str(run_dir))
    return dataclasses.replace(out, details={**(out.details or {}), "phases_s": phases(done)})


def phases(done: dict[str, RunDone]) -> dict[str, dict[str, float]]:
    """Where each run's seconds went: its launch's phases (LaunchResult.timing_s: ranks running, results in,
    processes ended) and rank 0's own (building the trainer and data, the steps, the save or the load)."""
    out: dict[str, dict[str, float]] = {}
    for role, d in done.items():
        mine = d.result.values[0] if d.result.values and isinstance(d.result.values[0], dict) else {}
        out[role] = {**d.result.timing_s, **{k: round(float(mine[k]), 3) for k in ("build_s", "steps_s", "save_s",
                                                                                   "load_s", "wait_b_s", "wait_a_s",
                                                                                   "compare_s") if k in mine}}
    return out


GO_FILE = "go-C"  # written by the parent once B ended ("run": load and go on, or "stop"); "go-C-A" once A ended


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


def _run(pc: ProtocolConfig, job: RankJob, role: str, timeout_s: float | None = None) -> RunDone:
    """Run `role` on its own fresh set of ranks."""
    env = {"CUBLAS_WORKSPACE_CONFIG": CUBLAS_WORKSPACE} if pc.train.deterministic else {}
    t0 = time.perf_counter()
    res = launch("trainready.resume.worker:resume_rank", pc.world_size, pc.backend,
                 {"job": dataclasses.replace(job, role=role)}, timeout_s=timeout_s or pc.timeout_s, env=env,
                 # One intra-op thread per CPU rank: OpenMP's spinning barriers make 2+
                 # threads ~10x slower on a shared, oversubscribed CPU (measured on a 2-core x86 VM).
                 threads_per_rank=1 if pc.backend == "gloo" else None)
    return RunDone(role, res, time.perf_counter() - t0)


def _ran(done: RunDone) -> bool:
    return done.result.ok and not any(v.get("save_error") for v in done.result.values)


def _run_all(pc: ProtocolConfig, job: RankJob, go: Path, say: Callable[[str], None]) -> dict[str, RunDone]:
    """A and B, and C's processes started alongside them: C builds its model, then waits for `go` (written
    here once B saved, after any planted corruption) before it loads B's checkpoint and trains on, and for
    `go`-A (A ended) before it compares anything with A's files.  C's process start-up (interpreter, CUDA
    context, process group) and its own steps thus overlap A and B instead of following them; C is still a
    fresh set of processes that never held A's or B's state in memory.  C is left out when A or B failed."""
    job, go_a = dataclasses.replace(job, go=go), go.with_name(go.name + "-A")
    done: dict[str, RunDone] = {}
    ok = {"A": False, "B": False}
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        # C waits for A and B: its limit covers theirs (each up to pc.timeout_s) plus its own run.
        c_run = pool.submit(_run, pc, job, "C", 3 * pc.timeout_s)
        try:
            a_run = _runs_a_b(pc, job, pool, say, done)
            ok["B"] = "B" in done and _ran(done["B"])
            if ok["B"] and "flip_byte" in pc.plants:
                from trainready.ckpt.load import resolve_latest  # torch.distributed.checkpoint: ~3 s to import

                victim = flip_byte(resolve_latest(job.ckpt_dir))
                say(f"planted: flipped a byte of {victim.name}")
            if ok["B"]:
                say(_plan(pc)["C"])
            atomic_write_text(go, "run" if ok["B"] else "stop")  # C loads B's checkpoint and trains on
            done["A"] = a_run.result()
            ok["A"] = _ran(done["A"])
            atomic_write_text(go_a, "run" if ok["A"] and ok["B"] else "stop")  # C compares with A's files
        finally:  # C never waits on a parent that broke off; a run torn down on an interrupt (its scratch
            for path in (go, go_a):  # folder already removed) is not given its folder back
                if not path.exists() and path.parent.is_dir():
                    atomic_write_text(path, "stop")
        done["C"] = c_run.result()
    if not (ok["A"] and ok["B"]):
        done.pop("C")  # stopped early: A's or B's failure is the finding
    return done


def _runs_a_b(pc: ProtocolConfig, job: RankJob, pool: concurrent.futures.ThreadPoolExecutor,
              say: Callable[[str], None], done: dict[str, RunDone]) -> concurrent.futures.Future[RunDone]:
    """A and B: side by side on GPUs (latency-bound, small model; two separate process groups), one after
    the other on CPU ranks (they would only share cores) and under the full-disk plant (the filesystem it
    fills before B's save is the one A writes its evidence to), B left out when A failed.  Returns once B
    ended (done["B"]), with A's run as a future."""
    plan = _plan(pc)
    if pc.backend == "nccl" and "fill_disk" not in pc.plants:
        say(f"{plan['A']}  ||  {plan['B']}")
        a_run = pool.submit(_run, pc, job, "A")
        done["B"] = _run(pc, job, "B")
        return a_run
    say(plan["A"])
    a_done: concurrent.futures.Future[RunDone] = concurrent.futures.Future()
    a_done.set_result(_run(pc, job, "A"))
    if a_done.result().result.ok:
        say(plan["B"])
        done["B"] = _run(pc, job, "B")
    return a_done


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
