"""`trainready cluster rollout`: a new image or driver reaches the fleet wave by wave, never all at once.

    --waves 1,8,64,all   wave 1 is the canary (the reference server); each wave is `cluster run` over its
                         nodes (RESULTS/waves/wave-K/, a run folder per attempt); a node of a later wave is
                         also rejected for drift from the canary's versions
    --max-reject R       a wave whose rejected fraction exceeds R stops the rollout, with the reasons
    --drain              rejected nodes are drained ('trainready:run/CLASS DATE: <reason>'); without it Slurm is untouched
    --revalidate         first, nodes trainready drained are accepted again and resumed if they pass

The ledger RESULTS/rollout.json (trainready.rollout/1, written atomically after every state change) makes it
resumable: killed mid-rollout, the next invocation with the same nodes and waves skips every finished wave
and picks up the interrupted one's run where it is (runstate.py: nothing submitted again); a stopped wave runs
again (after the operator's repair / --revalidate).  A slurmctld that goes silent inside a wave is waited for
(control/outage.py), as in `cluster run`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from trainready.cluster.options import FleetOptions
from trainready.errors import UsageError

SCHEMA = "trainready.rollout/1"
LEDGER = "rollout.json"
Say = Callable[[str], None]


@dataclass(frozen=True)
class RolloutOptions:
    fleet: FleetOptions
    waves: tuple[int | None, ...]  # wave sizes; None = all the rest
    max_reject: float
    revalidate: bool = False


def parse_waves(text: str) -> tuple[int | None, ...]:
    """'1,8,64,all' → (1, 8, 64, None); 'all' only last; sizes >= 1."""
    out: list[int | None] = []
    parts = [p.strip() for p in text.split(",") if p.strip()]
    for i, p in enumerate(parts):
        if p == "all" and i == len(parts) - 1:
            out.append(None)
        elif p.isdigit() and int(p) >= 1:
            out.append(int(p))
        else:
            raise UsageError(f"--waves {text}: '{p}' is not a wave size (expected N >= 1, and 'all' only last)")
    if not out:
        raise UsageError(f"--waves {text}: expected sizes such as 1,8,64,all")
    return tuple(out)


def plan(nodes: Sequence[str], sizes: Sequence[int | None]) -> list[list[str]]:
    """Consecutive slices of `nodes`; empty waves dropped; every node in exactly one wave."""
    waves, at = [], 0
    for size in sizes:
        take = nodes[at:] if size is None else nodes[at:at + size]
        if take:
            waves.append(list(take))
        at += len(take)
    if at < len(nodes):
        raise UsageError(f"--waves: the waves cover {at} of {len(nodes)} nodes; end them with 'all'")
    return waves


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def load_ledger(results: Path, nodes: list[str], waves: list[list[str]], max_reject: float) -> dict[str, Any]:
    """The existing ledger for this very rollout, or a new one; another rollout's ledger → UsageError."""
    import json

    path = results / LEDGER
    want = {"nodes": nodes, "waves": waves}
    if path.is_file():
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"--results {results}: {LEDGER} unreadable ({exc}); move it away to start over") from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or doc.get("plan") != want:
            raise UsageError(f"--results {results}: {LEDGER} is another rollout's (other nodes or waves); "
                             "use a new --results, or the same nodes and --waves to continue it")
        doc["max_reject"] = max_reject
        return doc  # type: ignore[no-any-return]
    return {"schema": SCHEMA, "plan": want, "max_reject": max_reject, "status": "running", "started_at": _now(),
            "waves": [{"index": i + 1, "nodes": w, "state": "pending"} for i, w in enumerate(waves)], "events": []}


def save(results: Path, doc: dict[str, Any]) -> None:
    from trainready.records import _jsonable
    from trainready.util.atomic import atomic_write_json

    atomic_write_json(results / LEDGER, _jsonable(doc))


def canary_drift(verdict: Any, canary: str, canary_versions: dict[str, str]) -> Any:
    """The wave's verdict with 'drift from the canary' added to every node whose versions differ from it."""
    from trainready.cluster.tasks.layout import NODE_SCHEMA, read_json
    from trainready.manifest import drift

    nodes = []
    for nv in verdict.nodes:
        doc, _ = read_json(Path(nv.record), NODE_SCHEMA) if nv.record else (None, "")
        rows = drift.diff(canary_versions, dict(doc.get("versions") or {})) if doc is not None else []
        if rows and not nv.not_tested and not any(r.startswith("drift") for r in nv.reasons):
            nv = dataclasses.replace(nv, accepted=False, causes=nv.causes + (f"drift {rows[0][0]} from the canary",),
                                     reasons=nv.reasons + (f"drift from the canary: {drift.describe(rows, canary)}",))
        nodes.append(nv)
    return dataclasses.replace(verdict, nodes=tuple(nodes))


def run_wave(opts: RolloutOptions, wave: dict[str, Any], canary: tuple[str, dict[str, str]] | None, say: Say) -> Any:
    from trainready.cluster.repair import ledger
    from trainready.cluster.fleet import run_fleet, write_verdict

    root = opts.fleet.results
    sub = dataclasses.replace(opts.fleet, results=root / "waves" / f"wave-{wave['index']}", nodelist=",".join(wave["nodes"]),
                              count=None, drain=False)
    sub.results.mkdir(parents=True, exist_ok=True)
    verdict = run_fleet(sub, say, attach=unfinished_run(sub.results, say))
    if canary is not None:
        verdict = canary_drift(verdict, *canary)
    write_verdict(verdict, sub.results)
    if opts.fleet.drain:
        from trainready.cluster.judge.guard import plan

        ledger.drain_rejected(root, verdict, say, plan(verdict, opts.fleet.max_drain))
    return verdict


