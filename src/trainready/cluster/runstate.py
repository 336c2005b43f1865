"""A fleet run's state as it goes, RUN/state.json (trainready.runstate/1, rewritten atomically at each step), so
that `trainready cluster attach` picks up a run whose collector went away (a lost login shell, a killed process,
a controller that stayed silent past --controller-wait, or `cluster run --detach`).

    kind, started, options   the run's command (`run` or `resume`), its start (UTC) and its options
    selection                the nodes tested in order, and those not tested with why
    job, phase               the acceptance array's id; pinning → accepting → accepted
    watch                    the collector's word on each task (Slurm's state, exit code, node) and the tasks it
                             cancelled itself: what Slurm forgets MinJobAge after the end (slurm.conf(5))
    cross                    the cross-node step: its nodes, those left out, its job id, its exit code
    drained, exit_code       --drain done; the verdict written (fleet.json) and its exit code

The remeasure array (remeasure.py) keeps its own RUN/remeasure/state.json.  Attaching never submits an array
whose id is recorded: a node with a record from this run is never run again.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import socket
from pathlib import Path
from typing import Any

from trainready.cluster.control import avail, slurm
from trainready.cluster.judge.guard import parse_max_drain
from trainready.cluster.options import Container, FleetOptions
from trainready.errors import UsageError
from trainready.records import Level

SCHEMA = "trainready.runstate/1"
FILE = "state.json"
LOCK = "collector.lock"


def read(run_dir: Path) -> dict[str, Any]:
    """The run's state ({} when it has none: a run from before state files, or one not started)."""
    try:
        doc = json.loads((run_dir / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) and doc.get("schema") == SCHEMA else {}


def save(run_dir: Path, **fields: Any) -> dict[str, Any]:
    """The state with `fields` set, written atomically; returns it."""
    from trainready.util.atomic import atomic_write_json

    doc = {**read(run_dir), "schema": SCHEMA, **fields}
    atomic_write_json(run_dir / FILE, doc)
    return doc


def options_doc(opts: FleetOptions) -> dict[str, Any]:
    """The run's options as JSON (the run's folder aside: the state lives in it)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(opts):
        v = getattr(opts, f.name)
        if isinstance(v, Level):
            v = v.value
        elif isinstance(v, Container):
            v = dataclasses.asdict(v)
        elif f.name == "max_drain":
            v = str(v)
        elif isinstance(v, (tuple, Path)):
            v = list(v) if isinstance(v, tuple) else str(v)
        elif isinstance(v, dict) or f.name == "plants":
            v = dict(v)
        out[f.name] = v
    return out


def options_from(doc: dict[str, Any]) -> FleetOptions:
    names = {f.name for f in dataclasses.fields(FleetOptions)}
    kw = {k: v for k, v in doc.items() if k in names}
    kw["results"] = Path(kw["results"])
    kw["level"] = Level(kw.get("level", Level.STANDARD.value))
    for k in ("only", "skip"):
        kw[k] = tuple(kw[k]) if kw.get(k) is not None else None
    if kw.get("container"):
        c = kw["container"]
        kw["container"] = Container(c["image"], tuple(c.get("mounts") or ()), bool(c.get("mount_home")))
    if "max_drain" in kw:
        kw["max_drain"] = parse_max_drain(kw["max_drain"])
    if kw.get("topology"):
        kw["topology"] = Path(kw["topology"])
    return FleetOptions(**kw)


def selection_doc(sel: avail.Selection) -> dict[str, Any]:
    return {"nodes": list(sel.nodes), "not_tested": dict(sel.not_tested), "order": list(sel.order)}


def selection_from(doc: dict[str, Any]) -> avail.Selection:
    return avail.Selection(tuple(doc["nodes"]), dict(doc.get("not_tested") or {}), tuple(doc["order"]))


def watch_doc(w: Any) -> dict[str, Any]:
    """watch.Watch as JSON (keys are task indexes)."""
    return {"states": {str(i): dataclasses.asdict(s) for i, s in w.states.items()},
            "over": {str(i): t for i, t in w.over.items()}, "stuck": {str(i): t for i, t in w.stuck.items()},
            "waiting": sorted(w.waiting)}


def watch_from(doc: dict[str, Any] | None) -> Any:
    from trainready.cluster.control.watch import Watch

    doc = doc or {}
    return Watch({int(i): slurm.TaskState(**s) for i, s in (doc.get("states") or {}).items()},
                 {int(i): float(t) for i, t in (doc.get("over") or {}).items()},
                 {int(i): str(t) for i, t in (doc.get("stuck") or {}).items()}, set(doc.get("waiting") or ()))


def find(results: Path, run_id: str | None) -> Path:
    """The run to attach to: RESULTS/runs/RUN_ID, else the newest run with a state file and no verdict, else the
    newest run with a state file (finished: attaching says its verdict)."""
    from trainready.cluster.history import RUNS, _run_dirs

    if run_id:
        d = results / RUNS / run_id
        if not read(d):
            raise UsageError(f"{d}: no run to attach to (no {FILE}; `ls {results / RUNS}` lists the runs)")
        return d
    runs = [d for d in _run_dirs(results) if read(d)]
    if not runs:
        raise UsageError(f"--results {results}: no run to attach to (no {RUNS}/ID/{FILE})")
    return next((d for d in runs if "exit_code" not in read(d)), runs[0])


_HELD: list[int] = []  # the lock files this process holds (released when it exits, however it exits)


def claim(run_dir: Path) -> None:
    """This process is the run's only collector from now on (an exclusive lock on RUN/collector.lock, held until
    it exits); another process already collecting the run → UsageError naming it."""
    fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        who = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise UsageError(f"{run_dir.name}: already being collected by {who}; wait for it, or stop it and "
                         "attach again") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
    _HELD.append(fd)
