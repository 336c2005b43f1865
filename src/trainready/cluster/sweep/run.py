"""One sweep: lock, pick idle nodes, run their acceptance at low priority, judge with strikes, drain within bounds.

The acceptance is `cluster run`'s (fleet.run_fleet) on the nodes picked, without the cross-node step, in the
partition (`--partition`) and QOS (`--qos`, through sbatch's SBATCH_QOS) the operator gives for the low tier: a
real job that needs the node preempts the sweep's task by Slurm's own preemption (slurm.conf(5) PreemptType
preempt/partition_prio or preempt/qos, PreemptMode CANCEL or REQUEUE; the tasks are submitted with
SBATCH_NO_REQUEUE, so REQUEUE ends them too).  A task preempted or cancelled is `unknown: preempted by job N
after S s`, never a failure.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from trainready.cluster.control import slurm
from trainready.cluster.judge.verdict import FleetVerdict
from trainready.cluster.options import FleetOptions
from trainready.cluster.sweep import judge, select, state, trend

RECORD = "trainready.sweep/1"
DAY_S = 86400.0
# Seconds a sweep waits for its own jobs to leave Slurm (epilog, COMPLETING): slurmd's epilog and the job's end
# take under a second on a quiet node; a loaded 2-core host was seen at several seconds.
SETTLE_S = 60.0


@dataclass(frozen=True)
class SweepOptions:
    qos: str | None = None  # --qos: the low tier's QOS
    max_nodes: int | None = None  # --max-nodes: at most this many under test at once
    max_fraction: float | None = None  # --max-fraction: at most this fraction of the partition
    skip_passed_s: float | None = None  # --skip-passed-within: leave out nodes that passed this recently
    strikes: int = 2  # --strikes: consecutive failing sweeps before a drain
    window_s: float = DAY_S  # the window --max-drain counts drains in
    json_path: str | None = None  # --json: the sweep's record here too
    prometheus: str | None = None  # --prometheus: the fleet's health for node_exporter's textfile collector


def sweep(fleet: FleetOptions, opts: SweepOptions, say: Callable[[str], None]) -> int:
    """The exit code: 0 nothing failed (unknown allowed), 1 a node failed, 3 planted; a second sweep on the same
    RESULTS while one runs says so and exits 0."""
    try:
        held = state.lock(fleet.results)
    except state.Busy as busy:
        say(f"a sweep is already running on {fleet.results} ({busy}): this one exits")
        return 0
    with held:
        return _sweep(fleet, opts, say)


def _sweep(fleet: FleetOptions, opts: SweepOptions, say: Callable[[str], None]) -> int:
    t = state.now()
    doc = state.load(fleet.results)
    info = slurm.nodes(slurm.hostnames(fleet.nodelist) if fleet.nodelist else None, fleet.partition)
    p = select.pick(info, doc, select.cap(len(info), opts.max_nodes, opts.max_fraction), opts.skip_passed_s, t)
    for n, why in p.left.items():
        say(f"{n}: not swept: {why}")
    outs: list[judge.Outcome] = []
    verdict = None
    if p.nodes:
        verdict = accept(fleet, opts, list(p.nodes), say)
        stopped = stopped_tasks(verdict)
        fs = spec_of(fleet).fleet
        outs = [judge.strike(doc, judge.outcome(nv, stopped, judge.not_judged(read_record(nv.record))), opts.strikes,
                             t, fs.unjudged_sweeps) for nv in verdict.nodes if nv.node in p.nodes]
        outs = trends(fleet, verdict, outs, t, opts.strikes)
        state.save(fleet.results, doc)  # the strikes kept before any drain: a drain that fails loses none
        outs, named = judge.by_switch(outs, verdict.nodes, fs.switch_fraction, fs.switch_causes, fleet.topology)
        for ln in named:
            say(ln)
        outs = act(fleet, doc, outs, len(info), opts, t, say)
    else:
        say("no idle node to sweep now")
    state.save(fleet.results, doc)
    write_record(fleet, opts, p, outs, verdict, t)
    if opts.prometheus:
        from trainready.cluster.sweep import monitor

        monitor.write(opts.prometheus, fleet.results, doc, slurm.nodes(list(info)) if info else {},
                      spec_of(fleet).fleet.unjudged_sweeps, spec_of(fleet).fleet.coverage_days)
    for o in outs:
        say(line(o, opts.strikes))
    planted = bool(verdict and verdict.planted)
    return 3 if planted else 1 if any(o.verdict == judge.FAIL for o in outs) else 0


def read_record(path: str) -> dict[str, Any] | None:
    """A node's record (trainready.fleetnode/1) as its task wrote it, or None."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8")) if path else None
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def spec_of(fleet: FleetOptions) -> Any:
    from trainready.spec import load_spec

    return load_spec(fleet.spec)[0]


