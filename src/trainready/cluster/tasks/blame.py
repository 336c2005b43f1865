"""Blame in the multi-node collective, as data: which ranks were at fault and which were waiting for them.

Every rank of the cross-node step that sees the collective fail writes RESULTS/cross/ranks/RANK.json
(trainready.fleetrank/1): its node, the stage it was in, what went wrong, and — from the rendezvous store's
heartbeat of every rank (comm/external.py) — `at_fault` (ranks behind the others, or that never joined; the
store's host, rank 0, when the store itself did not answer) and `waiting` (itself, when it is not among
them).  A rank whose own torch.distributed call raised (`own_error`: e.g. gloo could not reach any peer at
process-group set-up) while no peer is behind it is at fault itself, where at least one other rank filed a
report of waiting (the watchdog's "no progress"), and the peers its view calls absent are no evidence against
them (it fails at once, before they have joined); a peer behind it (a lower stage) is still named; the ranks that waited for it are not at fault; when every rank
that reported raised, none is named by its own error (a dead peer makes its survivors raise).  The fleet
verdict rejects the nodes of at-fault ranks only: a rank that reports a peer's silence is waiting, never
blamed, and no message text is parsed.  Wrong elements are blamed on the ranks whose
`wrong_by_rank` count is non-zero in the collective's record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

RANK_SCHEMA = "trainready.fleetrank/1"
STORE_WHY = "the rendezvous store (hosted by rank 0) did not answer"


def rank_file(results: Path, rank: int) -> Path:
    return results / "cross" / "ranks" / f"{rank}.json"


def from_details(details: Mapping[str, Any]) -> dict[str, Any]:
    """{at_fault, waiting, why} from one rank's failure details (comm/external.py:failure)."""
    me = details.get("rank")
    if "store_error" in details:  # rank 0 hosts the store: it is gone, or its host is unreachable (weak:
        at_fault = [] if me == 0 else [0]  # rank 0 may just have left after its own report; tally() checks)
        why = STORE_WHY
    else:
        absent, behind = list(details.get("absent") or []), list(details.get("behind") or [])
        at_fault = sorted({int(k) for k in absent + behind})
        why = "; ".join(w for w in (f"rank(s) {absent} never joined" if absent else "",
                                    f"rank(s) {behind} stopped behind the others" if behind else "") if w)
        if details.get("raised") and not behind and isinstance(me, int):  # its own error; "absent" peers may
            return {"at_fault": [me], "waiting": [], "own_error": True,  # only not have joined yet (it fails at once)
                    "why": f"failed with its own error in '{details.get('stage')}': {details.get('error')}"}
    waiting = [me] if isinstance(me, int) and me not in at_fault else []
    return {"at_fault": at_fault, "waiting": waiting, "why": why}


def wrong_ranks(results: Sequence[Mapping[str, Any]]) -> list[int]:
    """Ranks that produced wrong elements, from the collective's rows (details.rows[].wrong_by_rank)."""
    out: set[int] = set()
    for r in results:
        for row in (r.get("details") or {}).get("rows") or []:
            out |= {k for k, w in enumerate(row.get("wrong_by_rank") or []) if w}
    return sorted(out)


def read_ranks(results: Path) -> list[dict[str, Any]]:
    from trainready.cluster.tasks.layout import read_json

    out = []
    for p in sorted((results / "cross" / "ranks").glob("*.json")):
        doc, _ = read_json(p, RANK_SCHEMA)
        if doc is not None:
            out.append(doc)
    return out


def rank_nodes(known: Mapping[int, str], step_nodes: Sequence[str], per_node: int, world: int) -> dict[int, str]:
    """Global rank → node: from the records (each names its rank and node), the rest by srun's block
    distribution (node i of the step holds ranks i*G .. i*G+G-1) over the nodes no record names."""
    out = dict(known)
    named = set(known.values())
    free = [n for n in step_nodes if n not in named]
    blocks = sorted({k // per_node for k in range(world) if k not in out})
    taken = {k // per_node: n for k, n in known.items()}
    for b in blocks:
        node = taken.get(b) or (free.pop(0) if free else None)
        if node is None:
            continue
        for k in range(b * per_node, min(world, (b + 1) * per_node)):
            out.setdefault(k, node)
    return out


def tally(reports: Sequence[Mapping[str, Any]], wrong: Sequence[int]) -> tuple[dict[int, list[str]], set[int]]:
    """(at-fault rank → what said so, waiting ranks) over every rank's report and the wrong elements."""
    at_fault: dict[int, list[str]] = {k: ["sent wrong elements"] for k in wrong}
    waiting: set[int] = set()
    # A rank that filed its own report as waiting was alive to write it: "the store did not answer" from a
    # slower peer (rank 0 had left after reporting) is no evidence against it.
    reported = {int(r["rank"]) for r in reports if isinstance(r.get("rank"), int) and r.get("waiting")}
    for rep in reports:
        me = rep.get("rank")
        if rep.get("own_error") and not reported:  # every reporting rank raised: none named for its own error
            continue
        for k in rep.get("at_fault") or []:
            if rep.get("why") == STORE_WHY and int(k) in reported:
                continue
            at_fault.setdefault(int(k), []).append(f"rank {me}: {rep.get('why') or 'named'}")
        waiting |= {int(k) for k in rep.get("waiting") or []}
    return at_fault, waiting - set(at_fault)
