"""The multi-node collective of the cross-node step: all_reduce correctness and busbw across every node,
through the comm module (trainready comm's sweep, one rank per srun task, env:// rendezvous on the first
node): NCCL on GPU nodes, gloo on CPU nodes.  Rank 0 writes RESULTS/cross/comm.json (a trainready.report/1).

Judged against the spec's fleet.expected_busbw_gbps (inter-node figures, not the node-local
comm.expected_busbw_gbps) with comm.min_fraction (0.80: 20% below expectation fails).  A busbw below its bound
with zero wrong elements is measured again in the same step before it fails (another job's traffic on a shared
fabric is not a fault; a slow link is slow both times): comm/remeasure.py, as the node check's sweep.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from trainready.spec.keys import CROSS_NODE_OPS
from trainready.spec.model import NodeSpec

if TYPE_CHECKING:  # types only: the comm module (and torch) load when a collective runs
    from trainready.comm.run import CommOptions
    from trainready.ranks.env import ExternalRank
    from trainready.records import CheckResult, Report

OPS = list(CROSS_NODE_OPS)  # the spec refuses a fleet.expected_busbw_gbps key for any other op (spec/keys.py)


def fleet_spec(spec: NodeSpec) -> NodeSpec:
    """The spec the collective is judged with: the fleet's inter-node expectations in place of the node's."""
    comm = dataclasses.replace(spec.comm, expected_busbw_gbps=dict(spec.fleet.expected_busbw_gbps),
                               expected_sizes_bytes=())
    return dataclasses.replace(spec, comm=comm)


def cross_node_options(spec: NodeSpec, world_size: int, *, narrow: bool = False,
                       faults: dict[str, Any] | None = None) -> CommOptions:
    """The comm sweep's options for a cross-node all_reduce (this collective and `cluster pairs`): NCCL on GPU
    nodes, gloo on CPU nodes, with the backend's warm-up, iterations, step budget and cross-node sizes
    (comm/defaults.py); no pairwise matrix.  `narrow`: only the top 1/16 of the size range (a pair's quick
    figure)."""
    from trainready.comm.defaults import sweep_defaults
    from trainready.comm.run import CommOptions
    from trainready.devices.world import cuda_count

    backend = "nccl" if cuda_count() else "gloo"
    d = sweep_defaults(backend)
    lo, hi = d.cross_sizes.min_bytes, d.cross_sizes.max_bytes
    return CommOptions(ops=list(OPS), sizes=d.cross_sizes.steps(max(lo, hi // 16) if narrow else lo),
                       warmup=d.warmup, iters=d.iters, world_size=world_size, backend=backend,
                       timeout_s=spec.comm.timeout_s, join_s=spec.fleet.join_s, pair_iters=0,
                       step_budget_s=d.step_budget_s or None, faults=faults or {})


def sweep_to_record(opts: CommOptions, ext: ExternalRank, spec: NodeSpec, source: str, out: str,
                    context: dict[str, Any], label: str,
                    on_fail: Callable[[Any], None] | None = None, measure_again: bool = False) -> Report | None:
    """Run the sweep as this externally launched rank; rank 0 writes the comm record to OUT, also when the
    sweep fails (then every rank leaves with exit 1, the others saying why on stderr; each first hands its
    failure to `on_fail`, which records the blame).  Rank 0's Report, else None.  `measure_again`: where the
    only failures are timings (busbw below its bound with zero wrong elements), the whole sweep runs once more
    in the same step and a timing fails only if it failed both times (comm/remeasure.py)."""
    from trainready.comm.external import leave
    from trainready.comm.run import build_report, sweep_external, timing_only
    from trainready.report.write import write_json_doc
    from trainready.records import Outcome

    t0 = time.perf_counter()

    def report_failure(fail: Outcome) -> int:
        if on_fail is not None:
            on_fail(fail)
        if ext.rank == 0:
            write_json_doc(build_report(opts, spec, source, None, fail, time.perf_counter() - t0, context).to_json(),
                           out, None)
        else:
            sys.stderr.write(f"{label}: FAIL: {fail.message}\n")
        return 1

    data, fail = sweep_external(opts, ext, report_failure, timing_only(opts, spec, source) if measure_again else None)
    if fail is not None:
        leave(ext, report_failure(fail))
    if ext.rank != 0:
        return None
    rep = build_report(opts, spec, source, data, None, time.perf_counter() - t0, context)
    write_json_doc(rep.to_json(), out, None)
    return rep


def run_collective(spec: NodeSpec, source: str, results: Path, silent: bool = False,
                   on_fail: Callable[[Any], None] | None = None) -> tuple[int, dict[str, Any]]:
    """Join, sweep, and (rank 0) write the comm record; (exit code, short summary for this node's record).
    `silent` (a planted fault): this rank joins, then stops before the first collective (comm.hang_rank)."""
    from trainready.ranks.env import detect

    ext = detect()
    if ext is None:
        return 0, {"skipped": "a world of one task: no multi-node collective"}
    opts = cross_node_options(spec, ext.world_size, faults={"hang_rank": ext.rank, "fault_step": 0} if silent else None)
    context = {"spec_source": source, "launcher": ext.source, "fleet": True}
    rep = sweep_to_record(opts, ext, fleet_spec(spec), source, str(results / "cross" / "comm.json"), context,
                          "trainready cluster: collective", on_fail, measure_again=True)
    summary = {"rank": ext.rank, "world_size": ext.world_size, "backend": opts.backend}
    return 0, ({**summary, "status": rep.status.value} if rep is not None else summary)


TITLE = "multi-node all_reduce: correct results, bus bandwidth"


def not_run(why: str) -> CheckResult:
    """The collective's fleet-level result when it was left out of the cross-node step: SKIP, with why."""
    from trainready.records import CheckResult, Level, Status

    return CheckResult("cluster.collective", TITLE, Level.STANDARD, Status.SKIP, f"not run: {why}", "", (), 0.0, {})


def judge(results: Path, cross: dict[str, dict[str, Any]], step_nodes: Sequence[str] = (),
          per_node: int = 1) -> tuple[Any, list[Any]]:
    """(fleet-level CheckResult, node findings) from RESULTS/cross/comm.json and every rank's blame record
    (blame.py): only the nodes of at-fault ranks are named; ranks that waited for them never are."""
    from trainready.cluster.tasks import blame
    from trainready.cluster.tasks.crosschecks import Finding
    from trainready.cluster.tasks.layout import read_json
    from trainready.records import SCHEMA_VERSION, CheckResult, Level, Metric, Status

    title = TITLE
    doc, why = read_json(results / "cross" / "comm.json", SCHEMA_VERSION)
    res = (doc or {}).get("results") or []
    bad = [r for r in res if r.get("status") in ("fail", "error") and r.get("name") != "comm.pairs"]
    reports = blame.read_ranks(results)
    world = max([int(r.get("rank", 0)) + 1 for r in reports] + [len(step_nodes) * per_node, 1])
    at_fault, waiting = blame.tally(reports, blame.wrong_ranks(bad))
    where = blame.rank_nodes({int(r["rank"]): str(r["node"]) for r in reports if "node" in r} |
                             {int(d.get("rank", 0)): n for n, d in cross.items()}, step_nodes, per_node, world)
    findings = [Finding(node, "collective", Status.FAIL,
                        f"rank(s) {sorted(k for k in at_fault if where.get(k) == node)} at fault in the all_reduce "
                        f"({'; '.join(sorted({w for k in at_fault if where.get(k) == node for w in at_fault[k]}))})")
                for node in sorted({where[k] for k in at_fault if k in where})]
    details = {"record": str(results / "cross" / "comm.json"), "at_fault": sorted(at_fault),
               "waiting": sorted(waiting), "rank_nodes": {str(k): v for k, v in sorted(where.items())}}
    if doc is None:
        status = Status.FAIL if at_fault else Status.ERROR
        return CheckResult("cluster.collective", title, Level.STANDARD, status, f"no collective record: {why}",
                           "See RESULTS/logs/cross.out for the srun step's output.", (), 0.0, details), findings
    metrics = tuple(Metric(m["name"], float(m["value"]) if isinstance(m["value"], (int, float)) else float("nan"),
                           m["unit"], tuple(sorted((m.get("labels") or {}).items())))
                    for r in res for m in r.get("metrics", []) if m.get("name") == "comm_busbw_avg")
    main = next((r for r in res if r.get("name") != "comm.pairs"), {})
    status = Status(bad[0]["status"]) if bad else Status(main.get("status", "warn"))
    msg = bad[0].get("message", "") if bad else main.get("message", "")
    if at_fault and bad:  # rank 0's message is its own view (it may have waited); the ranks' records name the fault
        msg += f"; at fault by the ranks' records: rank(s) {sorted(at_fault)} on {', '.join(f.node for f in findings)}"
    return CheckResult("cluster.collective", title, Level.STANDARD, status, msg,
                       (bad[0].get("remedy", "") if bad else main.get("remedy", "")), metrics, 0.0, details), findings
