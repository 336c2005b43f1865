"""The whole fleet run (run.py's steps in order) and the verdict document."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from trainready.cluster import avail, collective, crosschecks, guard, ledger, run
from trainready.cluster.layout import CROSS_SCHEMA, cross_record, read_json
from trainready.cluster.options import FleetOptions, time_seconds
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
    if len(nodes) > 1 or spec.gpu.count > 1:
        res, found = collective.judge(opts.results, cross, nodes, max(1, spec.gpu.count))
        results.append(res)
        findings += found
    findings += [crosschecks.Finding(n, "cross-node", Status.FAIL, f"no cross-node record ({why}); see "
                                     f"{opts.results / 'logs' / 'cross.out'}") for n, why in missing.items()]
    return results, findings


def accept_nodes(opts: FleetOptions, sel: avail.Selection, gpus: int, say: run.Progress) -> tuple[str, list[NodeInput]]:
    """Submit the array over the nodes that can be tested, wait, gather; plus the nodes not tested."""
    for node, why in sel.not_tested.items():
        say(f"{node}: not tested: {why}")
    nodes = list(sel.nodes)
    job, inputs = "", []
    if nodes:
        say(f"accepting {len(nodes)} node(s): {', '.join(nodes[:8])}{' ...' if len(nodes) > 8 else ''}")
        job = run.submit(opts, nodes, gpus)
        waves = -(-len(nodes) // max(1, opts.concurrency))  # ceil: K tasks run at a time
        inputs = run.gather(opts, nodes, run.wait(job, nodes, time_seconds(opts.time_limit), waves, say))
    inputs += [NodeInput(n, None, not_tested=why) for n, why in sel.not_tested.items()]
    rank = {n: i for i, n in enumerate(sel.order)}
    return job, sorted(inputs, key=lambda ni: rank.get(ni.node, len(rank)))


def run_fleet(opts: FleetOptions, say: run.Progress) -> FleetVerdict:
    spec, source = load_spec(opts.spec)
    job, inputs = accept_nodes(opts, run.select_nodes(opts), spec.gpu.count, say)
    with_record = [ni.node for ni in inputs if ni.record is not None]
    cross_results, findings = [], []
    if opts.cross and with_record:
        for n in with_record:
            cross_record(opts.results, n).unlink(missing_ok=True)
        (opts.results / "cross" / "comm.json").unlink(missing_ok=True)
        for p in (opts.results / "cross" / "ranks").glob("*.json"):  # an earlier run's blame is not this run's
            p.unlink()
        run.cross_phase(opts, with_record, spec.gpu.count, say)
        cross_results, findings = judge_cross(opts, spec, with_record)
    verdict = decide(inputs, spec, cross_results, findings, opts.reference, opts.plants,
                     {"job_id": job, "spec_source": source, "results": str(opts.results),
                      "image": opts.container.image if opts.container else None})
    dp = guard.plan(verdict, opts.max_drain)
    verdict = dataclasses.replace(verdict, guard=dp.to_json())
    if opts.drain:
        ledger.drain_rejected(opts.results, verdict, say, dp)
    return verdict


def write_verdict(verdict: FleetVerdict, results: Path) -> Path:
    from trainready.probe.envvars import scrub
    from trainready.util.atomic import atomic_write_json

    return atomic_write_json(results / "fleet.json", scrub(verdict.to_json()))


def resume_fleet(opts: FleetOptions, nodes: list[str] | None, say: run.Progress) -> tuple[FleetVerdict | None,
                                                                                            ledger.ResumePlan]:
    """Re-validate the nodes trainready drained; resume those that pass, drain again those that fail."""
    from trainready.cluster import slurm

    plan = ledger.plan_resume(nodes, opts.partition)
    for node, why in plan.left:
        say(f"{node}: {why}")
    if not plan.revalidate:
        return None, plan
    resv = ledger.reserve(plan.revalidate, max(10, time_seconds(opts.time_limit) // 60 * 2 + 10))
    before = slurm.nodes(list(plan.revalidate))
    try:
        for node in plan.revalidate:
            slurm.undrain(node)
            ledger.append(opts.results, {"action": "revalidate", "node": node,
                                         "why": [before[node].reason] if node in before else [], "reservation": resv})
        sub = dataclasses.replace(opts, nodelist=",".join(plan.revalidate), count=None, reservation=resv, drain=False)
        verdict = run_fleet(sub, say)
        for nv in verdict.nodes:
            if nv.accepted:
                ledger.append(opts.results, {"action": "resume", "node": nv.node, "why": ["passed acceptance again"],
                                             "record": nv.record, "planted": dict(verdict.planted)})
                say(f"{nv.node}: passed acceptance again; back in service")
        ledger.drain_rejected(opts.results, verdict, say)
    except BaseException:
        for node in plan.revalidate:  # never leave a node we undrained in service without a verdict
            slurm.drain(node, before[node].reason if node in before else f"{slurm.PREFIX} re-validation interrupted")
        raise
    finally:
        ledger.unreserve(resv)
    return verdict, plan
