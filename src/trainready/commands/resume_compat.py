"""`trainready resume --save-only DIR | --load-from DIR`: run the compat check, print its table, write the record."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from trainready.commands.common import emit
from trainready.errors import UsageError
from trainready.records import Report
from trainready.resume.options import CompatOptions
from trainready.spec.model import NodeSpec


def run_compat(spec: NodeSpec, source: str, opts: CompatOptions, faults: dict[str, str], json_path: str | None) -> int:
    """Run the save or the load check of `opts` on this machine, print its table, write the record."""
    from trainready.checks.ckpt_compat import CompatLoadCheck, CompatSaveCheck
    from trainready.suite.base import CheckContext
    from trainready.suite.options import CheckOptions
    from trainready.suite.runner import run_checks

    _prepare_directory(opts)
    directory = opts.directory
    check = CompatSaveCheck if opts.save_only else CompatLoadCheck
    context: dict[str, Any] = {"spec_source": source, "dir": str(directory)}
    if opts.load_from:
        from trainready.resume.compat import read_manifest

        planted = read_manifest(directory).get("planted") or {}
        if planted:  # a checkpoint saved with planted differences: this load is a test too
            context["planted"] = {f"compat.{k} (at save)": v for k, v in planted.items()}
    console = Console(stderr=True)
    with console.status("checkpoint compatibility: " + ("saving" if opts.save_only else "loading")):
        ctx = CheckContext(spec, directory, faults, CheckOptions(compat=opts))
        report = run_checks("resume", [check], ctx, context=context)
    print_table(report, console if json_path == "-" else Console())
    return emit(report, json_path)


def _prepare_directory(opts: CompatOptions) -> None:
    """One of --save-only/--load-from; a save goes to a new directory, a load reads an existing one."""
    from trainready.resume.compat import MANIFEST

    if opts.save_only and opts.load_from:
        raise UsageError("--save-only and --load-from: give one (save in the old environment, load in the new one)")
    directory = opts.directory
    if opts.save_only:
        if (directory / MANIFEST).exists():
            raise UsageError(f"--save-only {directory}: already holds a saved checkpoint ({MANIFEST}); use a new directory")
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--save-only {directory}: cannot create ({exc.strerror})") from None
    elif not directory.is_dir():
        raise UsageError(f"--load-from {directory}: no such directory (expected one written by --save-only)")


def print_table(report: Report, console: Console) -> None:
    res = report.results[0] if report.results else None
    rows = res.details.get("table") if res else None
    if not rows:
        return
    t = Table(title="checkpoint compatibility: saved environment vs this one", title_justify="left")
    for col in ("component", "saved", "here", "verdict"):
        t.add_column(col, overflow="fold")
    for r in rows:
        verdict = ("[green]ok[/]" if r["ok"] else "[red]DIFFERS[/]") + (f" {r['note']}" if r["note"] else "")
        t.add_row(r["component"], r["saved"], r["here"], verdict)
    console.print(t)