def trends(fleet: FleetOptions, verdict: FleetVerdict, outs: list[judge.Outcome], t: Any,
           strikes_of: int = 0) -> list[judge.Outcome]:
    """Each node with a record: its figures and counters added to its history, judged against it (trend.py)."""
    from trainready.spec import load_spec

    fs = load_spec(fleet.spec)[0].fleet
    by = {nv.node: nv for nv in verdict.nodes}
    run = Path(str(verdict.context.get("run", ""))).name
    fp: dict[str, dict[str, int]] = {}  # node -> GPU index (rank) -> fingerprint entries off across the fleet
    for c in verdict.cross:
        for m in c.metrics if c.name == "cluster.fingerprint" else ():
            lab = m.label_dict
            fp.setdefault(lab["node"], {})[lab["gpu"]] = int(m.value)
    out = []
    for o in outs:
        nv = by[o.node]
        said = [] if nv.not_tested or judge.no_record(nv) else trend.follow(
            fleet.results, o.node, nv.record, trend.Sweep(o.verdict, state.stamp(t), run, o.text, o.strikes, strikes_of, o.unjudged),
            fleet.plants, trend.Rule(fs.trend_fraction, fs.trend_runs, fs.trend_min_runs), fp.get(o.node))
        out.append(dataclasses.replace(o, trend=tuple(said)))
    return out


def accept(fleet: FleetOptions, opts: SweepOptions, nodes: list[str], say: Callable[[str], None]) -> FleetVerdict:
    """`cluster run`'s acceptance on `nodes`, no cross-node step, no drain (the sweep drains after its strikes)."""
    from trainready.cluster.fleet import run_fleet, write_verdict

    os.environ["SBATCH_NO_REQUEUE"] = "1"  # sbatch(1): preempted with PreemptMode=REQUEUE, the task ends
    if opts.qos:
        os.environ["SBATCH_QOS"] = opts.qos
    here = dataclasses.replace(fleet, nodelist=slurm.hostlist(nodes), count=None, cross=False, drain=False)
    verdict = run_fleet(here, say, kind="sweep")
    write_verdict(verdict, fleet.results)
    settle([str(j) for j in (verdict.context.get("job_id"), verdict.context.get("remeasure_job_id")) if j])
    return verdict


def settle(jobs: list[str], limit_s: float = SETTLE_S) -> None:
    """Wait, at most `limit_s`, until the sweep's own jobs have left Slurm (COMPLETING included: the epilog runs
    after the task's record is written), so the sweep ends with its nodes as idle as it found them and the next
    sweep, a minute or a day later, does not find them 'busy: completing'."""
    import time

    from trainready.errors import SlurmError

    end = time.monotonic() + limit_s
    while jobs and time.monotonic() < end:
        try:
            if not slurm.call(["squeue", "--local", "-h", "-j", ",".join(jobs), "-o", "%i"]).strip():
                return
        except SlurmError:  # squeue: "Invalid job id specified": the jobs are gone from the controller
            return
        time.sleep(0.5)


def stopped_tasks(verdict: FleetVerdict) -> dict[str, str]:
    """node → 'preempted by job N after S s' (or 'cancelled after S s') for each task Slurm stopped."""
    out = {}
    for nv in verdict.nodes:
        st = dict(nv.slurm)
        if not judge.no_record(nv) or (st.get("state") or "").split(" ")[0] not in judge.STOPPED:
            continue
        job = st.get("job_id", "")
        task = next(iter(slurm.task_states(job).values()), None) if job else None
        took = f" after {task.run_s:.0f} s" if task is not None and task.run_s else ""
        now = [ln.split() for ln in slurm.call(["squeue", "--local", "-h", "-w", nv.node, "-o", "%i %j"]).splitlines()]
        other = [j for j, *name in now if name != ["trainready-accept"]]
        out[nv.node] = f"preempted by job {other[0]}{took}" if other else f"{st.get('state', '').lower()}{took}"
    return out


