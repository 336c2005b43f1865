"""`cluster pairs`' state as it goes, RESULTS/pairs/state.json (trainready.pairsstate/1, rewritten atomically at
each step), so that `cluster pairs --attach` (or `cluster attach --results R pairs`) picks the search up at the
round it reached: a finished round's pairs are never measured again, nor are the pairs of an unfinished round
whose step wrote its record (their srun outlives the collector).

    options, nodes      the command's options (its Slurm options, the pairing's, GPUs per node) and the nodes
    rounds              per round: its pairs, and once every pair has a result, each pair's busbw (or why none)
    exit_code           the record written (pairs.json) and its exit code

The pairing (pairing.py) is a pure function of the nodes, the options and the measurements, so the rounds an
attach replays from this state are those the first collector ran.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from trainready.cluster import runstate
from trainready.cluster.control import slurm
from trainready.cluster.options import FleetOptions
from trainready.cluster.pairs.pairing import Pair, PairingOptions
from trainready.errors import UsageError

SCHEMA = "trainready.pairsstate/1"
POLL_S = 5.0  # seconds between squeue calls while an earlier collector's steps of a round still run


def path(results: Path) -> Path:
    return results / "pairs" / "state.json"


def read(results: Path) -> dict[str, Any]:
    """The state ({} when there is none)."""
    try:
        doc = json.loads(path(results).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) and doc.get("schema") == SCHEMA else {}


def save(results: Path, **fields: Any) -> dict[str, Any]:
    from trainready.util.atomic import atomic_write_json

    doc = {**read(results), "schema": SCHEMA, **fields}
    atomic_write_json(path(results), doc)
    return doc


def start(fleet: FleetOptions, pairing: PairingOptions, gpus_per_node: int, nodes: Sequence[str]) -> None:
    """A new search: its state started afresh."""
    from trainready.util.atomic import atomic_write_json

    path(fleet.results).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path(fleet.results), {
        "schema": SCHEMA, "options": runstate.options_doc(fleet), "pairing": dataclasses.asdict(pairing),
        "gpus_per_node": gpus_per_node, "nodes": list(nodes), "rounds": {}})


def resumed(results: Path) -> tuple[FleetOptions, PairingOptions, int, list[str]]:
    """(Slurm options, pairing options, GPUs per node, nodes) of the unfinished search under `results`; none →
    UsageError."""
    st = read(results)
    if not st:
        raise UsageError(f"--results {results}: no `cluster pairs` to attach to (no {path(results)})")
    if "exit_code" in st:
        raise UsageError(f"{path(results)}: that search finished (exit {st['exit_code']}); its record: "
                         f"{results / 'pairs' / 'pairs.json'}")
    return (runstate.options_from(st["options"]), PairingOptions(**st["pairing"]), int(st["gpus_per_node"]),
            list(st["nodes"]))


def key(ab: Pair) -> str:
    return f"{ab[0]}__{ab[1]}"


def begun(results: Path, rnd: int, pairs: Sequence[Pair]) -> dict[str, Any]:
    """Round `rnd`'s entry ({} for a round not started); started with other pairs → UsageError (not this search)."""
    r = (read(results).get("rounds") or {}).get(str(rnd)) or {}
    if r and [tuple(ab) for ab in r["pairs"]] != list(pairs):
        raise UsageError(f"{path(results)}: round {rnd} had pairs {r['pairs']}, not {[list(ab) for ab in pairs]}; "
                         "start a new search without --attach")
    return r


def round_started(results: Path, rnd: int, pairs: Sequence[Pair]) -> None:
    st = read(results)
    rounds = dict(st.get("rounds") or {})
    rounds.setdefault(str(rnd), {"pairs": [list(ab) for ab in pairs]})
    save(results, rounds=rounds)


def round_done(results: Path, rnd: int, got: dict[Pair, tuple[float | None, str]]) -> None:
    st = read(results)
    rounds = dict(st.get("rounds") or {})
    rounds[str(rnd)] = {**rounds.get(str(rnd), {"pairs": [list(ab) for ab in got]}),
                        "results": {key(ab): {"busbw_gbps": v, "why": w} for ab, (v, w) in got.items()}}
    save(results, rounds=rounds)


def comment(results: Path, rnd: int) -> str:
    """A round's steps' --comment (squeue %k): how a later collector finds those still running."""
    return f"trainready-pairs {results / 'pairs' / f'round-{rnd}'}"


def wait_steps(results: Path, rnd: int, say: Callable[[str], None]) -> None:
    """Until no step of round `rnd` that an earlier collector started is in Slurm's queue."""
    said = False
    while True:
        rows = [r.split("|", 1) for r in slurm.call(["squeue", "-h", "-n", "trainready-pair", "-o", "%i|%k"]).splitlines()]
        ids = [r[0] for r in rows if len(r) == 2 and r[1] == comment(results, rnd)]
        if not ids:
            return
        if not said:
            say(f"round {rnd}: step(s) {', '.join(ids)} of an earlier collector still running; waiting for their end")
            said = True
        time.sleep(POLL_S)
