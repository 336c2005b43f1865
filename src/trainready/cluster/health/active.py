"""`trainready node --health-check --active`: the seconds-long compute checks, NHC-style (the default
`--health-check` is passive: cluster/health/passive.py; both drain through `drain_self` here).

Slurm runs the program on every node each HealthCheckInterval seconds and kills it after 60 s (before
Slurm 26.05, slurm.conf(5)); this mode runs only seconds-long checks, each bounded by CHECK_TIMEOUT_S, and
on a failure drains its own node (`scontrol update nodename=$SLURMD_NODENAME state=drain reason="trainready:
health check: ..."`), never over an administrator's drain.  A healthy node is left as it is (resuming is
`trainready cluster resume`'s job, after full acceptance).  Exit 0 healthy, 1 unhealthy (3: planted).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable, Mapping, Sequence

CHECKS = ("gpus", "versions", "matmul")  # seconds each: devices visible, version chain, known-answer matmul
CHECK_TIMEOUT_S = 15.0  # per check; the three together stay well inside Slurm's 60 s kill


def run_health(spec_arg: str | None, plants: Mapping[str, str], say: Callable[[str], None]) -> int:
    import shutil

    from trainready.checks import CheckContext, only
    from trainready.cluster.tasks.layout import node_name
    from trainready.spec import load_spec
    from trainready.suite.runner import run_checks

    spec, source = load_spec(spec_arg or "auto")  # no --spec: the GPUs NVML sees (spec/auto.py)
    # torch's import is the program's start-up, not a check's work: 2-3 s on an idle 2-core x86 VM, past 15 s
    # there while 60 other processes shared the cores, which timed out the first check that imports it (gpus)
    import torch  # noqa: F401
    work = Path(tempfile.mkdtemp(prefix="trainready-health-"))
    try:
        ctx = CheckContext(spec, work, dict(plants), timeouts={c: CHECK_TIMEOUT_S for c in CHECKS})
        report = run_checks("node", only(CHECKS), ctx, context={"spec_source": source})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    node = node_name()
    bad = [r for r in report.results if r.status.value in ("fail", "error")]
    if not bad:
        say(f"trainready health check: {node}: OK ({', '.join(r.name for r in report.results)}; "
            f"{report.duration_s:.1f} s)")
        return 0
    from trainready.cluster.repair.reasons import CHECK_CLASS, SOFTWARE

    klass = CHECK_CLASS.get(bad[0].name, SOFTWARE)  # the first failing check's class, as its reason comes first
    return drain_self(node, [f"{r.name}: {r.message}" for r in bad], "health", plants, say, klass)


def drain_self(node: str, why: Sequence[str], kind: str, plants: Mapping[str, str], say: Callable[[str], None],
               klass: str = "hardware") -> int:
    """Say FAIL and drain `node` with a classed, dated reason ('trainready:health/hw YYYY-MM-DD: ...':
    cluster/repair/reasons.py), never over an administrator's drain.  The exit code: 1, or 3 for a planted run."""
    from trainready.cluster.repair import ledger
    from trainready.cluster.control import slurm
    from trainready.errors import SlurmError
    from trainready.records import PLANTED_EXIT

    say(f"trainready health check: {node}: FAIL: {'; '.join(why)}")
    try:
        info = slurm.nodes([node]).get(node)
        if info is not None and info.drained and not info.ours:
            say(f"{node}: already drained by an administrator ({info.reason or 'no reason'}); left alone")
        else:
            reason = ledger.dated_reason(kind, why, klass=klass)
            slurm.drain(node, reason)
            say(f"{node}: drained")
            evidence(node, reason, why, klass, plants, say)
    except SlurmError as exc:
        say(f"{node}: could not drain: {exc}")
    return PLANTED_EXIT if plants else 1  # records.PLANTED_EXIT


RESULTS_ENV = "TRAINREADY_RESULTS"  # a --results folder the node mounts: the health check's drains go there too


def evidence(node: str, reason: str, why: Sequence[str], klass: str, plants: Mapping[str, str],
             say: Callable[[str], None]) -> None:
    """With $TRAINREADY_RESULTS set: the drain in its ledger and RESULTS/rma/NODE/, written on the node itself (its
    kernel log's XIDs read; the vendor's tools, minutes long, are left to `bundle --rma`: Slurm kills the health
    check at 60 s)."""
    import os

    from trainready.cluster.repair import ledger

    from trainready.cluster.repair import rma

    results = os.environ.get(RESULTS_ENV)
    if not results or not Path(results).is_dir():
        return
    try:
        ledger.append(Path(results), {"action": "drain", "node": node, "why": list(why), "by": "health",
                                      "slurm_reason": reason, "planted": dict(plants),
                                      **ledger.whole("health", klass, why)})
    except OSError as exc:
        say(f"{node}: not in {results}'s ledger: {exc.strerror}")
    rma.after_drain(Path(results), node, None, say, here=True)
