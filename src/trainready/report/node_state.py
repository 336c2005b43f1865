"""A node's state from its sweep history (`trainready.sweeptrend/1`), said before anything else on its page and
by `cluster history NODE`: drained by the sweep and why, its strikes, the trend WARNs, its last pass.

The history's entries carry each sweep's verdict, a failure's reason and strike count, the trend WARNs and the
drain that followed (cluster/sweep/trend.py).  A history written before the drain was kept in it is completed
from the sweep's state beside it (RESULTS/sweep/state.json, `trainready.sweepstate/1`: the node's drain).
A pass after the drain means the node was resumed and passed again: back in service.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

STATE_SCHEMA = "trainready.sweepstate/1"


@dataclass(frozen=True)
class NodeState:
    node: str
    status: str  # fail (drained, or its last sweep failed) / warn (unknown, or trend WARNs) / pass
    headline: str  # one line: the state, first
    lines: tuple[str, ...]  # then: why, strikes, trend WARNs, last pass
    drained: Mapping[str, str]  # {"when", "reason"} of the sweep's drain; {} none (or resumed since)
    fails: tuple[Mapping[str, Any], ...]  # each failing sweep: when, why, strikes
    warns: tuple[tuple[str, str], ...]  # (when, the WARN) of every sweep
    last_pass: str


def _runs(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in doc.get("runs") or [] if isinstance(r, Mapping) and r.get("when")]


def drain_of(doc: Mapping[str, Any], path: str) -> dict[str, str]:
    """The sweep's last drain of the node: from its history, else the sweep's state beside it."""
    for r in reversed(_runs(doc)):
        d = r.get("drained")
        if isinstance(d, Mapping) and d.get("when"):
            return {"when": str(d["when"]), "reason": str(d.get("reason", ""))}
    st = Path(path).resolve().parent.parent / "state.json" if path else None  # RESULTS/sweep/{trend/NODE.json,state.json}
    try:
        sd = json.loads(st.read_text(encoding="utf-8")) if st is not None and st.is_file() else {}
    except (OSError, ValueError):
        return {}
    d = ((sd.get("nodes") or {}).get(str(doc.get("node"))) or {}).get("drained") if sd.get("schema") == STATE_SCHEMA else None
    return {"when": str(d["when"]), "reason": str(d.get("reason", ""))} if isinstance(d, Mapping) and d.get("when") else {}


def strikes_of(fail: Mapping[str, Any]) -> str:
    of = fail.get("strikes_of")
    return f"{fail.get('strikes', '?')} of {of}" if of else str(fail.get("strikes", "?"))


def node_state(doc: Mapping[str, Any], path: str = "") -> NodeState:
    runs = _runs(doc)
    node = str(doc.get("node", "?"))
    fails = tuple({"when": str(r["when"]), "why": str(r.get("why") or "no reason recorded"),
                   "strikes": strikes_of(r)} for r in runs if r.get("verdict") == "fail")
    warns = tuple((str(r["when"]), str(w)) for r in runs for w in r.get("trend") or [])
    passes = [str(r["when"]) for r in runs if r.get("verdict") == "pass"]
    last_pass = passes[-1] if passes else ""
    drained = drain_of(doc, path)
    if drained and last_pass > drained["when"]:
        drained = {}  # resumed and passed since: back in service
    last = runs[-1] if runs else {}
    said_pass = f"last pass {_t(last_pass)}" if last_pass else "never passed a sweep"
    if drained:
        status = "fail"
        headline = f"{node}: DRAINED by the sweep on {_t(drained['when'])}"
        lines = [f"why: {drained['reason'] or (fails[-1]['why'] if fails else 'not recorded')}"]
    elif last.get("verdict") == "fail":
        status = "fail"
        headline = f"{node}: FAILING (strike {strikes_of(last)}), not drained"
        lines = [f"why: {last.get('why') or 'no reason recorded'}"]
    elif last.get("verdict") == "pass":
        status = "warn" if last.get("trend") else "pass"
        headline = f"{node}: PASSING" + (" with trend WARNs" if last.get("trend") else "")
        lines = []
    else:
        status, headline, lines = "warn", f"{node}: NOT JUDGED in its last sweep ({last.get('verdict', 'no sweep')})", []
        if last.get("why"):  # e.g. "cannot be judged for 3 sweeps; check train_step: not judged: ..."
            lines.append(f"why: {last['why']} ({last.get('unjudged', '?')} sweep(s) in a row not judged)")
    if fails:
        lines.append(f"failing sweeps: {len(fails)} (" + "; ".join(f"{_t(f['when'])} strike {f['strikes']}"
                                                               for f in fails[-3:]) + ")")
    lines.append(f"trend WARNs: {len(warns)}" + (f" (latest {_t(warns[-1][0])}: {warns[-1][1]})" if warns else ""))
    lines.append(said_pass)
    return NodeState(node, status, headline, tuple(lines), drained, fails, warns, last_pass)


def _t(when: str) -> str:
    return when[:16].replace("T", " ") + " UTC" if when else "?"


def text(state: NodeState) -> list[str]:
    """The state as `cluster history` prints it before the table."""
    return [state.headline, *(f"  {ln}" for ln in state.lines)]


def findings(state: NodeState, path: str = "") -> Sequence[tuple[str, str, str, str]]:
    """The page's findings: the drain or the failing sweep (fail), then each trend WARN (warn)."""
    out = []
    rma = Path(path).resolve().parent.parent.parent / "rma" / state.node if path else Path("RESULTS/rma") / state.node
    remedy = (f"read {rma}/INDEX.md (the RMA evidence); repair, then `trainready cluster resume {state.node}` "
              "re-accepts it")
    if state.status == "fail":
        out.append((f"node {state.node}", "fail", "; ".join([state.headline, *state.lines[:2]]), remedy))
    out += [(f"trend {_t(w)}", "warn", text_, "a figure fell against the node's own past or a counter grew: "
             "watch the next sweeps") for w, text_ in state.warns[-10:]]
    return out
