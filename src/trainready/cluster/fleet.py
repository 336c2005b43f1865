"""The whole fleet run, driven: steps.py's steps in order, in the run's own folder, and the verdict document."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from trainready.cluster import history, runstate, steps

from trainready.cluster.repair import ledger

from trainready.cluster.repair import jobs as sacct
from trainready.cluster.control import avail, outage, slurm, watch
from trainready.cluster.judge import guard, switches
from trainready.cluster.judge.verdict import FleetVerdict, NodeInput, decide
from trainready.cluster.options import FleetOptions, time_seconds
from trainready.cluster.remeasure import remeasure
from trainready.cluster.tasks import collective, crosschecks, railcross
from trainready.cluster.tasks.layout import CROSS_SCHEMA, cross_record, node_record, read_json
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
               lambda c: crosschecks.limits(c, spec.fleet), crosschecks.hosts, lambda c: railcross.judge(c, spec)):
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


def submit_array(here: FleetOptions, nodes: list[str], gpus: int) -> str:
    """The acceptance array's job id: the one this run's state records (attaching never submits twice), else a new
    array, its id recorded before it is pinned.  An array whose collector went away while pinning it is pinned
    again only while Slurm still holds it (a released array's tasks may already run)."""
    st = runstate.read(here.results)
    if not st.get("job"):
        job = steps.submit(here, nodes, gpus, lambda j: runstate.save(here.results, job=j, phase="pinning"))
    else:
        job = str(st["job"])
        if st.get("phase") == "pinning" and "JobHeldUser" in slurm.call(["scontrol", "--local", "show", "job", "-o", job]):
            slurm.pin(job, nodes)
    if st.get("phase", "pinning") == "pinning":
        runstate.save(here.results, phase="accepting")
    return job


def heard(here: FleetOptions, w: watch.Watch, line: str) -> None:
    """A new progress line: kept in the run's state, and what a silent controller's wait says when it gives up."""
    runstate.save(here.results, watch=runstate.watch_doc(w))
    p = outage.current()
    if p is not None:
        p.known = line


def accept_nodes(here: FleetOptions, sel: avail.Selection, gpus: int, say: steps.Progress) -> tuple[str, list[NodeInput]]:
    """(job id, inputs): the array over the nodes that can be tested, waited for and gathered, plus the nodes
    not tested, in the order asked for.  An array this run already submitted (runstate.py) is picked up."""
    sel.say_not_tested(say)
    nodes = list(sel.nodes)
    if here.container:  # a registry reference: every node pulls on its own (image/fleet.py)
        from trainready.image.fleet import warn_registry

        warn_registry(here.container.image, len(nodes), say)
    job, inputs = "", []
    if nodes:
        st = runstate.read(here.results)
        if st.get("job"):
            say(f"job {st['job']}: picked up where it is ({len(nodes)} node(s); nothing resubmitted)")
        else:
            say(f"accepting {len(nodes)} node(s): {', '.join(nodes[:8])}{' ...' if len(nodes) > 8 else ''} (records "
                f"in {here.results})")
        job = submit_array(here, nodes, gpus)
        w = runstate.watch_from(st.get("watch"))
        if st.get("phase") != "accepted":
            waves = -(-len(nodes) // max(1, here.concurrency))  # ceil: K tasks run at a time
            w = watch.wait(job, nodes, time_seconds(here.time_limit), waves, say, w, lambda w_, line: heard(here, w_, line),
                         node_record(here.results, nodes[0]).parent)
            runstate.save(here.results, phase="accepted", watch=runstate.watch_doc(w))
        inputs = steps.gather(here, nodes, w)
        if here.container:  # every node's copy against the image record (image/fleet.py)
            from trainready.image.fleet import against_record

            inputs = against_record(inputs, here.container.record)
    inputs += [NodeInput(n, None, not_tested=why) for n, why in sel.not_tested.items()]
    rank = {n: i for i, n in enumerate(sel.order)}
    return job, sorted(inputs, key=lambda ni: rank.get(ni.node, len(rank)))


def cross_nodes(opts: FleetOptions, inputs: list[NodeInput],
                say: steps.Progress) -> tuple[list[str], list[NodeInput], dict[str, slurm.NodeInfo]]:
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


def begin(opts: FleetOptions, kind: str, say: steps.Progress) -> tuple[FleetOptions, avail.Selection, str]:
    """A new run: its nodes chosen, its folder RESULTS/runs/ID/ made, its state started (runstate.py)."""
    import dataclasses

    sel = steps.select_nodes(opts)
    here = dataclasses.replace(opts, results=history.new_run_dir(opts.results, kind))
    started = history.now()
    runstate.claim(here.results)
    runstate.save(here.results, kind=kind, started=started, options=runstate.options_doc(opts),
                  selection=runstate.selection_doc(sel))
    p = outage.current()
    if p is not None:
        p.pickup = attach_command(here.results)
    say(f"run {here.results.name} (if this command stops, `{attach_command(here.results)}` picks the run up)")
    return here, sel, started


def attach_command(run_dir: Path) -> str:
    import shlex

    return f"trainready cluster attach --results {shlex.quote(str(run_dir.parent.parent))} {run_dir.name}"


def cross_step(opts: FleetOptions, here: FleetOptions, spec: NodeSpec, inputs: list[NodeInput],
               say: steps.Progress) -> tuple[list[NodeInput], list[Any], list[Any]]:
    """(inputs, cross results, findings): the cross-node step over the nodes with a record, once per run: its
    nodes are kept in the run's state, and a step the run already finished is not run again."""
    import dataclasses

    st = runstate.read(here.results).get("cross")
    if st is None:
        with_record, inputs, info = cross_nodes(here, inputs, say)
        st = runstate.save(here.results, cross={"nodes": with_record, "gone": {ni.node: ni.not_tested for ni in inputs
                           if ni.record is not None and ni.not_tested}})["cross"]
    else:
        gone = dict(st.get("gone") or {})
        inputs = [dataclasses.replace(ni, not_tested=gone[ni.node]) if ni.node in gone else ni for ni in inputs]
        with_record, info = list(st["nodes"]), slurm.nodes(list(st["nodes"])) if st["nodes"] else {}
    if not (opts.cross and with_record):
        return inputs, [], []
    if st.get("rc") is None:
        wait_cross(here.results, say)  # a step an earlier collector started, still running: its end
        rc = steps.cross_phase(here, with_record, info, spec.gpu.count, say)
        runstate.save(here.results, cross={**st, "rc": rc})
    return (inputs, *judge_cross(here, spec, with_record))


def wait_cross(run_dir: Path, say: steps.Progress) -> None:
    """Until this run's cross-node step that an earlier collector started (its srun outlives it) has left
    Slurm's queue: one squeue a POLL_MAX_S apart."""
    import time

    said = False
    while True:
        rows = [r.split("|", 1) for r in slurm.call(["squeue", "-h", "-n", "trainready-cross", "-o", "%i|%k"]).splitlines()]
        ids = [r[0] for r in rows if len(r) == 2 and r[1] == steps.cross_comment(run_dir)]
        if not ids:
            return
        if not said:
            say(f"cross-node step {', '.join(ids)}, started by an earlier collector, still running; waiting for its end")
            said = True
        time.sleep(watch.POLL_MAX_S)


def run_fleet(opts: FleetOptions, say: steps.Progress, kind: str = "run",
              base: history.Baseline | None = None, attach: Path | None = None) -> FleetVerdict:
    """One run in its own folder RESULTS/runs/ID/ (history.py); `base`: the run a resume is judged against;
    `attach`: that run's folder, picked up where its state says it is (runstate.py), `opts` its options."""
    import dataclasses

    spec, source = load_spec(opts.spec)
    if attach is None:
        here, sel, started = begin(opts, kind, say)
    else:
        st = runstate.read(attach)
        here, sel, started = dataclasses.replace(opts, results=attach), runstate.selection_from(st["selection"]), st["started"]
    job, inputs = accept_nodes(here, sel, spec.gpu.count, say)
    inputs, cross_results, findings = cross_step(opts, here, spec, inputs, say)
    inputs, again_job = remeasure(here, inputs, spec, spec.gpu.count, say, accept_nodes, base.peers if base else ())
    reference = opts.reference or (base.reference if base else None)
    context = {"job_id": job, "remeasure_job_id": again_job or None, "spec_source": source, "results": str(opts.results), "run": str(here.results),
               "kind": kind, "started": started, "finished": history.now(), "reference_option": reference,
               "image": opts.container.image if opts.container else None,
               "image_record": opts.container.record if opts.container else None}
    if opts.container:  # the launcher's versions and the Pyxis plugin's Slurm (cluster/control/launcher.py)
        from trainready.cluster.control.launcher import chain

        context["launcher"] = chain([ni.record for ni in inputs])
    if base is not None:
        context.update(baseline=base.record, baseline_nodes=[p.node for p in base.peers])
    verdict = decide(inputs, spec, cross_results, findings, reference, opts.plants, context,
                     peers=base.peers if base else ())
    fs = spec.fleet
    sw = switches.check({n.node: n.causes for n in verdict.nodes if n.rejected}, fs.switch_fraction,
                        fs.switch_causes, opts.topology, {n.node for n in verdict.nodes if not n.not_tested})
    dp = guard.plan(verdict, opts.max_drain, sw.named, fs.switch_causes)
    impact = sacct.for_run(opts.results, verdict.rejected, str(context["finished"]), fs.coverage_days)
    said = {"switches_unchecked": sw.unchecked} if sw.unchecked else {}  # the switch rule not run, and why
    verdict = dataclasses.replace(verdict, guard={**dp.to_json(), **said}, context={
        **verdict.context, "job_impact": {n: i.to_json() for n, i in impact.items()}})
    if opts.drain and not runstate.read(here.results).get("drained"):
        ledger.drain_rejected(opts.results, verdict, say, dp, impact)  # the RMA folders say the same jobs
        runstate.save(here.results, drained=True)
    return verdict


def write_verdict(verdict: FleetVerdict, results: Path) -> Path:
    """The run's own verdict (RESULTS/runs/ID/fleet.json) and RESULTS/fleet.json, the latest with its history;
    returns the latter."""
    run_dir = Path(str(verdict.context["run"]))
    latest = history.write(verdict.to_json(), results, run_dir)[1]
    if runstate.read(run_dir):
        runstate.save(run_dir, exit_code=verdict.exit_code, finished=verdict.context.get("finished"))
    return latest


SETTLE_S = 30.0  # seconds: slurmctld pings a node it just returned to service; slurm.conf's SlurmdTimeout is longer


def settle(nodes: Sequence[str], say: steps.Progress, limit_s: float = SETTLE_S) -> None:
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
