"""`cluster pairs --fabric`: the probe step before the search, each pair's rail record read as the search's figure,
and the record's `fabric` section (the rails judged in rails.py).

The probe is one srun step over every selected node (`trainready cluster rail-probe`, one task per node,
cluster/tasks/rails.py); a node whose probe says it cannot test (no perftest, no RDMA port, none ib_write_bw can
open), or that wrote no probe, is "not tested (why)" and is not paired.  The search then runs over the others
(search.py, pairing.py) with one figure per pair: its worst rail's share of the rate, floor `--floor-fraction`
(default 0.8, the documents' 80%).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from trainready.cluster.control import slurm
from trainready.cluster.options import FleetOptions, time_seconds
from trainready.cluster.pairs import rails as rl
from trainready.cluster.pairs.pairing import PairingOptions, PairingOutcome
from trainready.cluster.tasks import rails as task

PROBE_GRACE_S = 60.0  # beyond the probe's own PROBE_S per node and srun's start-up


def probe_argv(f: FleetOptions, nodes: Sequence[str]) -> list[str]:
    """The probe step's srun line (pure: tests assert it)."""
    cmd = f.remote() + ["cluster", "rail-probe", "--results", str(f.results)]
    if f.spec:
        cmd += ["--spec", str(Path(f.spec).resolve()) if Path(f.spec).is_file() else f.spec]
    for k, v in f.plants.items():
        cmd += ["--plant", f"{k}={v}"]
    flags = f.container.srun_flags(f.results) if f.container else []
    return slurm.srun_argv(",".join(nodes), len(nodes), f.time_limit, f.partition, flags, cmd,
                           job_name="trainready-rail-probe", reservation=f.reservation)


def probe(f: FleetOptions, nodes: Sequence[str], say: Callable[[str], None]) -> tuple[list[str], dict[str, str]]:
    """(the nodes that can test, {node: why not tested}) after one probe step over `nodes`."""
    for n in nodes:
        task.probe_path(f.results, n).unlink(missing_ok=True)
    log = f.results / "pairs" / "logs" / "rail-probe.out"
    log.parent.mkdir(parents=True, exist_ok=True)
    say(f"fabric: probing {len(nodes)} node(s) for RDMA ports and perftest")
    with open(log, "w", encoding="utf-8") as fh:
        try:
            subprocess.run(probe_argv(f, nodes), stdout=fh, stderr=subprocess.STDOUT,
                           timeout=time_seconds(f.time_limit) + PROBE_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    ok, why = [], {}
    for n in nodes:
        doc, none = task.read_probe(f.results, n)
        if doc is None:
            why[n] = f"no probe record ({none}; srun's words in {log})"
        elif doc.get("untested"):
            why[n] = str(doc["untested"])
        else:
            ok.append(n)
    for n, w in why.items():
        say(f"{n}: fabric not tested: {w}")
    return ok, why


def is_rail_record(path: Path) -> bool:
    from trainready.cluster.tasks.layout import read_json

    return read_json(path, task.PAIR_SCHEMA)[0] is not None


def figures_of(path: Path) -> tuple[list[rl.RailFigure], str]:
    """A pair's rail figures from its record, and why there are none."""
    from trainready.cluster.tasks.layout import read_json

    doc, why = read_json(path, task.PAIR_SCHEMA)
    if doc is None:
        return [], why
    rows = doc.get("rails") or []
    figs = [rl.RailFigure(int(r["rail"]), str(r["nic_a"]), str(r["nic_b"]),
                          float(r["gbps"]) if isinstance(r.get("gbps"), (int, float)) else None,
                          float(r["rate_gbps"]) if isinstance(r.get("rate_gbps"), (int, float)) else None,
                          str(r.get("why") or "")) for r in rows]
    return figs, "" if figs else str(doc.get("why") or "no rail both nodes have")


def share_of(path: Path) -> tuple[float | None, str]:
    """(the pair's worst rail's share of its rate, '') or (None, why: the first rail without a figure)."""
    figs, why = figures_of(path)
    share = rl.pair_share(figs)
    if share is not None:
        return share, ""
    bad = next((f for f in figs if f.share is None), None)
    return None, (f"rail {bad.rail} {bad.nic_a}-{bad.nic_b}: {bad.why or 'no rate'}" if bad else why)


def section(out: PairingOutcome, results: Path, pairing: PairingOptions, not_tested: Mapping[str, str]) -> dict[str, Any]:
    """The record's `fabric` section, every pair's rail figures read back from its record."""
    from trainready.cluster.tasks.pair import pair_record

    log: rl.Log = {(r.round, r.a, r.b): tuple(figures_of(pair_record(results, r.round, r.a, r.b))[0])
                   for r in out.results}
    return rl.to_json(out, log, pairing.floor_fraction, pairing.confirm, not_tested)


def lines(doc: Mapping[str, Any]) -> list[str]:
    """What `cluster pairs --fabric` prints under its table: the named NICs and nodes, the nodes not tested."""
    fab = doc.get("fabric") or {}
    under = {n: s["switch"] for s in doc.get("switches") or [] for n in s["nodes"]}
    out = [f"{ln} (under switch {under[ln.split(':', 1)[0]]}, named above)" if ln.split(":", 1)[0] in under else ln
           for ln in fab.get("lines") or []]
    out += [f"{n}: not tested ({w})" for n, w in sorted((fab.get("not_tested") or {}).items())]
    return out
