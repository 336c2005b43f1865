"""`trainready compare BASELINE NEW`: is the new image as good as the reference?"""

from __future__ import annotations

import typer
from rich.console import Console

from trainready.commands.common import check_out_path, split_names, write_json_doc


def compare(
    baseline: str = typer.Argument(..., help="The reference record (trainready node --json, or a fleet record)."),
    new: str = typer.Argument(..., help="The record of the new image / driver / node to judge against it."),
    spec: str = typer.Option(None, "--spec", "-s", help="Spec (TOML) whose [compare] table holds the tolerances. "
                             "Default: the [compare] table of the spec BASELINE was held to (recorded in it)."),
    allow_change: list[str] = typer.Option(
        None, "--allow-change", help="Version keys this upgrade is meant to change (torch, cuda, nccl, cudnn, driver, "
        "driver_cuda, python, os, image_digest, packages, packages.NAME); comma-separated or repeated."),
    show_all: bool = typer.Option(False, "--all", help="Also list unchanged and informational metrics."),
    json_path: str = typer.Option(None, "--json", help="Also write the comparison (schema trainready.compare/1); '-' = stdout."),
) -> None:
    """Compare two records: versions that changed, checks that got worse, and each metric's change.

    A metric worse than its tolerance (spec [compare]; default 10% for throughput and time, a
    numerical error's own accuracy bound) is a regression; improvement and noise are shown apart.
    Exit 0: no regression and every changed version declared; 1: a regression, a missing
    metric or check, or an undeclared version change; 2: usage (a planted test record is refused).

    Examples:

    \b
      trainready compare ref-node.json new-node.json
      trainready compare ref-node.json new-node.json \\
          --allow-change torch,nccl --spec node.toml
      trainready compare old/fleet.json new/fleet.json --json cmp.json
    """
    from trainready.compare.result import compare as run_compare
    from trainready.compare.result import print_comparison
    from trainready.compare.sides import read_side
    from trainready.errors import UsageError
    from trainready.spec import load_spec
    from trainready.spec.disabled import compare_disabled
    from trainready.spec.load import VERSION_KEYS, compare_table

    check_out_path(json_path)
    base = read_side(baseline, "BASELINE")
    if spec is not None:
        node_spec, source = load_spec(spec)
        table = node_spec.compare
    else:
        table, source = compare_table(base.spec_compare, f"BASELINE {baseline}")
    allowed = tuple(split_names(allow_change) or ())
    for name in allowed:
        if name.split(".", 1)[0] not in VERSION_KEYS or name.endswith("."):
            raise UsageError(f"--allow-change {name}: expected one of {', '.join(VERSION_KEYS)} or packages.NAME")
    result = run_compare(base, read_side(new, "NEW"), table, source, allowed)
    console = Console(stderr=json_path == "-")
    print_comparison(result, console, show_all)
    for line in compare_disabled(table):  # what the spec switched off, so a PASS does not hide it
        console.print(f"not judged: {line}", highlight=False)
    seen = {m.name for m in result.metrics}  # metric names are the records' own: a typo matches none of them
    for name in sorted(set(table.metrics) - seen):
        console.print(f"not applied: compare.metrics.{name} names no metric of either record", highlight=False)
    if json_path:
        write_json_doc(result.to_json(), json_path, console, "comparison")
    raise typer.Exit(result.exit_code)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)
