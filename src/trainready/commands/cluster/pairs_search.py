"""`cluster pairs`' search run and its record printed, for a new search (commands/cluster/pairs.py) and for one
picked up at the round it reached (`cluster pairs --attach`, `cluster attach --results R pairs`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from trainready.commands.cluster.attach import patient
from trainready.commands.common import write_json_doc

if TYPE_CHECKING:
    from trainready.cluster.pairs import search as pr


def attach_pairs(results: Path, controller_wait: float | None, json_path: str | None, console: Console) -> int:
    """The unfinished search under `results` picked up at the round it reached."""
    from trainready.cluster.pairs import search as pr
    from trainready.cluster.pairs import state as pairs_state

    fleet, pairing, gpus, names = pairs_state.resumed(results)
    opts = pr.PairsOptions(fleet, pairing, gpus, bool(pairs_state.read(results).get("fabric")))
    console.print(f"[dim]attaching to the pairs search under {results} ({len(names)} nodes)[/]", highlight=False)
    return search(opts, names, controller_wait, json_path, console)


def search(opts: "pr.PairsOptions", names: list[str], controller_wait: float | None, json_path: str | None,
           console: Console) -> int:
    """The rounds (those this search finished: read back), the record written; the exit code."""
    from trainready.cluster.pairs import search as pr
    from trainready.cluster.pairs import state as pairs_state

    with patient(controller_wait, say := lambda s: console.print(f"[dim]{s}[/]", highlight=False)) as p:
        p.pickup = f"trainready cluster pairs --attach --results {opts.fleet.results}"
        out, why = pr.run_pairs(opts, names, say) if len(names) >= 2 else (_none(opts, names), {})
    doc = pr.to_json(out, opts, names, why, pr.name_switches(out, opts.fleet))
    path = pr.write(doc, opts.fleet.results)
    print_pairs(doc, Console(stderr=json_path == "-"))
    console.print(f"pairs record written to {path}")
    if json_path:
        write_json_doc(doc, json_path, console, "pairs record")
    untested = (doc.get("fabric") or {}).get("not_tested")  # --fabric: a node not tested is never a pass
    rc = 1 if out.culprits or out.undecided or untested else 0  # a named switch is a fault too
    pairs_state.save(opts.fleet.results, exit_code=rc)
    return rc


def _none(opts: "pr.PairsOptions", names: list[str]) -> "pr.PairingOutcome":
    """The outcome of no search (--fabric: fewer than two nodes could test): every node untested."""
    from trainready.cluster.pairs.pairing import find_culprits

    return find_culprits(names, lambda *_: {}, opts.pairing)


def print_pairs(doc: dict, console: Console) -> None:
    from rich.table import Table

    floor = (f"floor {doc['fabric']['floor']}" if doc.get("fabric") else f"floor {doc['floor_gbps']:.3g} GB/s")
    t = Table(title=f"cluster pairs: {doc['nodes_tested']} nodes, {doc['rounds']} round(s) "
                    f"(round-robin: {doc['round_robin_rounds']}); {floor}")
    for col in ("node", "status", "passed/pairs", "evidence"):
        t.add_column(col, overflow="fold")
    style = {"switch": "yellow", "bad": "bold red", "undecided": "yellow", "good": "green"}
    for n in doc["nodes"]:
        t.add_row(n["node"], f"[{style.get(n['status'], '')}]{n['status']}[/]", f"{n['passes']}/{n['passes'] + n['fails']}",
                  n["reason"])
    if doc["nodes"]:
        console.print(t)
    culprits = ", ".join(doc["culprits"]) or "none"
    undecided = f"; undecided: {', '.join(doc['undecided'])}" if doc["undecided"] else ""
    for s in doc.get("switches") or []:
        console.print(f"[bold yellow]{s['why']}[/]", highlight=False)
    if doc.get("fleet_slow"):
        console.print(f"[bold yellow]{doc['fleet_slow']}[/]", highlight=False)
    from trainready.cluster.pairs.fabric import lines

    for line in lines(doc):
        console.print(line, highlight=False)
    console.print(f"culprits: {culprits}{undecided}", highlight=False)
