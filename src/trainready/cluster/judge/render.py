"""The fleet verdict for people: one row per node, the cross-node checks, the robust statistics."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trainready.cluster.judge.verdict import FleetVerdict

STYLE = {"pass": "green", "warn": "yellow", "skip": "dim", "fail": "red", "error": "red"}


def print_verdict(v: FleetVerdict, console: Console) -> None:
    if v.planted:
        console.print(f"[bold yellow]PLANTED FAULTS ({', '.join(f'{k}={x}' for k, x in v.planted.items())}): "
                      "a test run, not evidence about these nodes[/]")
    t = Table(title=f"trainready cluster: {len(v.nodes)} node(s), reference {v.reference}")
    t.add_column("node")
    t.add_column("verdict")
    t.add_column("job")
    t.add_column("reasons / warnings", overflow="fold")
    for n in v.nodes:
        verdict = "[yellow]NOT TESTED[/]" if n.not_tested else "[green]ACCEPT[/]" if n.accepted else "[red]REJECT[/]"
        text = n.not_tested or ("; ".join(n.reasons) if n.reasons else ("; ".join(n.warnings) or "all checks passed"))
        t.add_row(n.node, verdict, str(n.slurm.get("job_id", "")), text)
    console.print(t)
    if v.cross:
        c = Table(title="cross-node checks")
        c.add_column("check")
        c.add_column("status")
        c.add_column("result", overflow="fold")
        for r in v.cross:
            c.add_row(r.name, f"[{STYLE[r.status.value]}]{r.status.value.upper()}[/]", r.message)
        console.print(c)
    if v.context.get("baseline"):
        peers = v.context.get("baseline_nodes") or []
        console.print(f"judged against the run {v.context['baseline']}: its reference and the figures of its "
                      f"{len(peers)} other node(s) ({', '.join(peers[:8]) or 'none'})", highlight=False)
    for s in v.stats:
        judged = f"floor {s.floor:.4g}, robust bound {s.bound:.4g}" if s.judged else "too few figures to judge"
        judged = f"{judged}; {s.flags_nothing}" if s.flags_nothing else judged
        console.print(f"{s.metric}: {s.n} figure(s), median {s.median:.4g} {s.unit}, MAD {s.mad:.3g}; {judged}")
    mismatch = (v.context.get("launcher") or {}).get("pyxis_mismatch")  # cluster/control/launcher.py: Pyxis's own rule
    if mismatch:
        console.print(f"[bold red]{mismatch}[/]", highlight=False)
    for imp in (v.context.get("job_impact") or {}).values():  # sacct: the jobs its owners should re-check
        console.print(imp.get("text", ""), highlight=False, markup=False)
    for s in v.guard.get("switches") or []:  # a leaf switch named as the cause (switches.py)
        console.print(f"[bold yellow]{s['why']}[/]", highlight=False)
    if v.guard.get("switches_unchecked"):  # the switch rule could not run: said, so a drain is read knowing it
        console.print(v.guard["switches_unchecked"], style="yellow", highlight=False, markup=False)
    if v.guard.get("fleet_wide"):  # with or without --drain: the one line that says the cause is not the nodes'
        console.print(f"[bold yellow]{v.guard['why']}[/]")
    drain = ", ".join(v.rejected) or "none"
    status = "FAIL" if v.exit_code else "PASS"
    accepted = len(v.nodes) - len(v.rejected) - len(v.not_tested)
    untested = f", {len(v.not_tested)} not tested ({', '.join(v.not_tested)})" if v.not_tested else ""
    console.print(f"fleet: {status}: {accepted}/{len(v.nodes)} accepted{untested}; drain list: {drain}")
