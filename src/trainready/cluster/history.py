"""Every `cluster run` and `cluster resume` keeps its own record; nothing an earlier run wrote is overwritten.

    RESULTS/runs/ID/             one run: nodes/, cross/, logs/, job/ and fleet.json, its verdict (written once)
    RESULTS/fleet.json           the latest run's verdict, plus "run" (its folder) and "history" (every earlier
                                 run under RESULTS, newest first: its verdict file, who was rejected)
    RESULTS/drain-ledger.jsonl   every drain and resume of every run (appended)

ID is the UTC start time and the command, e.g. 20261203T210512Z-run, 20261203T211030Z-resume (-2, -3 ... when
two start in the same second).  A folder without fleet.json is a run that ended before its verdict.

A resume re-validates a few nodes; it is judged against its BASELINE, the latest `cluster run` under RESULTS
that judged one of them (the run that rejected them): the figures of that run's other nodes join the robust
statistics, and that run's reference is the reference.
"""

from __future__ import annotations

import datetime as dt
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from trainready.cluster.judge.verdict import NodeInput
from trainready.cluster.tasks.layout import FLEET_SCHEMA, NODE_SCHEMA, read_json

RUNS = "runs"
LATEST = "fleet.json"
REFERENCE_WORDS = ("spec", "fleet majority")  # verdict.reference_versions' names that are not a node


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def new_run_dir(results: Path, kind: str) -> Path:
    """A fresh RESULTS/runs/ID/ (created here, so two runs never share one)."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    (results / RUNS).mkdir(parents=True, exist_ok=True)
    for i in range(1, 1000):
        d = results / RUNS / (f"{stamp}-{kind}" + (f"-{i}" if i > 1 else ""))
        try:
            d.mkdir()
        except FileExistsError:
            continue
        return d
    raise FileExistsError(f"{results / RUNS}: 999 runs started in one second")


def _run_dirs(results: Path) -> list[Path]:
    """Every run folder, newest first (names start with the UTC start time)."""
    base = results / RUNS
    if not base.is_dir():
        return []
    return sorted((d for d in base.iterdir() if d.is_dir()), key=lambda d: d.name, reverse=True)


def entry(run_dir: Path) -> dict[str, Any]:
    """One line of the history: the run, its verdict file, and what it decided (or that it has no verdict)."""
    path = run_dir / LATEST
    doc, why = read_json(path, FLEET_SCHEMA)
    if doc is None:
        return {"run": run_dir.name, "record": None, "verdict": f"none: the run ended before its verdict ({why})"}
    ctx, summary = doc.get("context") or {}, doc.get("summary") or {}
    return {"run": run_dir.name, "kind": ctx.get("kind", "run"), "record": str(path),
            "started": ctx.get("started"), "finished": ctx.get("finished"), "nodes": summary.get("nodes"),
            "accepted": summary.get("accepted"), "rejected": list(doc.get("drain_list") or []),
            "verdict": "reject" if doc.get("drain_list") else "accept", "evidence": summary.get("evidence"),
            "planted": dict(doc.get("planted") or {})}


def keep_earlier_layout(results: Path) -> None:
    """A RESULTS/fleet.json written before run folders existed is kept as a run of its own, not overwritten."""
    old = results / LATEST
    doc, _ = read_json(old, FLEET_SCHEMA)
    if doc is None or "run" in doc:
        return
    stamp = dt.datetime.fromtimestamp(old.stat().st_mtime, dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    dest = results / RUNS / f"{stamp}-earlier"
    dest.mkdir(parents=True, exist_ok=True)
    if not (dest / LATEST).exists():
        shutil.copy2(old, dest / LATEST)


def write(doc: dict[str, Any], results: Path, run_dir: Path) -> tuple[Path, Path]:
    """(the run's own verdict, RESULTS/fleet.json): the latest verdict with its history; both atomic."""
    from trainready.manifest.envvars import scrub
    from trainready.util.atomic import atomic_write_json

    own = atomic_write_json(run_dir / LATEST, scrub(doc))
    keep_earlier_layout(results)
    history = [entry(d) for d in _run_dirs(results) if d != run_dir]
    latest = atomic_write_json(results / LATEST, scrub({**doc, "run": str(run_dir), "history": history}))
    return own, latest


@dataclass(frozen=True)
class Baseline:
    """The run a resume is judged against: its verdict file, its reference, and its other nodes' records."""

    record: str
    reference: str | None  # a node name (the run's --reference), or None: the spec's pins / the fleet majority
    peers: tuple[NodeInput, ...]


def baseline(roots: Sequence[Path], revalidated: Sequence[str]) -> Baseline | None:
    """The latest `cluster run` under any of `roots` (--results folders) that judged one of `revalidated`
    (else the latest run), its other nodes with a record as peers."""
    runs = []
    for root in roots:
        keep_earlier_layout(root)
        for d in _run_dirs(root):
            doc, _ = read_json(d / LATEST, FLEET_SCHEMA)
            if doc is not None and (doc.get("context") or {}).get("kind", "run") == "run":
                runs.append((d, doc))
    if not runs:
        return None
    runs.sort(key=lambda r: r[0].name, reverse=True)
    d, doc = next(((d, doc) for d, doc in runs if {n.get("node") for n in doc.get("nodes") or []} & set(revalidated)),
                  runs[0])
    ref = (doc.get("context") or {}).get("reference_option")
    if ref is None and (doc.get("summary") or {}).get("reference") not in REFERENCE_WORDS:
        ref = (doc.get("summary") or {}).get("reference") or None
    peers = []
    for n in doc.get("nodes") or []:
        rec, _ = read_json(Path(str(n["record"])), NODE_SCHEMA) if n.get("record") else (None, "")
        if rec is not None and n.get("node") not in revalidated:
            peers.append(NodeInput(str(n["node"]), rec, "", str(n["record"]), {}))
    return Baseline(str(d / LATEST), ref, tuple(peers))
