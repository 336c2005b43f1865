"""The fleet's health for node_exporter's textfile collector on the host that runs the sweep (`--prometheus`).

Per node, from the sweep's state and each node's trend (state.py, trend.py): the last sweep's time and verdict,
the strikes, the latest figures per device, the trend WARNs of its last sweep, and whether trainready's sweep
drained it and why (an `_info` gauge carrying Slurm's reason).  Names follow report/prometheus.py (one
`trainready_` prefix, base units); written atomically, as the textfile collector requires.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from trainready.cluster.repair import reasons
from trainready.cluster.repair import coverage
from trainready.cluster.control.slurm import NodeInfo
from trainready.cluster.sweep import judge, state, trend
from trainready.cluster.tasks.node import THROUGHPUT
from trainready.report.prometheus import PREFIX, UNITS, Sample, metric_name, render

P = PREFIX + "sweep_"


def _node(name: str, mine: Mapping[str, Any], runs: list[dict[str, Any]], info: NodeInfo | None,
          limit: int = 0) -> Iterable[Sample]:
    last = (mine.get("runs") or [{}])[-1]
    if last.get("when"):
        yield Sample(P + "last_run_timestamp_seconds", "when the node was last swept (Unix time)",
                     (("node", name),), state.parse(last["when"]).timestamp())
    for v in (judge.PASS, judge.FAIL, judge.UNKNOWN):
        yield Sample(P + "verdict", "1 for the verdict of the node's last sweep (pass, fail, unknown)",
                     (("node", name), ("verdict", v)), 1.0 if last.get("verdict") == v else 0.0)
    yield Sample(P + "strikes", "consecutive failing sweeps of the node", (("node", name),),
                 float(mine.get("strikes", 0)))
    n = int(mine.get("unjudged", 0))
    yield Sample(P + "unjudged_sweeps", "consecutive sweeps that could not judge the node (not judged on a busy "
                 "machine, preempted, no record)", (("node", name),), float(n))
    yield Sample(P + "cannot_be_judged", "1 when the node could not be judged for fleet.unjudged_sweeps sweeps or "
                 "more in a row (never a drain on its own)", (("node", name),), 1.0 if judge.cannot_judge(n, limit) else 0.0)
    ours = info is not None and info.drained and reasons.parse(info.reason).source == "sweep"
    yield Sample(P + "drained", "1 when the node is drained by trainready's sweep", (("node", name),),
                 1.0 if ours else 0.0)
    if ours and info is not None:
        yield Sample(P + "drained_info", "the sweep's drain reason (Slurm's, as sinfo -R shows it)",
                     (("node", name), ("reason", info.reason)), 1.0)
    if runs:
        yield Sample(P + "trend_warnings", "trend WARNs of the node's last sweep", (("node", name),),
                     float(len(runs[-1].get("trend", []))))
        total = runs[-1].get("mismatches_total")
        for dev, n in sorted((total if isinstance(total, dict) else trend.cumulative(runs, {})).items()):
            yield Sample(P + "fingerprint_mismatches_total", "fingerprint battery entries the GPU computed other "
                         "bits for than its identical peers or its own first result, over all the node's sweeps",
                         (("node", name), ("device", dev)), float(n))
        for key, value in runs[-1].get("figures", {}).items():
            fig, _, dev = key.partition("@")
            unit = THROUGHPUT.get(fig, "1")
            yield Sample(metric_name(f"sweep_{fig}", unit), f"{fig} of the node's last sweep with a record",
                         (("node", name), ("device", dev)), value * UNITS.get(unit, ("", 1.0))[1])


def write(path: str, results: Path, doc: Mapping[str, Any], info: Mapping[str, NodeInfo], limit: int = 0,
          window_days: float = 7.0) -> None:
    """The textfile; `limit`: the spec's fleet.unjudged_sweeps (a node unjudged that many sweeps in a row: 'cannot
    be judged'); `window_days`: the spec's fleet.coverage_days, carried so the dashboard's window is the spec's."""
    from trainready.util.atomic import atomic_write_text

    samples = [Sample(P + "last_sweep_timestamp_seconds", "when the last sweep finished (Unix time)", (),
                      state.now().timestamp())]
    for name in sorted(set(doc.get("nodes", {})) | set(info)):
        samples += list(_node(name, doc.get("nodes", {}).get(name, {}), trend.load(results, name), info.get(name),
                              limit))
    samples += [Sample(PREFIX + "node_last_pass_timestamp_seconds", "when the node last passed an active check "
                       "(run, sweep, --health-check --active) or a passive one (--health-check), Unix time",
                       (("node", n), ("kind", k)), t) for n, k, t in coverage.samples(results)]
    samples += [Sample(PREFIX + "node_never_passed", "1 when the node never passed a check of this kind (active, "
                       "passive) in any record; every node swept or in the partition has one",
                       (("node", n), ("kind", k)), 1.0 if none else 0.0)
                for n, k, none in coverage.never(results, set(doc.get("nodes", {})) | set(info))]
    samples.append(Sample(PREFIX + "coverage_window_seconds", "the spec's fleet.coverage_days: a node whose last "
                          "pass is older is not covered", (), window_days * 86400.0))
    atomic_write_text(path, render(samples))
