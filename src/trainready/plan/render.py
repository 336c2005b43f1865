"""Rich tables for a `Plan` (people); the JSON lives in `Plan.to_json`."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trainready.plan.explain import FORMULAS
from trainready.plan.planner import Plan
from trainready.plan.quantity import Quantity, human
from trainready.plan.search import Candidate

VERDICT_STYLE = {"fits": "bold green", "tight": "bold yellow", "does not fit": "bold red"}


def _table(title: str, items: tuple[Quantity, ...] | list[Quantity], explain: bool) -> Table:
    t = Table(title=title, title_justify="left", expand=False)
    t.add_column("item")
    t.add_column("value", justify="right")
    if explain:
        t.add_column("formula", overflow="fold")
        t.add_column("source", overflow="fold", style="dim")
    for q in items:
        row = [q.label, human(q)] + ([q.formula, q.source] if explain else [])
        style = "bold" if q.key in ("memory.allocated_peak", "memory.total", "checkpoint.full") else None
        t.add_row(*row, style=style)
    return t


def print_plan(plan: Plan, console: Console, explain: bool = False) -> None:
    inp = plan.inputs
    m, p, t = inp.model, inp.parallel, inp.training
    shape = (f"L={m.layers} h={m.hidden} a={m.heads} kv={m.kv} f={m.ffn_size} V={m.vocab} s={m.seq_len}"
             if m.has_shape else "count only (no shape: activations not computed)")
    console.print(f"[bold]trainready plan[/]: {m.name}, {m.total_params:,} parameters ({shape})", highlight=False)
    console.print(
        f"layout: {p.world:,} GPUs = tp {p.tp} × pp {p.pp} × cp {p.cp} × dp {p.dp}; ZeRO stage {p.stage}"
        f"{' (distributed optimizer)' if p.distributed_optimizer else ''}{'; sequence parallel' if p.sp else ''}; "
        f"micro-batch {t.micro_batch}, global batch {t.global_batch}; {t.precision}; recompute {t.recompute}; "
        f"attention {t.attention}; GPU {plan.gpu_name}", highlight=False)
    for line in plan.sources:
        console.print(f"[dim]source:[/] {line}", highlight=False)
    for w in plan.warnings:
        console.print(f"[bold yellow]warning:[/] {w}", highlight=False)
    console.print(_table("Memory per GPU", plan.memory.items, explain))
    v = plan.memory.verdict
    note = "" if plan.memory.has_activations else " (model states + allowance only: give a shape for activations)"
    console.print(f"verdict: [{VERDICT_STYLE[v]}]{v.upper()}[/]{note}")
    console.print(_table("Checkpoint", plan.checkpoint, explain))
    if plan.compute:
        console.print(_table("Compute", plan.compute, explain))
    console.print(f"[italic]{plan.advice}[/]")
    if explain:
        print_formulas(console)


def print_formulas(console: Console) -> None:
    t = Table(title="Formulas and sources", title_justify="left", show_lines=True)
    t.add_column("what", style="bold")
    t.add_column("formula", overflow="fold")
    t.add_column("source", overflow="fold", style="dim")
    for row in FORMULAS:
        t.add_row(*row)
    console.print(t)


def print_search(found: list[Candidate], console: Console) -> None:
    t = Table(title="Layouts that fit (ranked by heuristic cost; lower is better)", title_justify="left")
    for c in ("#", "tp", "pp", "dp", "ZeRO", "recompute", "GiB/GPU", "verdict", "cost"):
        t.add_column(c, justify="right" if c not in ("recompute", "verdict") else "left")
    for i, c in enumerate(found, 1):
        t.add_row(str(i), str(c.tp), str(c.pp), str(c.dp), str(c.zero), c.recompute, f"{c.total_bytes / 2**30:,.1f}",
                  c.verdict, f"{c.cost:.3f}")
    console.print(t if found else "[bold red]no layout fits[/] (more GPUs, a smaller micro-batch or full recompute?)")
