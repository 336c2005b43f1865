"""Coverage: per node, when it last passed an active check and a passive one, and the nodes past the window.

Active passes: a `cluster run` (or resume) that accepted the node (RESULTS/runs/ID/fleet.json, the run's
`finished`), a sweep that passed it (RESULTS/sweep/state.json `last_pass`), and `node --health-check --active`
records; passive passes: `node --health-check` records (pass or warn).  Health-check records are read from
RESULTS/health/*.json (the `--json` file a HealthCheckProgram wrapper writes there, one per node:
`trainready node --health-check --json RESULTS/health/$SLURMD_NODENAME.json`).  A node with no pass of a kind,
or one older than the spec's `fleet.coverage_days` (default 7), is named by `cluster history --coverage` and
carried in the sweep's Prometheus textfile (`trainready_node_last_pass_timestamp_seconds{node,kind}`).
Reads files only: no Slurm call.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, Iterable

ACTIVE, PASSIVE = "active", "passive"
KINDS = (ACTIVE, PASSIVE)


def _when(text: Any) -> dt.datetime | None:
    try:
        t = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _runs(results: Path) -> Iterable[tuple[str, str, dt.datetime]]:
    for f in sorted((results / "runs").glob("*/fleet.json")):
        doc = _read(f)
        t = _when((doc.get("context") or {}).get("finished"))
        if t is None or doc.get("planted"):
            continue
        for n in doc.get("nodes") or []:
            yield n.get("node", ""), ("accept" if n.get("verdict") == "accept" else ""), t


def _sweeps(results: Path) -> Iterable[tuple[str, str, dt.datetime]]:
    for node, mine in (_read(results / "sweep" / "state.json").get("nodes") or {}).items():
        t = _when(mine.get("last_pass")) if mine.get("last_pass") else None
        yield node, ("accept" if t else ""), t or dt.datetime.min.replace(tzinfo=dt.timezone.utc)


def _health(results: Path) -> Iterable[tuple[str, str, str, dt.datetime]]:
    for f in sorted((results / "health").glob("*.json")):
        doc = _read(f)
        t, node = _when(doc.get("time")), str((doc.get("context") or {}).get("node") or f.stem)
        rows = doc.get("results") or []
        if t is None or not rows or (doc.get("context") or {}).get("planted"):
            continue
        ok = all(r.get("status") in ("pass", "warn", "skip") for r in rows)
        kind = PASSIVE if [r.get("name") for r in rows] == ["health"] else ACTIVE
        yield node, kind, ("accept" if ok else ""), t


def last_passes(results: Path) -> dict[str, dict[str, dt.datetime | None]]:
    """node -> {active: last pass or None, passive: last pass or None}, every node any record names."""
    out: dict[str, dict[str, dt.datetime | None]] = {}

    def see(node: str, kind: str, ok: str, t: dt.datetime) -> None:
        mine = out.setdefault(node, {k: None for k in KINDS})
        if ok and (mine[kind] is None or t > mine[kind]):  # type: ignore[operator]
            mine[kind] = t

    for node, ok, t in [*_runs(results), *_sweeps(results)]:
        if node:
            see(node, ACTIVE, ok, t)
    for node, kind, ok, t in _health(results):
        see(node, kind, ok, t)
    return out


def stale(passes: dict[str, dict[str, dt.datetime | None]], days: float,
          now: dt.datetime | None = None) -> list[tuple[str, str, dt.datetime | None]]:
    """(node, kind, its last pass or None) for each kind a node has not passed within `days`."""
    now = now or dt.datetime.now(dt.timezone.utc)
    edge = now - dt.timedelta(days=days)
    return [(n, k, t) for n in sorted(passes) for k in KINDS if (t := passes[n][k]) is None or t < edge]


def with_nodes(passes: dict[str, dict[str, dt.datetime | None]],
               nodes: Iterable[str]) -> dict[str, dict[str, dt.datetime | None]]:
    """`passes` plus every node of `nodes` (a partition's, from sinfo) that no record names: never passed."""
    return {**{n: {k: None for k in KINDS} for n in nodes}, **passes}


def lines(results: Path, days: float, now: dt.datetime | None = None, nodes: Iterable[str] = ()) -> list[str]:
    """`cluster history --coverage`'s text: one line per node and kind past the window, or that none is;
    `nodes`: the partition's nodes, so a node no record names is named too."""
    passes = with_nodes(last_passes(results), nodes)
    late = stale(passes, days, now)
    if not passes:
        return [f"no node in any record under {results} (runs/, sweep/state.json, health/)"]
    out = [f"{n}: {k}: {'never passed' if t is None else 'last passed ' + t.isoformat(timespec='seconds')} "
           f"(window {days:g} days)" for n, k, t in late]
    return out or [f"all {len(passes)} node(s) passed an active and a passive check within {days:g} days"]


def unjudged(results: Path, limit: int) -> list[str]:
    """'NODE: cannot be judged for N sweeps (...)' for each node the sweep could not judge `limit` times or more in
    a row (RESULTS/sweep/state.json `unjudged`; the spec's fleet.unjudged_sweeps); [] when `limit` is 0."""
    nodes = _read(results / "sweep" / "state.json").get("nodes") or {}
    return [f"{n}: cannot be judged for {int(m.get('unjudged', 0))} sweeps (fleet.unjudged_sweeps {limit}; last: "
            f"{((m.get('runs') or [{}])[-1]).get('text', '')})" for n, m in sorted(nodes.items())
            if limit and isinstance(m, dict) and int(m.get("unjudged", 0)) >= limit]


def samples(results: Path) -> Iterable[tuple[str, str, float]]:
    """(node, kind, Unix time) of each last pass, for Prometheus."""
    for n, kinds in sorted(last_passes(results).items()):
        for k, t in kinds.items():
            if t is not None:
                yield n, k, t.timestamp()


def never(results: Path, nodes: Iterable[str] = ()) -> Iterable[tuple[str, str, bool]]:
    """(node, kind, never passed) for every node a record names and every node of `nodes` (the partition's, from
    sinfo): the textfile's never-passed gauge, so a node with no pass at all is counted, not absent."""
    for n, kinds in sorted(with_nodes(last_passes(results), nodes).items()):
        for k, t in kinds.items():
            yield n, k, t is None
