"""`trainready comm`: collectives' correctness and bandwidth, nccl-tests style."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

from trainready.comm.defaults import SWEEP_DEFAULTS
from trainready.commands.common import JSON_HELP, SPEC_HELP, check_out_path, emit, parse_plants, split_names
from trainready.errors import UsageError
from trainready.hardware.collectives import human
from trainready.records import PLANTED_EXIT, Outcome, Report

if TYPE_CHECKING:
    from trainready.comm.run import CommOptions
    from trainready.ranks.env import ExternalRank
    from trainready.spec.model import NodeSpec

# Per-backend defaults, read from the one table (comm/defaults.py) by the options and their --help.
GPU, CPU = SWEEP_DEFAULTS["nccl"], SWEEP_DEFAULTS["gloo"]


def _default(what: str, gpu: object, cpu: object) -> str:
    """'Default G on GPUs, C on CPU.' for --help."""
    return f"{what}Default {gpu} on GPUs, {cpu} on CPU."


def comm(
    min_bytes: str = typer.Option(None, "--min-bytes", "-b", help=_default("Smallest size S (8, 1K, 64M, 1G; K/M/G = 1024^k). ", human(GPU.comm_sizes.min_bytes), human(CPU.comm_sizes.min_bytes))),
    max_bytes: str = typer.Option(None, "--max-bytes", "-e", help=_default("Largest size S. ", human(GPU.comm_sizes.max_bytes), human(CPU.comm_sizes.max_bytes))),
    factor: int = typer.Option(None, "--factor", "-f", help=_default("Multiply the size by this each step. ", GPU.comm_sizes.factor, CPU.comm_sizes.factor)),
    ops: list[str] = typer.Option(None, "--ops", help="Ops to run (comma-separated): all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, sendrecv. Default: all."),
    dtype: list[str] = typer.Option(None, "--dtype", "-d", help="Data type(s): float, bfloat16, half, double, int32. Default float."),
    warmup: int = typer.Option(None, "--warmup", "-w", help=_default("Untimed ops before each timed loop. ", GPU.warmup, CPU.warmup)),
    iters: int = typer.Option(None, "--iters", "-n", help=_default("Timed ops per size (back to back, one sync at the end). ", GPU.iters, CPU.iters)),
    world_size: int = typer.Option(None, "--world-size", help="Local ranks. Default: the spec's comm.world_size, else one per GPU, else 8 gloo ranks."),
    backend: str = typer.Option("auto", "--backend", help="nccl, gloo, or auto (nccl when GPUs are visible)."),
    timeout: float = typer.Option(None, "--timeout", help="Seconds one step (an op at one size) may take before its ranks count as hung. Default: the spec's comm.timeout_s."),
    step_budget: float = typer.Option(None, "--step-budget", help=_default("Shorten a step's timed loop to about this many seconds (at least 1 op). 0 = never. ", f"{GPU.step_budget_s:g}", f"{CPU.step_budget_s:g}")),
    avg_from: str = typer.Option(None, "--avg-from", help="Judge the mean busbw over sizes >= this (at most the largest size run). Default: max size / 8."),
    pair_bytes: str = typer.Option(None, "--pair-bytes", help=_default("Message size of the pairwise straggler matrix. ", human(GPU.pair_bytes), human(CPU.pair_bytes))),
    launcher: str = typer.Option("auto", "--launcher", help="auto: be one rank of torchrun/srun when their env is set, else spawn local ranks; local; external."),
    spec: str = typer.Option(None, "--spec", "-s", help=SPEC_HELP),
    json_path: str = typer.Option(None, "--json", help=JSON_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only the verdict table, not the nccl-tests tables."),
    plant: list[str] = typer.Option(None, "--plant", hidden=True, help="Plant a fault comm.NAME=VALUE (tests)."),
) -> None:
    """Collectives like nccl-tests: correctness (#wrong elements) and algbw/busbw per op and size.

    S, algbw = S/t and busbw = algbw x factor follow nccl-tests doc/PERFORMANCE.md; GB = 1e9 B.
    Any wrong element fails the op; an op whose mean busbw (sizes >= --avg-from) is below
    comm.min_fraction x comm.expected_busbw_gbps fails; with no expectation it warns.
    A pairwise send/recv matrix names a slow rank or link.  Exit 0 pass/warn, 1 fail, 2 usage, 3 a --plant test run.

    Examples:

    \b
      trainready comm                  # CPU: 8 gloo ranks, 1K..64M
      trainready comm --spec example:h200-8x -b 1M -e 8G --json comm.json
      # one rank per Slurm task:
      srun -N2 --ntasks-per-node=8 trainready comm --ops all_reduce
    """
    from trainready.comm.run import tables
    from trainready.spec import load_spec

    check_out_path(json_path)
    node_spec, source = load_spec(spec)
    run = _build(CommArgs(min_bytes, max_bytes, factor, tuple(ops or ()), tuple(dtype or ()), warmup, iters,
                          world_size, backend, timeout, step_budget, avg_from, pair_bytes, launcher,
                          tuple(plant or ())), node_spec, source, json_path)
    swept = _sweep_as_rank(run) if run.ext is not None else _sweep_here(run)
    if swept.data is not None and not quiet:
        out = sys.stderr if json_path == "-" else sys.stdout
        for t in tables(swept.data, run.opts, node_spec.comm.expected_sizes_bytes):  # the verdict's average
            out.write(f"# {t.op}  ({t.dtype}, {run.opts.world_size} ranks, {run.opts.backend}; "
                      f"S = {_buffer(t.op)})\n{t.text()}\n")
        out.flush()
    raise typer.Exit(emit(swept.report, json_path))


@dataclass(frozen=True)
class CommArgs:
    """The command line as given; None = the spec's or the backend's default (comm/defaults.py)."""

    min_bytes: str | None
    max_bytes: str | None
    factor: int | None
    ops: tuple[str, ...]
    dtype: tuple[str, ...]
    warmup: int | None
    iters: int | None
    world_size: int | None
    backend: str
    timeout: float | None
    step_budget: float | None
    avg_from: str | None
    pair_bytes: str | None
    launcher: str
    plant: tuple[str, ...]


@dataclass(frozen=True)
class CommRun:
    """One `trainready comm` run: the sweep's options, who launches the ranks, and what the record says."""

    opts: CommOptions
    ext: ExternalRank | None  # this process is one rank of torchrun/srun; None: spawn local ranks
    spec: NodeSpec
    source: str
    planted: dict[str, str]
    json_path: str | None

    @property
    def context(self) -> dict[str, Any]:
        out: dict[str, Any] = {"spec_source": self.source, "launcher": self.ext.source if self.ext else "local"}
        if self.planted:
            out["planted"] = self.planted  # a test record: capped at WARN (records.Report.status)
        return out


@dataclass(frozen=True)
class Swept:
    """The record of a sweep and rank 0's data (None when the sweep failed)."""

    report: Report
    data: dict[str, Any] | None


def _build(args: CommArgs, node_spec: NodeSpec, source: str, json_path: str | None) -> CommRun:
    """Validate the command line against the spec and this machine; the sweep's options."""
    from trainready.comm.run import CommOptions, sweep_faults
    from trainready.devices.world import local_world
    from trainready.hardware.collectives import dtype_name, op_names, parse_size, size_steps
    from trainready.ranks.env import detect

    if args.launcher not in ("auto", "local", "external"):
        raise UsageError(f"--launcher: expected auto, local or external, got '{args.launcher}'")
    if args.backend not in ("auto", "nccl", "gloo"):
        raise UsageError(f"--backend: expected auto, nccl or gloo, got '{args.backend}'")
    ext = detect() if args.launcher != "local" else None
    if args.launcher == "external" and ext is None:
        raise UsageError("--launcher external: no torchrun (RANK, WORLD_SIZE) or Slurm (SLURM_PROCID, "
                         "SLURM_NTASKS > 1) env")
    n, be = local_world(node_spec, args.backend, None if ext else args.world_size)
    n = ext.world_size if ext is not None else n  # the launcher's world (may span nodes)
    d = SWEEP_DEFAULTS[be]
    timeout_s = float(args.timeout if args.timeout is not None else node_spec.comm.timeout_s)
    if timeout_s <= 0:
        raise UsageError(f"--timeout: expected seconds > 0, got {timeout_s:g}")
    sizes = size_steps(parse_size(args.min_bytes, "--min-bytes") if args.min_bytes else d.comm_sizes.min_bytes,
                       parse_size(args.max_bytes, "--max-bytes") if args.max_bytes else d.comm_sizes.max_bytes,
                       args.factor if args.factor is not None else d.comm_sizes.factor)
    budget = float(args.step_budget if args.step_budget is not None else d.step_budget_s)
    warmup = int(args.warmup if args.warmup is not None else d.warmup)
    iters = int(args.iters if args.iters is not None else d.iters)
    if warmup < 0 or iters < 1 or budget < 0:
        raise UsageError("--warmup must be >= 0, --iters >= 1 and --step-budget >= 0")
    avg_floor = _avg_floor(args.avg_from, sizes, node_spec)
    planted = parse_plants(list(args.plant), "comm")
    opts = CommOptions(
        ops=op_names(split_names(list(args.ops))), sizes=sizes,
        dtypes=[dtype_name(x) for x in (split_names(list(args.dtype)) or ["float"])],
        warmup=warmup, iters=iters, world_size=n, backend=be, timeout_s=timeout_s, avg_floor=avg_floor,
        pair_bytes=parse_size(args.pair_bytes, "--pair-bytes") if args.pair_bytes else d.pair_bytes,
        pair_iters=d.pair_iters, step_budget_s=budget or None, faults=sweep_faults(planted),
        # comm.efficiency's reference is measured when the spec judges it (docs/comm.md)
        eff_loops=d.eff_loops if node_spec.comm.min_fraction_efficiency is not None else 0,
        eff_min_loop_s=d.eff_min_loop_s, cpu_bind=be == "gloo" and ext is None,  # srun/torchrun bind their own
        eff_from=node_spec.comm.expected_sizes_bytes[0] if node_spec.comm.expected_sizes_bytes else avg_floor,
    )
    return CommRun(opts, ext, node_spec, source, planted, json_path)


def _avg_floor(avg_from: str | None, sizes: list[int], node_spec: NodeSpec) -> int | None:
    """--avg-from in bytes; refused where the spec fixes the averaging sizes or nothing would be averaged."""
    from trainready.hardware.collectives import human, parse_size

    avg_floor = parse_size(avg_from, "--avg-from") if avg_from else None
    if avg_floor is not None and node_spec.comm.expected_sizes_bytes:
        lo, hi = node_spec.comm.expected_sizes_bytes
        raise UsageError(f"--avg-from {avg_from}: the spec fixes the averaging sizes (comm.expected_sizes_bytes = "
                         f"[{lo}, {hi}], where the reference measured); drop --avg-from or that key")
    if avg_floor is not None and avg_floor > sizes[-1]:
        raise UsageError(f"--avg-from {avg_from}: larger than the largest size run, {human(sizes[-1])}; "
                         "nothing would be averaged")
    return avg_floor


def _sweep_here(run: CommRun) -> Swept:
    """Spawn the local ranks and judge rank 0's data."""
    from trainready.comm.run import build_report, launch_failure, sweep_local_again

    res, secs, data = sweep_local_again(run.opts, run.spec, run.source)  # a timing below its floor: measured again
    fail = None if res.ok else launch_failure(res, run.opts)
    return Swept(build_report(run.opts, run.spec, run.source, data, fail, secs, run.context), data)


def _sweep_as_rank(run: CommRun) -> Swept:
    """Be one rank of torchrun/srun.  Rank 0 judges and returns the record; any other rank exits here (0, or
    PLANTED_EXIT for a planted run); a failed sweep exits every rank, rank 0 after writing the FAIL record."""
    from trainready.comm.external import leave
    from trainready.comm.run import build_report, sweep_external, timing_only

    ext = run.ext
    assert ext is not None
    t0 = time.perf_counter()

    def report_failure(fail: Outcome) -> int:
        """Rank 0 prints and writes the FAIL record; any other rank says one line on stderr."""
        if ext.rank != 0:
            sys.stderr.write(f"trainready comm: FAIL: {fail.message}\n")
            return PLANTED_EXIT if run.planted else 1
        rep = build_report(run.opts, run.spec, run.source, None, fail, time.perf_counter() - t0, run.context)
        return emit(rep, run.json_path)

    data, fail = sweep_external(run.opts, ext, report_failure, timing_only(run.opts, run.spec, run.source))
    if fail is not None:
        try:
            code = report_failure(fail)
        except UsageError as exc:  # e.g. --json into a missing directory: one line, exit 2
            sys.stderr.write(f"trainready: error: {exc}\n")
            code = exc.exit_code
        leave(ext, code)
    if ext.rank != 0:
        raise typer.Exit(PLANTED_EXIT if run.planted else 0)  # only rank 0 prints and writes the record
    return Swept(build_report(run.opts, run.spec, run.source, data, None, time.perf_counter() - t0, run.context), data)


def _buffer(op: str) -> str:
    from trainready.hardware.collectives import OPS

    return OPS[op].buffer


def register(app: typer.Typer) -> None:
    from trainready.commands.common import evidence_outputs  # --junit, --prometheus

    app.command("comm")(evidence_outputs(comm))
