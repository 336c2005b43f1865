"""`cluster resume`'s re-validation in a run of its own that `cluster attach` picks up.

The nodes trainready drained are reserved (MAINT), returned to service inside the reservation, accepted again
(fleet.run_fleet, kind "resume", judged against the run that rejected them), then each is resumed (passed),
drained again (failed) or drained as before (not tested), and the reservation is deleted.  The run's state
(runstate.py) has, beside a `cluster run`'s, its `revalidate` block: the nodes, their drain reasons before, the
--results folders the baseline is looked for in, the reservation, and whether the verdict was acted on.  So a
collector that went away (SIGKILL, a lost login shell, a controller silent past --controller-wait) leaves no node
in service without a verdict for longer than the reservation lasts: `cluster attach` finishes the work.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any, Iterator, Sequence

from trainready.cluster import history, runstate, steps

from trainready.cluster.repair import ledger
from trainready.cluster.control import outage, slurm
from trainready.cluster.fleet import attach_command, run_fleet, settle
from trainready.cluster.judge.verdict import FleetVerdict
from trainready.cluster.options import FleetOptions, time_seconds
from trainready.errors import ControllerDown, SlurmError


def resume_fleet(opts: FleetOptions, nodes: list[str] | None, say: steps.Progress,
                 runs_in: tuple[Path, ...] = ()) -> tuple[FleetVerdict | None, ledger.ResumePlan]:
    """Re-validate the nodes trainready drained; resume those that pass, drain again those that fail.  They are
    judged against the run that rejected them, looked for under `runs_in` (default: --results)."""
    plan = ledger.plan_resume(nodes, opts.partition)
    for node, why in plan.left:
        say(f"{node}: {why}")
    if not plan.revalidate:
        return None, plan
    roots = runs_in or (opts.results,)
    base = history.baseline(roots, plan.revalidate)
    before = slurm.nodes(list(plan.revalidate))
    here = open_run(opts, plan.revalidate, {n: i.reason for n, i in before.items()}, roots, say)
    resv = ledger.reserve(plan.revalidate, max(10, time_seconds(opts.time_limit) // 60 * 2 + 10))
    rv = runstate.save(here, revalidate={**runstate.read(here)["revalidate"], "reservation": resv})["revalidate"]
    with guarded(here, rv, say):
        for node in plan.revalidate:
            slurm.undrain(node)
            ledger.append(opts.results, {"action": "revalidate", "node": node,
                                         "why": [before[node].reason] if node in before else [], "reservation": resv})
        settle(plan.revalidate, say)
        sub = dataclasses.replace(opts, nodelist=",".join(plan.revalidate), count=None, reservation=resv, drain=False)
        runstate.save(here, options=runstate.options_doc(sub), selection=runstate.selection_doc(steps.select_nodes(sub)))
        verdict = run_fleet(sub, say, "resume", base, attach=here)
        conclude(opts.results, here, verdict, rv, say)
    return verdict, plan


def open_run(opts: FleetOptions, nodes: Sequence[str], reasons: dict[str, str], roots: Sequence[Path],
             say: steps.Progress) -> Path:
    """The resume's run folder and state, written before any node is touched."""
    here = history.new_run_dir(opts.results, "resume")
    runstate.claim(here)
    runstate.save(here, kind="resume", started=history.now(), options=runstate.options_doc(opts),
                  revalidate={"nodes": list(nodes), "before": reasons, "roots": [str(r) for r in roots],
                              "results": str(opts.results)})
    p = outage.current()
    if p is not None:
        p.pickup = attach_command(here)
    say(f"run {here.name} (if this command stops, `{attach_command(here)}` judges its nodes and releases them)")
    return here


@contextlib.contextmanager
def guarded(run_dir: Path, rv: dict[str, Any], say: steps.Progress) -> Iterator[None]:
    """Around the re-validation: a stop other than a silent controller drains every node back to its reason
    before and deletes the reservation (never a node in service without a verdict); a silent controller past
    --controller-wait: one try at the same, without waiting (`cluster attach` finishes it either way).  On
    success the reservation is deleted."""
    try:
        yield
    except ControllerDown:
        with outage.patient(outage.Patience(0.0, lambda s: None)):
            try:
                drain_back(rv, say)
                release(rv.get("reservation"))
            except SlurmError:
                say(f"{', '.join(rv['nodes'])}: not drained back (the controller is silent); they stay in "
                    f"reservation {rv.get('reservation')} until `{attach_command(run_dir)}`")
        raise
    except BaseException:
        drain_back(rv, say)
        release(rv.get("reservation"))
        raise
    release(rv.get("reservation"))


def drain_back(rv: dict[str, Any], say: steps.Progress) -> None:
    """Every node of the re-validation drained again with its reason before (never left in service unjudged)."""
    for node in rv["nodes"]:
        slurm.drain(node, rv["before"].get(node) or f"{slurm.PREFIX} re-validation interrupted")
    say(f"{', '.join(rv['nodes'])}: drained as before (re-validation interrupted)")


def release(resv: str | None) -> None:
    """The reservation deleted; one already gone (deleted, or past its end) is no error."""
    if not resv:
        return
    try:
        ledger.unreserve(resv)
    except ControllerDown:
        raise
    except SlurmError:
        if resv in slurm.call(["scontrol", "show", "reservation", resv], timeout=30.0):
            raise


def conclude(results: Path, run_dir: Path, verdict: FleetVerdict, rv: dict[str, Any], say: steps.Progress) -> None:
    """The verdict acted on, once per run: passed nodes resumed (left in service), failed ones drained again,
    untested ones drained with their reason before."""
    if runstate.read(run_dir).get("concluded"):
        return
    for nv in verdict.nodes:
        if nv.accepted:
            ledger.append(results, {"action": "resume", "node": nv.node, "why": ["passed acceptance again"],
                                    "record": nv.record, "planted": dict(verdict.planted)})
            say(f"{nv.node}: passed acceptance again; back in service")
    ledger.drain_rejected(results, verdict, say)
    for nv in verdict.nodes:  # untested again: back to the drain it had, never left in service unjudged
        if nv.not_tested:
            failed = ledger.drain_one(nv.node, rv["before"].get(nv.node) or f"{slurm.PREFIX} not re-validated")
            ledger.append(results, {"action": "drain-failed" if failed else "drain", "node": nv.node,
                                    "why": [f"not tested: {nv.not_tested}"], **({"error": failed} if failed else {})})
            say(f"{nv.node}: not tested again ({nv.not_tested}); " + (f"NOT drained: {failed}" if failed else
                                                                       "drained as before"))
    runstate.save(run_dir, concluded=True)


def attach_resume(run_dir: Path, st: dict[str, Any], say: steps.Progress) -> FleetVerdict | None:
    """A resume whose collector went away, picked up: its tasks waited for, its nodes judged against its baseline
    and acted on as `cluster resume` would, the reservation deleted.  Stopped before its array was submitted: its
    nodes drained as before (None: no verdict)."""
    rv = st["revalidate"]
    if "selection" not in st:
        say(f"run {run_dir.name} stopped before its nodes were accepted again")
        drain_back(rv, say)
        release(rv.get("reservation"))
        runstate.save(run_dir, exit_code=1, finished=history.now())
        return None
    opts = runstate.options_from(st["options"])
    base = history.baseline([Path(r) for r in rv["roots"]], rv["nodes"])
    with guarded(run_dir, rv, say):
        verdict = run_fleet(opts, say, "resume", base, attach=run_dir)
        conclude(Path(rv["results"]), run_dir, verdict, rv, say)
    return verdict