def unfinished_run(wave_results: Path, say: Say) -> Path | None:
    """The wave's run an earlier invocation left unfinished (a state file, no verdict), picked up rather than
    submitted again (runstate.py); None: the wave runs anew."""
    from trainready.cluster import runstate

    try:
        d = runstate.find(wave_results, None)
    except UsageError:
        return None
    if "exit_code" in runstate.read(d):
        return None
    say(f"{wave_results.name}: picking up its unfinished run {d.name}")
    runstate.claim(d)
    return d


def canary_of(results: Path, doc: dict[str, Any]) -> tuple[str, dict[str, str]] | None:
    """(canary node, its recorded versions) once wave 1 is done and accepted its node: its node record is
    the one wave 1's verdict names."""
    from trainready.cluster.tasks.layout import FLEET_SCHEMA, NODE_SCHEMA, read_json

    first = doc["waves"][0]
    if first.get("state") != "done" or not first.get("accepted"):
        return None
    node = first["accepted"][0]
    verdict, _ = read_json(Path(first.get("verdict") or results / "waves" / "wave-1" / "fleet.json"), FLEET_SCHEMA)
    path = next((n.get("record") for n in (verdict or {}).get("nodes") or [] if n.get("node") == node), None)
    rec, _ = read_json(Path(path), NODE_SCHEMA) if path else (None, "")
    return (node, dict(rec.get("versions") or {})) if rec else None


def revalidate(opts: RolloutOptions, doc: dict[str, Any], say: Say) -> None:
    from trainready.cluster.fleet import write_verdict
    from trainready.cluster.repair.ledger import plan_resume
    from trainready.cluster.revalidate import resume_fleet

    ours = list(plan_resume(doc["plan"]["nodes"], opts.fleet.partition).revalidate)
    if not ours:
        say("revalidate: no node of this rollout is drained by trainready")
        return
    sub = dataclasses.replace(opts.fleet, results=opts.fleet.results / "revalidate", nodelist=None, count=None)
    sub.results.mkdir(parents=True, exist_ok=True)
    waves = tuple(opts.fleet.results / "waves" / f"wave-{w['index']}" for w in doc["waves"])
    verdict, _ = resume_fleet(sub, ours, say, waves)  # judged against the wave that rejected them
    if verdict is not None:
        write_verdict(verdict, sub.results)
    back = [n.node for n in verdict.nodes if n.accepted] if verdict else []
    doc["events"].append({"at": _now(), "action": "revalidate", "nodes": ours, "resumed": back})
    save(opts.fleet.results, doc)


def run_rollout(opts: RolloutOptions, nodes: list[str], say: Say) -> dict[str, Any]:
    root = opts.fleet.results
    root.mkdir(parents=True, exist_ok=True)
    doc = load_ledger(root, nodes, plan(nodes, opts.waves), opts.max_reject)
    save(root, doc)
    if opts.revalidate:
        revalidate(opts, doc, say)
    doc["status"] = "running"
    for wave in doc["waves"]:
        k, total = wave["index"], len(doc["waves"])
        if wave["state"] == "done":
            say(f"wave {k}/{total}: done earlier ({len(wave['nodes'])} node(s)); not redone")
            continue
        say(f"wave {k}/{total}{' (canary)' if k == 1 else ''}: {len(wave['nodes'])} node(s): {', '.join(wave['nodes'][:8])}")
        wave.update(state="running", started_at=_now())
        save(root, doc)
        verdict = run_wave(opts, wave, canary_of(root, doc) if k > 1 else None, say)
        rejected = {n.node: list(n.reasons) for n in verdict.nodes if n.rejected}  # not tested: neither
        rate = len(rejected) / max(1, len(wave["nodes"]) - len(verdict.not_tested))
        wave.update(accepted=[n.node for n in verdict.nodes if n.accepted], rejected=rejected, reject_rate=rate,
                    not_tested={n.node: n.not_tested for n in verdict.nodes if n.not_tested},
                    verdict=str(Path(verdict.context["run"]) / "fleet.json"), finished_at=_now())
        if rate > opts.max_reject:
            why = "; ".join(f"{n}: {r[0] if r else '?'}" for n, r in rejected.items())
            wave["state"] = "stopped"
            doc.update(status="stopped", stopped_reason=f"wave {k}: {len(rejected)}/{len(wave['nodes'])} rejected "
                       f"({rate:.0%} > --max-reject {opts.max_reject:.0%}): {why}")
            save(root, doc)
            say(doc["stopped_reason"])
            return doc
        wave["state"] = "done"
        save(root, doc)
        say(f"wave {k}/{total}: {len(wave['accepted'])} accepted, {len(rejected)} rejected ({rate:.0%})")
    doc.update(status="done", finished_at=_now())
    doc.pop("stopped_reason", None)
    save(root, doc)
    return doc
