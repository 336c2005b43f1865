"""Rich tables for a `Plan` (people); the JSON lives in `Plan.to_json`.

Every table fits the console's width (COLUMNS=80 included): with --explain each item's formula
and source are stacked under its name instead of two more columns.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from trainready.plan.explain import FORMULAS
from trainready.plan.planner import Plan
from trainready.plan.quantity import GIB, Quantity, human, percent
from trainready.plan.search import COST_NOTE, Candidate

VERDICT_STYLE = {"fits": "bold green", "tight": "bold yellow", "does not fit": "bold red"}
BOLD = ("memory.allocated_peak", "memory.total", "checkpoint.full")


def _table(title: str, items: tuple[Quantity, ...] | list[Quantity], explain: bool) -> Table:
    t = Table(title=title, title_justify="left", expand=False, show_lines=explain)
    t.add_column("item", overflow="fold")
    t.add_column("value", justify="right", no_wrap=True)
    for q in items:
        label = Text(q.label, style="bold" if q.key in BOLD else "")
        if explain:  # stacked: formula and source under the name, so the table never outgrows the terminal
            if q.formula:
                label.append(f"\n= {q.formula}", style="cyan")
            if q.source:
                label.append(f"\n{q.source}", style="dim")
        t.add_row(label, Text(human(q), style="bold" if q.key in BOLD else ""))
    return t


def _layout_lines(plan: Plan) -> list[str]:
    p, t, lay = plan.inputs.parallel, plan.inputs.training, plan.layout
    if lay.chosen_by == "given":
        how = ""
    elif lay.layouts_fit > 0:
        how = (f" — chosen: the best of {lay.layouts_fit:,} layouts that fit, by the heuristic cost of --search "
               "(give --tp/--pp/--dp/--zero to plan another)")
    else:
        how = (" — no layout fits (searched tp, pp, cp, dp, sp, micro-batch, ZeRO stage, recompute); "
               "shown: plain data parallelism")
    out = [f"layout{how}: {p.world:,} GPUs = tp {p.tp} × pp {p.pp} × cp {p.cp} × dp {p.dp}; ZeRO stage {p.stage}"
           f"{' (distributed optimizer)' if p.distributed_optimizer else ''}"
           f"{'; sequence parallel' if p.sp else ''}; micro-batch {t.micro_batch}; recompute {t.recompute}"]
    m = plan.inputs.microbatches
    gb = (f"global batch {t.global_batch:,} sequence{'s' if t.global_batch != 1 else ''} "
          f"({m} micro-batch{'es' if m != 1 else ''} per step)")
    if lay.global_batch_note:
        gb += f", implied: {lay.global_batch_note}"
    hw = plan.inputs.hardware
    gpu = (f"{plan.gpu_name} ({hw.gpu_mem_gib:g} GiB, {hw.peak_tflops:g} TFLOP/s dense BF16: --gpu-mem-gib, "
           "--peak-tflops)") if plan.gpu_name == "custom" else plan.gpu_name
    out.append(f"{gb}; {t.precision}; attention {t.attention}; GPU {gpu}")
    return out


def print_plan(plan: Plan, console: Console, explain: bool = False) -> None:
    m = plan.inputs.model
    shape = (f"L={m.layers} h={m.hidden} a={m.heads} kv={m.kv} f={m.ffn_size} V={m.vocab} s={m.seq_len}"
             if m.has_shape else "count only (no shape: activations not computed)")
    console.print(f"[bold]trainready plan[/]: {m.name}, {m.total_params:,} parameters ({shape})", highlight=False)
    for line in _layout_lines(plan):
        console.print(line, highlight=False)
    for line in plan.sources:
        console.print(f"[dim]source:[/] {line}", highlight=False)
    for w in plan.warnings:
        console.print(f"[bold yellow]warning:[/] {w}", highlight=False)
    console.print(_table("Memory per GPU", plan.memory.items, explain))
    mem = plan.memory
    note = "" if mem.has_activations else " (model states + allowance only: give a shape for activations)"
    console.print(f"verdict: [{VERDICT_STYLE[mem.verdict]}]{mem.verdict.upper()}[/] — headroom "
                  f"{percent(mem.headroom / mem.capacity)} of {mem.capacity / GIB:,.1f} GiB{note}", highlight=False)
    console.print(_table("Checkpoint", plan.checkpoint, explain))
    if plan.compute:
        console.print(_table("Compute", plan.compute, explain))
    console.print(f"[italic]{plan.advice}[/]", highlight=False)
    if plan.layout.departure:
        console.print(f"[bold yellow]note:[/] {plan.layout.departure}", highlight=False)
    if explain:
        print_formulas(console)


def print_formulas(console: Console) -> None:
    t = Table(title="Formulas and sources", title_justify="left", show_lines=True)
    t.add_column("formula", overflow="fold")
    for what, formula, source in FORMULAS:
        t.add_row(Text.assemble((what, "bold"), "\n", (f"= {formula}", "cyan"), "\n", (source, "dim")))
    console.print(t)


def print_search(found: list[Candidate], total: int, held: tuple[str, ...], console: Console) -> None:
    """The ranked layouts (`found`, the best `total` of them shown), each degree the search varied."""
    if not found:
        console.print("[bold red]no layout fits[/] (searched tp, pp, cp, dp, sp, micro-batch, ZeRO stage and recompute, "
                      "except what was held: more GPUs, a larger GPU or a smaller global batch?)", highlight=False)
        return
    t = Table(title=f"Layouts that fit: best {len(found)} of {total:,}; those that fit before tight ones, then lowest "
              "cost first", title_justify="left",
              box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1), collapse_padding=True)
    for c in ("#", "tp", "pp", "cp", "dp", "sp", "b", "ZeRO", "recompute", "GiB/GPU", "headroom", "cost"):
        t.add_column(c, justify="left" if c in ("sp", "recompute") else "right", no_wrap=True)
    for i, c in enumerate(found, 1):
        room = percent(c.free) + (" tight" if c.verdict == "tight" else "")
        t.add_row(str(i), str(c.tp), str(c.pp), str(c.cp), str(c.dp), "on" if c.sp else "off", str(c.micro_batch),
                  str(c.zero), c.recompute, f"{c.total_bytes / GIB:,.1f}", room, f"{c.cost:.3f}")
    console.print(t)
    fixed = ", ".join(["GPUs", "global batch", "precision", "attention", *held])
    console.print(f"[dim]b = micro-batch; headroom = free share of GPU memory; held fixed: {fixed}.\n{COST_NOTE}.[/]",
                  highlight=False)
