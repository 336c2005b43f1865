"""`trainready node`: the four bring-up questions (README) on this machine."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from trainready.commands.common import (JSON_HELP, SPEC_HELP, TIMEOUT_HELP, check_out_path, drop_scratch, emit,
                                        finish_workdir, on_interrupt, parse_plants, parse_timeouts, split_names,
                                        workdir)
from trainready.commands._node_start import IN_PROCESS_LATER, import_behind, start_forkserver
from trainready.errors import Interrupted
from trainready.records import Level, Report

if TYPE_CHECKING:
    from trainready.checks import Check, CheckContext
    from trainready.spec.model import NodeSpec


HEALTH_HELP = ("Slurm HealthCheckProgram mode, passive: NVML and the kernel log only (GPU count and health, XIDs, ECC "
               "and row-remap counters, PCIe link, slowdown), no torch, ~1 s; on failure drain this node with a "
               "'trainready:health/hw DATE:' reason (docs/repair.md).")
ACTIVE_HELP = ("With --health-check: the seconds-long compute checks instead (gpus, versions, matmul; imports torch, "
               "~6 s on an H100).")
STATE_HELP = ("With --health-check: the last reading, for counters and XIDs since (default: env "
              "TRAINREADY_HEALTH_STATE, else /var/lib/trainready/health-state.json).")


def node(
    spec: str = typer.Option(None, "--spec", "-s", help=SPEC_HELP),
    level: Level = typer.Option(Level.STANDARD, "--level", "-l", help="light: versions only; quick: seconds-long checks only; standard: all but the burn-in; burn-in: all, then the burn-in (--duration)."),
    duration: str = typer.Option(None, "--duration", metavar="TIME", help="Length of the burn-in (15m, 90s, 1h; "
                                 "default: the spec's burnin.duration_s, 15 min): every GPU under sustained GEMM, "
                                 "HBM copy and all_reduce, judged over time and by its error counters (docs/burn-in.md)."),
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
    health_check: bool = typer.Option(False, "--health-check", help=HEALTH_HELP),
    active: bool = typer.Option(False, "--active", help=ACTIVE_HELP),
    health_state: str = typer.Option(None, "--health-state", metavar="PATH", help=STATE_HELP),
) -> None:
    """Accept this machine: GPUs visible, compute right, GPUs exchange results, training resumes.

    Runs every registered check (see --list), prints a table and exits 0 when all
    pass (warnings allowed), 1 when any fails, 2 on a usage/config error, 3 for a
    run made with --plant (planted faults: a test, never evidence),
    130 / 143 when interrupted (SIGINT / SIGTERM: every rank stopped, one line,
    partial record with --json, own scratch removed).
    With no --spec, the GPUs NVML sees are judged against an automatic spec (their count, their
    model's datasheet peaks, NCCL; `trainready spec show auto` prints it); without GPUs, the CPU
    default (example:cpu-default).  On a CPU spec, GPU-only checks say `skip`; under a GPU spec (gpu.count > 0) a
    machine without usable GPUs FAILS every compute, collective and resume check,
    naming why (never a CPU fallback).  Each check has a limit (--timeout);
    at it, its ranks are stopped and the result names each rank's stage.

    Examples:

    
      trainready node                  # the GPUs NVML sees, else the CPU default
      trainready node --spec example:h200-8x --json node.json
      trainready node --level quick --skip throughput
      trainready node --timeout comm=1200 --timeout resume=1800
      trainready node --spec fleet.toml --image-digest sha256:<64 hex>
      trainready node --level burn-in --duration 15m --json node.json
      trainready node --only burnin --duration 5m   # the burn-in alone
      trainready node --health-check   # Slurm HealthCheckProgram: passive, ~1 s
    """
    if health_check:
        raise typer.Exit(_health(spec, active, health_state, parse_plants(plant, "node"), json_path))
    if list_checks:
        raise typer.Exit(_list(split_names(only), split_names(skip), level))
    node_spec, source = _early(spec, json_path, work, image_digest)
    from trainready.burnin import parse_duration

    burnin_s = parse_duration(duration) if duration is not None else None
    raise typer.Exit(_node(NodeRun(node_spec, source, level, split_names(only), split_names(skip), json_path, work,
                                   image_digest, verbose, tuple(timeout or ()), tuple(plant or ()), burnin_s)))


@dataclass(frozen=True)
class NodeRun:
    """What `trainready node` runs, once the command line and the spec are known good (`_early`)."""

    spec: NodeSpec  # the spec this machine is held to
    source: str  # where it came from (path or example:NAME), recorded
    level: Level  # --level
    only: list[str] | None  # --only, split at commas
    skip: list[str] | None  # --skip, split at commas
    json_path: str | None  # --json (checked writable up front)
    work: str | None  # --workdir: the user's folder, never removed; None = our own scratch folder
    image_digest: str | None  # --image-digest (checked up front)
    verbose: bool  # --verbose: every metric in the table
    timeouts: tuple[str, ...]  # --timeout CHECK=SECONDS, as given
    plants: tuple[str, ...]  # --plant NAME=VALUE, as given (tests)
    burnin_s: float | None = None  # --duration in seconds; None = the spec's burnin.duration_s


def _health(spec: str | None, active: bool, state: str | None, plants: dict[str, str], json_path: str | None) -> int:
    if active:
        from trainready.cluster.health.active import run_health

        return run_health(spec, plants, typer.echo)
    from trainready.cluster.health.passive import run_passive

    want, fabric = None, None
    if spec:
        from trainready.spec import load_spec

        loaded = load_spec(spec)[0]
        want, fabric = loaded.gpu.count, loaded.fabric
    if json_path:
        check_out_path(json_path)
    return run_passive(want, state, plants, typer.echo, json_path, fabric)


def _list(only: list[str] | None, skip: list[str] | None, level: Level) -> int:
    from trainready.checks import select  # imports torch: the checks' registry

    for c in select(only, skip, level):
        typer.echo(f"{c.name:<16} {c.level.value:<9} {c.title}")
    return 0


def _node(run: NodeRun) -> int:
    """The checks in a scratch folder (our own is removed on any error exit), the report: the exit code."""
    start_forkserver(run.only, run.skip, run.level)
    from trainready.checks import REGISTRY, CheckContext, select  # imports torch: now the input is known good
    from trainready.suite.options import CheckOptions

    checks = select(run.only, run.skip, run.level)
    if run.burnin_s is not None and "burnin" not in {c.name for c in checks}:
        from trainready.errors import UsageError

        raise UsageError("--duration: only the burn-in uses it (--level burn-in, or --only burnin)")
    timeouts = parse_timeouts(list(run.timeouts), list(REGISTRY))
    faults = parse_plants(list(run.plants), "node")
    given = run.work is not None
    scratch: Path | None = None
    try:
        scratch = workdir(Path(run.work) if run.work else None)
        ctx = CheckContext(run.spec, scratch, faults, CheckOptions(image_digest=run.image_digest, burnin_s=run.burnin_s,
                                                            level=run.level),
                           timeouts=timeouts)
        rc = _accept(checks, ctx, run.source, run.json_path, run.verbose)
    except Interrupted as exc:
        on_interrupt(exc, scratch, given, run.json_path)
        raise
    except BaseException:
        drop_scratch(scratch, given)  # an error exit leaves no scratch folder behind
        raise
    finish_workdir(ctx.workdir, given, rc, Console(stderr=True))
    return rc


def _early(spec: str | None, json_path: str | None, work: str | None, image_digest: str | None) -> tuple[NodeSpec, str]:
    """What the command line and the spec can get wrong, checked before torch is imported (a typo costs
    ~0.3 s, not the seconds to a minute of importing torch on a loaded host): the spec, every output path
    (--json here; --junit/--prometheus in `evidence_outputs`), the --workdir given, the image digest."""
    import os

    from trainready.manifest.container import image_digest as find_digest
    from trainready.spec.load import load_spec

    node_spec, source = load_spec(spec or "auto")  # no --spec: the GPUs NVML sees, else the CPU default
    check_out_path(json_path)
    if work:
        workdir(Path(work))
    find_digest(image_digest, os.environ, None)  # a malformed flag or env value: one line, exit 2, before any check
    if spec is None:  # the first line (once the input is known good) says what the machine is judged against
        typer.echo(f"trainready node: spec {source}", err=json_path == "-")
    return node_spec, source


def _accept(checks: list[type[Check]], ctx: CheckContext, source: str, json_path: str | None, verbose: bool) -> int:
    """Run the checks in `ctx.workdir` and report (table, --json, --junit, --prometheus): the exit code."""
    timeouts = dict(ctx.timeouts)
    if any(c.launches_ranks for c in checks):  # the forkserver imports torch while in-process checks run
        from trainready.ranks.forkserver import RESUME_RANKS
        from trainready.ranks.launch import warm_up

        warm_up((RESUME_RANKS,) if any(c.name == "resume" for c in checks) else ())
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
    from trainready.suite.runner import run_checks

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
        ctx.progress = _progress(console, lambda text: progress.update(task, description=text))
        later = [IN_PROCESS_LATER] if any(c.name == "train_step" for c in checks) else []

        def start(c: type[Check]) -> None:
            progress.update(task, description=c.title or c.name)
            if later and c.launches_ranks:  # this process mostly waits on the ranks now
                import_behind(later.pop())

        return run_checks(
            "node",
            checks,
            ctx,
            on_start=start,
            on_done=lambda r: progress.advance(task),
            context=context,
        )


# Off a terminal (a log file, a Slurm job's output) a long check's progress is one line per this many seconds.
LOG_EVERY_S = 60.0


def _progress(console: Console, update: Callable[[str], None]) -> Callable[[str], None]:
    """Where a long check says where it is (CheckContext.progress): the bar's text on a terminal; else a line on
    stderr at most every LOG_EVERY_S seconds (the burn-in's time left and figures in a job's log)."""
    import time

    if console.is_terminal:
        return update
    last = [time.monotonic()]

    def log(text: str) -> None:
        if time.monotonic() - last[0] >= LOG_EVERY_S:
            last[0] = time.monotonic()
            console.print(text, highlight=False, soft_wrap=True)

    return log


def register(app: typer.Typer) -> None:
    from trainready.commands.common import evidence_outputs  # --junit, --prometheus

    app.command("node")(evidence_outputs(node))
