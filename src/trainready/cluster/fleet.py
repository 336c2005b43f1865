"""The whole fleet run (run.py's steps in order, in the run's own folder) and the verdict document."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from trainready.cluster import avail, collective, crosschecks, guard, history, ledger, run, slurm
from trainready.cluster.layout import CROSS_SCHEMA, cross_record, read_json
from trainready.cluster.options import FleetOptions, time_seconds
from trainready.cluster.remeasure import remeasure
from trainready.cluster.verdict import FleetVerdict, NodeInput, decide
from trainready.spec import load_spec
from trainready.spec.model import NodeSpec


def read_cross(results: Path, nodes: list[str]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(node → cross record, node → why it has none)."""
    have, missing = {}, {}
    for n in nodes:
        doc, why = read_json(cross_record(results, n), CROSS_SCHEMA)
        if doc is None:
            missing[n] = why
        else:
            have[n] = doc
    return have, missing


def judge_cross(opts: FleetOptions, spec: NodeSpec, nodes: list[str]) -> tuple[list[Any], list[Any]]:
    """Fleet-level cross results and node findings (a node without a cross record is a FAIL finding)."""
    from trainready.records import Status

    cross, missing = read_cross(opts.results, nodes)
    results, findings = [], []
    for fn in (lambda c: crosschecks.clock(c, spec.fleet), crosschecks.storage,
               lambda c: crosschecks.limits(c, spec.fleet), crosschecks.hosts):
        res, found = fn(cross)
        results.append(res)
        findings += found
    if not opts.collective:
        results.append(collective.not_run("--no-collective: the fabric is left to `cluster pairs` or nccl-tests"))
    elif len(nodes) > 1 or spec.gpu.count > 1:
        res, found = collective.judge(opts.results, cross, nodes, max(1, spec.gpu.count))
        results.append(res)
        findings += found
    findings += [crosschecks.Finding(n, "cross-node", Status.FAIL, f"no cross-node record ({why}); see "
                                     f"{opts.results / 'logs' / 'cross.out'}") for n, why in missing.items()]
    return results, findings


