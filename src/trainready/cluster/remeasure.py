"""The fleet's slow-node rule measures a suspect again before it rejects it.

judge/stats.py's rule compares each node's throughput figures (GEMM TFLOP/s, HBM GB/s, training tokens/s) with the
fleet's median.  One measurement of a healthy node can sit below it: the acceptance array runs up to
--concurrency tasks at once, and whatever else the node runs (a monitoring agent, a page-cache flush, another
job's tail) is not the node's fault.  A slow GPU or node is slow every time.  So a node whose figure is slow in
the acceptance run is measured again: a second array over the suspects only, running just the checks whose
figures were slow, started after the first array ended.  Its figure counts as slow only when the second
measurement is below the same bound too; the bound stays the one of the first run's whole fleet (the suspects
are never compared with themselves).  A suspect that cannot be measured again keeps its first verdict
(conservative: it was tested and slow), with why in its reasons.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Mapping, Sequence

from trainready.cluster.judge.verdict import NodeInput, slow_reasons
from trainready.cluster.options import FleetOptions
from trainready.spec.model import NodeSpec

# The check that measures each figure the fleet compares (cluster/task.THROUGHPUT).
CHECK_OF: dict[str, str] = {"gemm_bf16": "throughput", "hbm_copy": "throughput", "train_tokens_per_s": "train_step",
                            "pcie_h2d": "pcie", "pcie_d2h": "pcie"}
# Figures that are not measured again: the burn-in's sustained figures are each already a median over the whole
# --duration (checks/burnin.py), so a second run would repeat minutes of load to learn nothing new.
NOT_AGAIN = ("burnin_gemm_sustained", "burnin_hbm_sustained")
ONCE_PLANT = "cluster.slow_once"  # planted: slow in the acceptance array only (a transient, not a fault)
SUBDIR = "remeasure"  # RESULTS/runs/ID/remeasure/nodes/NODE.json: the second records


def suspects(inputs: Sequence[NodeInput], spec: NodeSpec) -> dict[str, tuple[str, ...]]:
    """node → the checks to run again, for every tested node with a slow figure."""
    _, slow = slow_reasons(inputs, spec)
    out = {}
    for node, pairs in slow.items():
        metrics = {cause.removeprefix("slow ") for cause, _ in pairs if cause.startswith("slow ")}
        out[node] = tuple(sorted({CHECK_OF[m] for m in metrics if m in CHECK_OF}))
    return {n: c for n, c in out.items() if c}


def second_options(here: FleetOptions, nodes: Sequence[str], checks: Sequence[str]) -> FleetOptions:
    """The second array's options: the suspects only, their slow checks only, the run's plants but the
    planted transient (ONCE_PLANT), records under RESULTS/runs/ID/remeasure."""
    plants = {k: v for k, v in here.plants.items() if k != ONCE_PLANT}
    return dataclasses.replace(here, results=Path(here.results) / SUBDIR, nodelist=",".join(nodes), count=None,
                               only=tuple(checks), skip=None, plants=plants, cross=False, drain=False)


def remeasure(here: FleetOptions, inputs: list[NodeInput], spec: NodeSpec, gpus: int, say: Callable[[str], None],
              accept: Callable[..., tuple[str, list[NodeInput]]],
              peers: Sequence[NodeInput] = ()) -> tuple[list[NodeInput], str]:
    """The inputs with each suspect's second record attached (NodeInput.again), and the second array's job id
    ('' when no node was slow).  `accept` is fleet.accept_nodes (submit, wait, gather); `peers` (a resume's
    baseline) join the bounds as they do in the verdict."""
    from trainready.cluster.control import avail

    mine = {ni.node for ni in inputs}
    found = {n: c for n, c in suspects([*inputs, *peers], spec).items() if n in mine}
    if not found:
        return inputs, ""
    nodes = [ni.node for ni in inputs if ni.node in found]
    checks = sorted({c for cs in found.values() for c in cs})
    say(f"slow in the acceptance run: {', '.join(nodes)}; measuring again ({', '.join(checks)}) before judging")
    sub = second_options(here, nodes, checks)
    job, again = accept(sub, avail.Selection(tuple(nodes), {}, tuple(nodes)), gpus, say)
    by_node: Mapping[str, NodeInput] = {a.node: a for a in again}
    out = []
    for ni in inputs:
        a = by_node.get(ni.node)
        if a is None:
            out.append(ni)
        elif a.record is not None:
            out.append(dataclasses.replace(ni, again=a.record))
        else:
            out.append(dataclasses.replace(ni, again_missing=a.no_result or a.not_tested or "no second record"))
    return out, job