def act(fleet: FleetOptions, doc: dict[str, Any], outs: list[judge.Outcome], fleet_size: int, opts: SweepOptions,
        t: Any, say: Callable[[str], None]) -> list[judge.Outcome]:
    """Drain the confirmed failures (with --drain), within the bound, never over an administrator's drain."""
    from trainready.cluster.repair import ledger
    from trainready.cluster.repair import reasons
    from trainready.cluster.repair import rma

    wanted = [o.node for o in outs if o.action == "drain"]
    if not wanted or not fleet.drain:
        return [dataclasses.replace(o, action="would drain (no --drain)") if o.action == "drain" else o for o in outs]
    drain, hold, loud = judge.bound(doc, wanted, fleet.max_drain, fleet_size, opts.window_s, t)
    if loud:
        say(loud)
    info = slurm.nodes(drain) if drain else {}
    done: dict[str, str] = {n: "held" for n in hold}
    for o in outs:
        if o.node not in drain:
            continue
        i = info.get(o.node)
        if i is not None and i.drained and not i.ours:
            done[o.node] = "left-alone"
            ledger.append(fleet.results, {"action": "left-alone", "node": o.node, "why": [o.text], "by": "sweep",
                                          "slurm_reason": i.reason})
            continue
        klass = reasons.class_of_causes(o.causes)
        reason = ledger.dated_reason("sweep", [o.text], klass=klass)
        failed = ledger.drain_one(o.node, reason)  # a node Slurm refuses is said for that node; the others go on
        ledger.append(fleet.results, {"action": "drain-failed" if failed else "drain", "node": o.node,
                                      "why": [o.text], "by": "sweep", "strikes": o.strikes, "slurm_reason": reason,
                                      **ledger.whole("sweep", klass, [o.text]),
                                      "planted": dict(fleet.plants), **({"error": failed} if failed else {})})
        if failed:
            say(f"{o.node}: NOT drained: {failed}")
            done[o.node] = "drain-failed"
            continue
        trend.mark_drained(fleet.results, o.node, state.stamp(), reason)  # when it was drained, after the sweep
        rma.after_drain(fleet.results, o.node, None, say)  # RESULTS/rma/NODE/ from the node's newest record
        doc["drains"].append({"node": o.node, "when": state.stamp(t), "reason": reason})
        state.node(doc, o.node)["drained"] = {"when": state.stamp(t), "reason": reason}
        done[o.node] = "drain"
    return [dataclasses.replace(o, action=done.get(o.node, o.action)) for o in outs]


def line(o: judge.Outcome, strikes: int) -> str:
    warned = "".join(f"\n{o.node}: TREND WARN: {w}" for w in o.trend)
    if o.verdict != judge.FAIL:
        return f"{o.node}: {o.verdict}" + (f": {o.text}" if o.text else "") + warned
    what = {"warn": f"WARN (failed {o.strikes} of {strikes} sweeps in a row: measured again before a drain)",
            "drain": "FAIL, drained", "held": "FAIL, NOT drained (draining stopped: see above)",
            "left-alone": "FAIL, already drained by an administrator: left alone",
            "drain-failed": "FAIL, NOT drained (Slurm refused the drain: see above)",
            "switch": "FAIL, NOT drained: its leaf switch is the likelier cause (see above)"}.get(o.action,
                                                                                                 f"FAIL, {o.action}")
    return f"{o.node}: {what}: {o.text}" + warned


def write_record(fleet: FleetOptions, opts: SweepOptions, p: select.Pick, outs: list[judge.Outcome],
                 verdict: FleetVerdict | None, t: Any) -> Path:
    """RESULTS/sweep/runs/STAMP.json and RESULTS/sweep/last.json (`trainready.sweep/1`), atomically."""
    from trainready.util.atomic import atomic_write_text

    doc = {"schema": RECORD, "started": state.stamp(t), "finished": state.stamp(), "partition": fleet.partition,
           "qos": opts.qos, "level": fleet.level.value, "cap": p.cap, "swept": list(p.nodes), "left": dict(p.left),
           "strikes": opts.strikes, "outcomes": [dataclasses.asdict(o) for o in outs],
           "run": verdict.context.get("run") if verdict else None, "planted": dict(fleet.plants),
           "nodes": [{"node": o.node, "accepted": o.verdict == judge.PASS, "verdict": o.verdict,
                      "reasons": [o.text] if o.verdict == judge.FAIL else [],
                      "warnings": list(o.trend) + ([o.text] if o.verdict != judge.FAIL and o.text else [])}
                     for o in outs]}
    folder = fleet.results / state.FOLDER / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{t.strftime('%Y%m%dT%H%M%SZ')}.json"
    text = json.dumps(doc, indent=1) + "\n"
    atomic_write_text(path, text)
    atomic_write_text(fleet.results / state.FOLDER / "last.json", text)
    if opts.json_path:
        atomic_write_text(Path(opts.json_path), text)
    return path
