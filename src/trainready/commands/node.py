"""`trainready node`: the four bring-up questions (README) on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from trainready.commands.common import (JSON_HELP, SPEC_HELP, TIMEOUT_HELP, check_out_path, drop_scratch, emit,
                                        finish_workdir, on_interrupt, parse_plants, parse_timeouts, split_names,
                                        workdir)
from trainready.errors import Interrupted
from trainready.records import Level, Report

if TYPE_CHECKING:
    from trainready.checks import Check, CheckContext
    from trainready.spec.model import NodeSpec


def node(
    spec: str = typer.Option(None, "--spec", "-s", help=SPEC_HELP),
    level: Level = typer.Option(Level.STANDARD, "--level", "-l", help="light: versions only; quick: seconds-long checks only; standard: all."),
    only: list[str] = typer.Option(None, "--only", help="Run only these checks (comma-separated or repeated)."),
    skip: list[str] = typer.Option(None, "--skip", help="Leave out these checks."),
    json_path: str = typer.Option(None, "--json", help=JSON_HELP),
    work: str = typer.Option(None, "--workdir", help="Scratch directory (token files, checkpoints). Default: a new temp dir."),
    image_digest: str = typer.Option(
        None, "--image-digest", help="Digest of the image this node runs (sha256:<64 hex>), judged by `versions` "
        "against the spec's software.image_digest. Default: env TRAINREADY_IMAGE_DIGEST, else what the container "
        "runtime exposes (Podman), else unknown."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also print every metric."),
    list_checks: bool = typer.Option(False, "--list", help="List the checks and exit."),
    timeout: list[str] = typer.Option(None, "--timeout", metavar="CHECK=SECONDS", help=TIMEOUT_HELP),
    plant: list[str] = typer.Option(None, "--plant", hidden=True, help="Plant a fault NAME=VALUE (tests)."),
    health_check: bool = typer.Option(False, "--health-check", help="Slurm HealthCheckProgram mode: quick checks "
                                      "(gpus, versions, matmul) in seconds; on failure drain this node with a "
                                      "'trainready:' reason (docs/cluster.md)."),
) -> None:
    """Accept this machine: GPUs visible, compute right, GPUs exchange results, training resumes.

    Runs every registered check (see --list), prints a table and exits 0 when all
    pass (warnings allowed), 1 when any fails, 2 on a usage/config error, 3 for a
    run made with --plant (planted faults: a test, never evidence),
    130 / 143 when interrupted (SIGINT / SIGTERM: every rank stopped, one line,
    partial record with --json, own scratch removed).
    On a CPU spec, GPU-only checks say `skip`; under a GPU spec (gpu.count > 0) a
    machine without usable GPUs FAILS every compute, collective and resume check,
    naming why (never a CPU fallback).  Each check has a limit (--timeout);
    at it, its ranks are stopped and the result names each rank's stage.

    Examples:

    
      trainready node                  # CPU default, 8 gloo ranks
      trainready node --spec example:h200-8x --json node.json
      trainready node --level quick --skip throughput
      trainready node --timeout comm=1200 --timeout resume=1800
      trainready node --spec fleet.toml --image-digest sha256:<64 hex>
      trainready node --health-check   # Slurm HealthCheckProgram
    """
    if health_check:
        from trainready.cluster.health import run_health

        raise typer.Exit(run_health(spec, parse_plants(plant, "node"), typer.echo))
    if list_checks:
        raise typer.Exit(_list(only, skip, level))
    node_spec, source = _early(spec, json_path, work, image_digest)
    from trainready.checks import REGISTRY, CheckContext, select  # imports torch: now the input is known good
    from trainready.checks.options import CheckOptions

    checks = select(split_names(only), split_names(skip), level)
    timeouts = parse_timeouts(timeout, list(REGISTRY))
    faults = parse_plants(plant, "node")
    raise typer.Exit(_in_workdir(work, json_path, lambda scratch: _accept(
        checks, CheckContext(node_spec, scratch, faults, CheckOptions(image_digest=image_digest), timeouts=timeouts),
        source, json_path, verbose)))


def _list(only: list[str] | None, skip: list[str] | None, level: Level) -> int:
    """--list: the checks this selection runs, one a line."""
    from trainready.checks import select  # imports torch: the checks' registry

    for c in select(split_names(only), split_names(skip), level):
        typer.echo(f"{c.name:<16} {c.level.value:<9} {c.title}")
    return 0


def _in_workdir(work: str | None, json_path: str | None, accept: Callable[[Path], int]) -> int:
    """Run `accept` in the scratch folder (--workdir, else a new one): the exit code.  An interrupt writes the
    partial record; an error exit leaves no scratch folder of ours behind; the folder is kept or removed as
    the run ended (finish_workdir)."""
    scratch: Path | None = None
    try:
        scratch = workdir(Path(work) if work else None)
        rc = accept(scratch)
    except Interrupted as exc:
        on_interrupt(exc, scratch, work is not None, json_path)
        raise
    except BaseException:
        drop_scratch(scratch, work is not None)  # an error exit leaves no scratch folder behind
        raise
    finish_workdir(scratch, work is not None, rc, Console(stderr=True))
    return rc


def _early(spec: str | None, json_path: str | None, work: str | None, image_digest: str | None) -> tuple[NodeSpec, str]:
    """What the command line and the spec can get wrong, checked before torch is imported (a typo costs
    ~0.3 s, not the seconds to a minute of importing torch on a loaded host): the spec, every output path
    (--json here; --junit/--prometheus in `evidence_outputs`), the --workdir given, the image digest."""
    import os

    from trainready.probe.container import image_digest as find_digest
    from trainready.spec.load import load_spec

    node_spec, source = load_spec(spec)
    check_out_path(json_path)
    if work:
        workdir(Path(work))
    find_digest(image_digest, os.environ, None)  # a malformed flag or env value: one line, exit 2, before any check
    return node_spec, source


def _accept(checks: list[type[Check]], ctx: CheckContext, source: str, json_path: str | None, verbose: bool) -> int:
    """Run the checks in `ctx.workdir` and report (table, --json, --junit, --prometheus): the exit code."""
    timeouts = dict(ctx.timeouts)
    limits = {c.name: c().timeout_for(ctx) for c in checks}  # recorded: every check's limit, flags applied
    report = _run(checks, ctx, {"spec_source": source, "workdir": str(ctx.workdir), "timeouts_s": limits,
                                **({"timeouts_given": timeouts} if timeouts else {})})
    try:
        return emit(report, json_path, verbose=verbose)
    except Interrupted as exc:  # every check had run: the interrupt came while reporting
        exc.during, exc.partial = exc.during or "the report", exc.partial or report
        raise


def _run(checks: list[type[Check]], ctx: CheckContext, context: dict[str, Any]) -> Report:
    """The checks in order, with a transient progress bar on stderr."""
    from trainready.runner import run_checks

    console = Console(stderr=True)
    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,  # off a terminal it would only leave an empty line behind
    ) as progress:
        task = progress.add_task("starting", total=len(checks))
        return run_checks(
            "node",
            checks,
            ctx,
            on_start=lambda c: progress.update(task, description=c.title or c.name),
            on_done=lambda r: progress.advance(task),
            context=context,
        )


def register(app: typer.Typer) -> None:
    from trainready.commands.common import evidence_outputs  # --junit, --prometheus

    app.command("node")(evidence_outputs(node))
