"""`trainready resume`: the resume-equivalence protocol, standalone."""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from trainready.commands.common import (JSON_HELP, SPEC_HELP, check_out_path, drop_scratch, emit, finish_workdir,
                                        on_interrupt, parse_plants, workdir)
from trainready.errors import DataError, GpuUnusable, Interrupted, UsageError
from trainready.records import Report
from trainready.resume.options import CompatOptions, ResumeOptions

if TYPE_CHECKING:
    from trainready.resume.protocol import ProtocolConfig
    from trainready.spec.model import NodeSpec


def resume(
    data: str = typer.Option(None, "--data", help="Your token data: a Megatron prefix (X.idx + X.bin), a flat .bin or .npy. Default: a sample corpus written for the run."),
    dtype: str = typer.Option(None, "--dtype", help="Token dtype of a flat .bin (uint16, uint32); Megatron files carry their own."),
    directory: str = typer.Option(None, "--dir", help="Where checkpoints go, e.g. the shared filesystem. A new resume-* subdirectory per run is kept as evidence."),
    ranks: int = typer.Option(None, "--ranks", help="Data-parallel ranks (gloo on CPU, one per GPU with NCCL). Default: spec resume.ranks."),
    steps: int = typer.Option(None, "--steps", help="Steps of the uninterrupted run A (default 100)."),
    checkpoint_step: int = typer.Option(None, "--checkpoint-step", help="Step at which B saves and C resumes (default 50)."),
    atol: float = typer.Option(None, "--atol", help="Absolute tolerance, declared before the run (default 0 = bitwise)."),
    rtol: float = typer.Option(None, "--rtol", help="Relative tolerance, declared before the run (default 0 = bitwise)."),
    mode: str = typer.Option(None, "--mode", help="ddp or fsdp (FSDP2 fully_shard)."),
    preset: str = typer.Option(None, "--preset", help="Model preset: tiny (CPU default) or small (GPU default)."),
    batch_size: int = typer.Option(None, "--batch-size", help="Sequences per rank per step (default 8)."),
    vocab_size: int = typer.Option(0, "--vocab-size", help="Model vocabulary (override). Default: sized from the data: the largest id the run reads, rounded up to a multiple of 64."),
    precision: str = typer.Option("auto", "--precision", help="auto (bf16 autocast on GPU, fp32 on CPU), fp32 or bf16."),
    deterministic: bool = typer.Option(True, "--deterministic/--nondeterministic", help="Apply determinism settings (needed for a bitwise verdict on GPU)."),
    cpu: bool = typer.Option(False, "--cpu", help="Run on the CPU with gloo even if GPUs are present."),
    throughput: bool = typer.Option(False, "--throughput", help="Also measure checkpoint save/load GB/s vs a raw write+fsync in --dir."),
    spec: str = typer.Option(None, "--spec", "-s", help=SPEC_HELP),
    json_path: str = typer.Option(None, "--json", help=JSON_HELP),
    save_only: str = typer.Option(None, "--save-only", help="Checkpoint compatibility, old environment: train to --checkpoint-step, save into DIR with a manifest of this environment and the continuation to --steps, then stop."),
    load_from: str = typer.Option(None, "--load-from", help="Checkpoint compatibility, new environment: load DIR (from --save-only elsewhere), continue it and compare with the saver's continuation; names every difference."),
    plant: list[str] = typer.Option(None, "--plant", hidden=True, help="Plant a fault NAME=VALUE (tests)."),
) -> None:
    """Does training resume? Train A 0→N; train B 0→K and save; start a FRESH process C
    that loads K and trains to N; C must equal A in every parameter, optimizer state,
    step, LR, data position, RNG state and per-step loss (bitwise by default).

    Exit 0 pass, 1 mismatch/corrupt checkpoint, 2 bad input, 3 a --plant test run (never evidence).

    Examples:

    \b
      trainready resume                # CPU, tiny model, sample corpus
      trainready resume --data /data/tok/my_text_document \\
          --dir /shared/ckpt --ranks 8
      trainready resume --ranks 2 --mode fsdp --json resume.json
      trainready resume --save-only /shared/compat     # old image
      trainready resume --load-from /shared/compat     # new image
    """
    from trainready.commands.resume_compat import run_compat
    from trainready.spec import load_spec

    check_out_path(json_path)
    node_spec, source = load_spec(spec)
    faults = parse_plants(plant, "resume")
    given = {"ranks": ranks, "steps": steps, "checkpoint_step": checkpoint_step, "atol": atol, "rtol": rtol,
             "mode": mode, "preset": preset, "batch_size": batch_size}
    r = dataclasses.replace(node_spec.resume, **{k: v for k, v in given.items() if v is not None})
    node_spec = dataclasses.replace(node_spec, resume=r)
    run = ResumeOptions(data=data, dtype=dtype, cpu=cpu, precision=precision, deterministic=deterministic,
                        vocab_size=vocab_size, standalone=True)
    if save_only or load_from:
        compat = CompatOptions(save_only=Path(save_only) if save_only else None,
                               load_from=Path(load_from) if load_from else None, resume=run, atol=atol, rtol=rtol)
        raise typer.Exit(run_compat(node_spec, source, compat, faults, json_path))
    wd = workdir(Path(directory) if directory else None, flag="--dir")
    run = dataclasses.replace(run, directory=wd)
    protocol = _prepare(node_spec, run, faults, wd, keep=directory is not None)
    raise typer.Exit(_run(node_spec, source, run, protocol, faults, throughput, json_path,
                          keep=directory is not None))