def accept_nodes(here: FleetOptions, sel: avail.Selection, gpus: int, say: run.Progress) -> tuple[str, list[NodeInput]]:
    """(job id, inputs): the array over the nodes that can be tested, waited for and gathered, plus the nodes
    not tested, in the order asked for."""
    sel.say_not_tested(say)
    nodes = list(sel.nodes)
    job, inputs = "", []
    if nodes:
        say(f"accepting {len(nodes)} node(s): {', '.join(nodes[:8])}{' ...' if len(nodes) > 8 else ''} (records in "
            f"{here.results})")
        job = run.submit(here, nodes, gpus)
        waves = -(-len(nodes) // max(1, here.concurrency))  # ceil: K tasks run at a time
        inputs = run.gather(here, nodes, run.wait(job, nodes, time_seconds(here.time_limit), waves, say))
    inputs += [NodeInput(n, None, not_tested=why) for n, why in sel.not_tested.items()]
    rank = {n: i for i, n in enumerate(sel.order)}
    return job, sorted(inputs, key=lambda ni: rank.get(ni.node, len(rank)))


def cross_nodes(opts: FleetOptions, inputs: list[NodeInput],
                say: run.Progress) -> tuple[list[str], list[NodeInput], dict[str, slurm.NodeInfo]]:
    """(the nodes of the cross-node step, the inputs, Slurm's word on those nodes): the nodes with a record that
    Slurm will still start a step on.  A node drained, down or reserved since its own acceptance ran is left out
    of the step (srun would wait for it until --time, and every node would lose its cross record) and is not
    tested, with Slurm's word."""
    import dataclasses

    with_record = [ni.node for ni in inputs if ni.record is not None]
    if not (opts.cross and with_record):
        return with_record, inputs, {}
    info = slurm.nodes(with_record)  # one sinfo, also the cross step's node addresses
    now = avail.select(with_record, info, opts.reservation)
    gone = {n: f"{why}, since its acceptance ran: left out of the cross-node step" for n, why in now.not_tested.items()}
    for node, why in gone.items():
        say(f"{node}: not tested: {why}")
    return list(now.nodes), [dataclasses.replace(ni, not_tested=gone[ni.node]) if ni.node in gone else ni
                             for ni in inputs], info


def run_fleet(opts: FleetOptions, say: run.Progress, kind: str = "run",
              base: history.Baseline | None = None) -> FleetVerdict:
    """One run in its own folder RESULTS/runs/ID/ (history.py); `base`: the run a resume is judged against."""
    import dataclasses

    spec, source = load_spec(opts.spec)
    sel = run.select_nodes(opts)
    started = history.now()
    here = dataclasses.replace(opts, results=history.new_run_dir(opts.results, kind))
    job, inputs = accept_nodes(here, sel, spec.gpu.count, say)
    with_record, inputs, info = cross_nodes(here, inputs, say)
    cross_results, findings = [], []
    if opts.cross and with_record:
        run.cross_phase(here, with_record, info, spec.gpu.count, say)
        cross_results, findings = judge_cross(here, spec, with_record)
    inputs, again_job = remeasure(here, inputs, spec, spec.gpu.count, say, accept_nodes, base.peers if base else ())
    reference = opts.reference or (base.reference if base else None)
    context = {"job_id": job, "remeasure_job_id": again_job or None, "spec_source": source, "results": str(opts.results), "run": str(here.results),
               "kind": kind, "started": started, "finished": history.now(), "reference_option": reference,
               "image": opts.container.image if opts.container else None}
    if base is not None:
        context.update(baseline=base.record, baseline_nodes=[p.node for p in base.peers])
    verdict = decide(inputs, spec, cross_results, findings, reference, opts.plants, context,
                     peers=base.peers if base else ())
    dp = guard.plan(verdict, opts.max_drain)
    verdict = dataclasses.replace(verdict, guard=dp.to_json())
    if opts.drain:
        ledger.drain_rejected(opts.results, verdict, say, dp)
    return verdict


def write_verdict(verdict: FleetVerdict, results: Path) -> Path:
    """The run's own verdict (RESULTS/runs/ID/fleet.json) and RESULTS/fleet.json, the latest with its history;
    returns the latter."""
    return history.write(verdict.to_json(), results, Path(str(verdict.context["run"])))[1]


def resume_fleet(opts: FleetOptions, nodes: list[str] | None, say: run.Progress,
                 runs_in: tuple[Path, ...] = ()) -> tuple[FleetVerdict | None, ledger.ResumePlan]:
    """Re-validate the nodes trainready drained; resume those that pass, drain again those that fail.  They are
    judged against the run that rejected them, looked for under `runs_in` (default: --results)."""
    import dataclasses

    plan = ledger.plan_resume(nodes, opts.partition)
    for node, why in plan.left:
        say(f"{node}: {why}")
    if not plan.revalidate:
        return None, plan
    base = history.baseline(runs_in or (opts.results,), plan.revalidate)
    resv = ledger.reserve(plan.revalidate, max(10, time_seconds(opts.time_limit) // 60 * 2 + 10))
    before = slurm.nodes(list(plan.revalidate))
    try:
        for node in plan.revalidate:
            slurm.undrain(node)
            ledger.append(opts.results, {"action": "revalidate", "node": node,
                                         "why": [before[node].reason] if node in before else [], "reservation": resv})
        settle(plan.revalidate, say)
        sub = dataclasses.replace(opts, nodelist=",".join(plan.revalidate), count=None, reservation=resv, drain=False)
        verdict = run_fleet(sub, say, "resume", base)
        for nv in verdict.nodes:
            if nv.accepted:
                ledger.append(opts.results, {"action": "resume", "node": nv.node, "why": ["passed acceptance again"],
                                             "record": nv.record, "planted": dict(verdict.planted)})
                say(f"{nv.node}: passed acceptance again; back in service")
        ledger.drain_rejected(opts.results, verdict, say)
        for nv in verdict.nodes:  # untested again: back to the drain it had, never left in service unjudged
            if nv.not_tested:
                slurm.drain(nv.node, before[nv.node].reason if nv.node in before else f"{slurm.PREFIX} not re-validated")
                ledger.append(opts.results, {"action": "drain", "node": nv.node, "why": [f"not tested: {nv.not_tested}"]})
                say(f"{nv.node}: not tested again ({nv.not_tested}); drained as before")
    except BaseException:
        for node in plan.revalidate:  # never leave a node we undrained in service without a verdict
            slurm.drain(node, before[node].reason if node in before else f"{slurm.PREFIX} re-validation interrupted")
        raise
    finally:
        ledger.unreserve(resv)
    return verdict, plan


SETTLE_S = 30.0  # seconds: slurmctld pings a node it just returned to service; slurm.conf's SlurmdTimeout is longer


def settle(nodes: Sequence[str], say: run.Progress, limit_s: float = SETTLE_S) -> None:
    """Wait (one sinfo call a second, at most `limit_s`) until slurmctld has heard from each node it just
    returned to service: right after `state=resume` a node may show 'idle*' (not responding) until its slurmd
    answers the next ping, and the selection would record it as not tested."""
    import time

    if not nodes:  # `sinfo -n` with no names would list, and wait for, every node of the cluster
        return
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        quiet = [n for n, i in slurm.nodes(list(nodes)).items() if i.state.endswith("*")]
        if not quiet:
            return
        time.sleep(1.0)
    say(f"{', '.join(quiet)}: still not responding {limit_s:.0f} s after it was returned to service")
