"""Run the self-test's cases side by side where that is safe.

Each case is its own fresh process (or two, with its family's control run), so cases that share nothing
can run at once: CPU-bound runs hold one of `lanes` lanes (from the cores: 4 gloo ranks of a case keep
about two cores busy), Slurm runs go up to SLURM_LANES at a time on lanes of their own beside them where the
partition lets that many jobs share a node, else one at a time (slurm_lanes), and timing-sensitive cases
(`Case.exclusive`: a busbw judged against a calibration measured in the same run) run alone after
everything else.  Every command is forked from one zygote (zygote.py).  Results come back in the table's
order.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import os
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from trainready.selftest.cases import Case, share_key
from trainready import __version__
from trainready.errors import Interrupted
from trainready.selftest.prepare import child_env, gpu_count, placeholders, unmount_all
from trainready.selftest.run import SCHEMA, CaseResult, Controls, Shared, run_case
from trainready.selftest.zygote import Zygote

CORES_PER_LANE = 2  # a case's 4 gloo ranks (or a GPU case's host side) keep about two cores busy
MAX_LANES = 6  # GPU cases share one GPU: beyond this the host's CUDA contexts and launches contend
# `cluster run`s at once, at most: the local cluster's partition lets 4 jobs share a node (scripts/local-slurm.sh,
# OverSubscribe=FORCE:4), so three runs over the same 3 nodes proceed side by side; most of their time is a wait
# (a time limit, a rendezvous deadline), not CPU.
SLURM_LANES = 3


def slurm_lanes() -> int:
    """`cluster run`s at once: every case runs on the same 3 nodes, each task asking for its node --exclusive,
    so side by side only where the default partition lets that many such jobs share a node
    (OverSubscribe=FORCE:k, avail.jobs_per_node); elsewhere (a site's partition: NO) one at a time, so no case
    counts on a node another case holds (its tasks would wait on it, and its run's deadline would not)."""
    from trainready.cluster.control import avail
    from trainready.errors import SlurmError

    try:
        return max(1, min(SLURM_LANES, avail.jobs_per_node()))
    except SlurmError:
        return 1  # no Slurm answering: the cluster cases are not applicable here anyway


def lanes_for(cores: int | None = None) -> int:
    """Concurrent non-Slurm cases on this machine: one per CORES_PER_LANE cores, at least 2 (most cases
    spend their first seconds starting an interpreter and waiting on rendezvous, not computing)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(2, min(MAX_LANES, cores // CORES_PER_LANE))


def fleet_units(cases: Sequence[Case]) -> dict[str, list[int]]:
    """The fleet cases (not exclusive) by the run they share (cases.share_key), in table order: one lane each."""
    units: dict[str, list[int]] = {}
    for i, c in enumerate(cases):
        if c.needs == "slurm" and not c.exclusive:
            units.setdefault(share_key(c), []).append(i)
    return units


def run_all(cases: Sequence[Case], values: dict[str, str], gpus: int, work: Path,
            on_case: Callable[[int, Case], None], on_done: Callable[[CaseResult], None],
            lanes: int = 0, zygote: Zygote | None = None) -> list[CaseResult]:
    """Every case's result, in the order of `cases`.  Interrupted (SIGINT/SIGTERM), no case starts any more, the
    commands in flight are killed, and the interrupt goes on once every lane has returned."""
    controls = Controls(work, values, zygote)
    units = fleet_units(cases)
    shared = Shared(work, values, {k: tuple(cases[i] for i in u) for k, u in units.items()}, zygote)
    results: dict[int, CaseResult] = {}
    stop = threading.Event()

    def one(i: int) -> None:
        if stop.is_set():
            return
        on_case(i, cases[i])
        results[i] = run_case(cases[i], values, gpus, work, controls, shared)
        on_done(results[i])

    def unit(members: list[int]) -> None:  # one fleet run's cases, one after another (the first runs it)
        for i in members:
            one(i)

    local = [i for i, c in enumerate(cases) if c.needs != "slurm" and not c.exclusive]
    with concurrent.futures.ThreadPoolExecutor(max_workers=slurm_lanes() if units else 1) as queue, \
            concurrent.futures.ThreadPoolExecutor(max_workers=lanes or lanes_for()) as pool:
        try:
            futures = [queue.submit(unit, u) for u in units.values()] + [pool.submit(one, i) for i in local]
            for f in futures:
                f.result()
            for i, c in enumerate(cases):  # alone: nothing else runs beside them
                if c.exclusive:
                    one(i)
        except BaseException as exc:
            stop.set()
            for ex in (queue, pool):
                ex.shutdown(wait=False, cancel_futures=True)
            if zygote is not None:
                zygote.kill_all()
            if isinstance(exc, Interrupted):
                exc.during = f"selftest ({len(results)} of {len(cases)} case(s) done)"
            raise
    return [results[i] for i in range(len(cases))]


def run_selftest(cases: Sequence[Case], on_case: Callable[[int, Case], None] = lambda i, c: None,
                 on_done: Callable[[CaseResult], None] = lambda r: None, lanes: int = 0) -> dict[str, Any]:
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    gpus = gpu_count()
    # the scratch goes even where a lazily unmounted tmpfs is still busy (interrupted mid case): never an error
    with tempfile.TemporaryDirectory(prefix="trainready-selftest-", ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        values = placeholders(work / "inputs", gpus)
        zygote = Zygote(child_env(work), work)
        try:
            results = run_all(cases, values, gpus, work, on_case, on_done, lanes, zygote)
        except Interrupted as exc:
            exc.notes.append(f"the cases in flight stopped, their mounts undone, scratch {work} removed")
            raise
        finally:
            zygote.close()
            unmount_all()  # before the scratch folder holding the mount points is removed
    bad = [r for r in results if r.outcome in ("missed", "broke")]
    counts = {k: sum(1 for r in results if r.outcome == k) for k in ("detected", "missed", "skipped", "broke")}
    return {"schema": SCHEMA, "host": socket.gethostname(), "started_at": started,
            "duration_s": round(time.perf_counter() - t0, 2), "tool_version": __version__,
            "status": "fail" if bad else "pass", "gpus": gpus, "counts": counts,
            "cases": [r.to_json() for r in results]}