def _prepare(node_spec: NodeSpec, run: ResumeOptions, faults: dict[str, str], wd: Path,
             keep: bool) -> ProtocolConfig | None:
    """Validate the data in this process first: a bad file is bad input (exit 2), not a failed run.  The run
    prepared here is the one the check runs (prepared once); None where the GPUs are unusable (the check itself
    fails with the reason, in the record).  `keep`: the --dir is the user's, not our scratch folder."""
    from trainready.resume.setup import prepare

    try:
        return prepare(node_spec.resume, run, faults, wd, node_spec)
    except GpuUnusable:
        return None
    except (DataError, UsageError) as exc:  # bad data or a bad flag value: exit 2, and no scratch folder left behind
        if not keep:
            shutil.rmtree(wd, ignore_errors=True)  # our own scratch dir: nothing in it worth keeping
        raise (exc if isinstance(exc, UsageError) else UsageError(str(exc))) from None


def _run(node_spec: NodeSpec, source: str, run: ResumeOptions, protocol: ProtocolConfig | None,
         faults: dict[str, str], throughput: bool, json_path: str | None, keep: bool) -> int:
    """Run the resume check (and the checkpoint throughput check), print the table and the record; the exit
    code.  An interrupt or an error leaves no scratch folder of ours behind."""
    from trainready.suite.base import Check, CheckContext
    from trainready.suite.options import CheckOptions, ThroughputOptions
    from trainready.checks.resume import ResumeCheck
    from trainready.suite.runner import run_checks

    wd = run.directory
    assert wd is not None
    console = Console(stderr=True)
    checks: list[type[Check]] = [ResumeCheck]
    if throughput:
        from trainready.checks.ckpt_throughput import CkptThroughputCheck

        checks.append(CkptThroughputCheck)
    try:
        with console.status("resume protocol") as status:
            options = CheckOptions(resume=run, protocol=protocol, throughput=ThroughputOptions(directory=wd))
            ctx = CheckContext(node_spec, wd, faults, options, progress=lambda m: status.update(m))
            report = run_checks("resume", checks, ctx, context={"spec_source": source, "dir": str(wd)})
        _print_table(report, console if json_path == "-" else Console())
        rc = emit(report, json_path)
    except Interrupted as exc:  # SIGINT/SIGTERM: ranks stopped, partial record, own scratch removed (cli prints)
        on_interrupt(exc, wd, keep, json_path)
        raise
    except BaseException:
        drop_scratch(wd, keep)  # an error exit leaves no scratch folder behind
        raise
    finish_workdir(wd, keep, rc, console)
    return rc


def _print_table(report: Report, console: Console) -> None:
    res = next((x for x in report.results if x.name == "resume"), None)
    rows = res.details.get("table") if res else None
    if not rows:
        return
    t = Table(title="resume: run C (resumed) vs run A (uninterrupted)", title_justify="left")
    for col in ("component", "max |Δ|", "tolerance", "verdict"):
        t.add_column(col, justify="right" if col == "max |Δ|" else "left")
    for row in rows:
        v = row["max_abs"]
        shown = "differs" if isinstance(v, float) and math.isnan(v) else f"{v:.3g}"
        verdict = "[green]match[/]" if row["ok"] else f"[red]DIFFERS[/] {row.get('note', '')}"
        t.add_row(row["component"], shown, row["tolerance"], verdict)
    console.print(t)


def register(app: typer.Typer) -> None:
    from trainready.commands.common import evidence_outputs  # --junit, --prometheus

    app.command("resume")(evidence_outputs(resume))
