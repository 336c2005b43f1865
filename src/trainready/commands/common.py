"""Options and helpers shared by the commands."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import typer

from rich.console import Console

from trainready.errors import Interrupted, UsageError
from trainready.records import Report
from trainready.report.render import print_report
from trainready.report.write import check_out_path, write_json_doc  # noqa: F401 - the commands' output helpers

SPEC_HELP = (
    "Node spec (TOML) to hold this machine to. Default: the CPU profile. "
    "Shipped examples: example:cpu-default, example:h200-8x, example:b200-reference, example:local-slurm (a node of "
    "the local test cluster, scripts/local-slurm.sh)."
)
JSON_HELP = "Also write the versioned JSON record to this path (written atomically); '-' prints it to stdout."


def parse_plants(plants: list[str] | None, command: str) -> dict[str, str]:
    """`--plant name=value` (hidden; for fault-injection tests of the whole CLI).

    Names are checked against suite/plants.py for this command: a misspelled plant is
    exit 2, never a silently unplanted (and so meaningless) PASS."""
    from trainready.suite.plants import validate, validate_values

    out = {}
    for p in plants or []:
        if "=" not in p:
            raise UsageError(f"--plant '{p}': expected NAME=VALUE")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    validate(list(out), command)
    validate_values(out)
    return out


TIMEOUT_HELP = ("Limit one check's run to SECONDS, e.g. --timeout comm=1200 (repeatable); at the limit its "
                "ranks are stopped (SIGTERM, then SIGKILL) and it reports where each rank was. Recorded.")


def parse_timeouts(values: list[str] | None, known: list[str]) -> dict[str, float]:
    """`--timeout CHECK=SECONDS` (repeatable): a known check name and a finite number > 0, else one line, exit 2."""
    import math

    out: dict[str, float] = {}
    for v in values or []:
        name, eq, text = v.partition("=")
        name = name.strip()
        if not eq or not name:
            raise UsageError(f"--timeout '{v}': expected CHECK=SECONDS, e.g. comm=1200")
        if name not in known:
            raise UsageError(f"--timeout {v}: unknown check '{name}' (known: {', '.join(sorted(known))})")
        try:
            seconds = float(text)
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds > 0):
            raise UsageError(f"--timeout {v}: expected SECONDS as a number > 0")
        out[name] = seconds
    return out


def on_interrupt(exc: Interrupted, scratch: Path | None, given: bool, json_path: str | None) -> None:
    """SIGINT/SIGTERM during a command: stop every rank, write the partial record (with --json), remove
    our own scratch directory (a user's `given` one is kept and named); `exc.notes` says what was done,
    for the CLI's one line."""
    from trainready.ranks import live

    live.stop()  # every rank, for good: nothing may start on the way out
    if json_path and isinstance(exc.partial, Report):
        try:
            write_json_doc(exc.partial.to_json(), json_path, None)
            exc.notes.append("partial record on stdout" if json_path == "-" else f"partial record at {json_path}")
        except (UsageError, OSError) as err:
            exc.notes.append(f"partial record not written ({err})")
    elif json_path:
        exc.notes.append("no record written (no check had started)")
    else:
        exc.notes.append("no record written (no --json)")
    if scratch is not None and given:
        exc.notes.append(f"scratch kept in {scratch} (given)")
    elif scratch is not None:
        _join_checks(SCRATCH_JOIN_S)  # a check's own thread can still be writing there (resume's last files)
        shutil.rmtree(scratch, ignore_errors=True)
        exc.notes.append(f"scratch {scratch} removed" if not scratch.exists() else f"scratch left in {scratch}")


SCRATCH_JOIN_S = 10.0  # at most this long for the interrupted check's thread to end before its scratch goes


def _join_checks(wait_s: float) -> None:
    """Wait, at most `wait_s` in all, for the checks' threads (suite/base.py: check-NAME) to end: their ranks are
    stopped, so they return once they have noted it."""
    end = time.monotonic() + wait_s
    for t in threading.enumerate():
        if t.name.startswith("check-") and t is not threading.current_thread():
            t.join(max(0.0, end - time.monotonic()))


def split_names(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    return names or None


def workdir(path: Path | None, flag: str = "--workdir") -> Path:
    if path is None:
        return Path(tempfile.mkdtemp(prefix="trainready-"))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot create ({exc.strerror})") from None
    return path


def finish_workdir(path: Path, given: bool, rc: int, console: Console) -> None:
    """After a run in `path`: our own scratch directory (not `given` by the user) is removed after a
    clean run (rc 0), or when empty, and otherwise kept as evidence of the failure, saying where;
    a given one is never touched."""
    if given:
        return
    if rc == 0 or not any(path.iterdir()):
        shutil.rmtree(path, ignore_errors=True)
    else:
        console.print(f"scratch files kept for inspection in {path}")


def drop_scratch(path: Path | None, given: bool) -> None:
    """On an error exit: our own scratch folder goes (a run that ended in an error leaves nothing behind);
    a folder the user gave (--workdir, --dir) is never touched."""
    if path is not None and not given:
        shutil.rmtree(path, ignore_errors=True)


@dataclasses.dataclass(frozen=True)
class EvidenceOutputs:
    """Where a command also writes its record for CI (JUnit XML) and monitoring (Prometheus textfile)."""

    junit: str | None = None
    prometheus: str | None = None


_OUTPUTS: list[EvidenceOutputs] = [EvidenceOutputs()]  # set by `evidence_outputs` for the running command
_INVOCATION: list[str] = []  # the command line as given (cli.main), recorded in every record (context.argv)


def set_invocation(argv: list[str]) -> None:
    _INVOCATION[:] = ["trainready", *argv]


def invocation() -> list[str]:
    """The command line of this run, as the user typed it (cli.main), for the record's context.argv."""
    return list(_INVOCATION) or ["trainready", *sys.argv[1:]]


def options_command(args_type: type) -> Callable[[Callable[[Any], Any]], Callable[..., Any]]:
    """Make `command(args)` a typer command whose options are the fields of the frozen dataclass `args_type`
    (each field's default is its `typer.Option`, help and flags included): the command line arrives as ONE
    typed object, handed down whole."""
    import typing

    hints = typing.get_type_hints(args_type)
    fields = dataclasses.fields(args_type)

    def wrap(command: Callable[[Any], Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def wrapper(**kw: Any) -> Any:
            return command(args_type(**kw))

        wrapper.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[f.name], default=f.default)
             for f in fields], return_annotation=None)
        wrapper.__annotations__ = {f.name: hints[f.name] for f in fields}
        del wrapper.__wrapped__  # typer reads the signature above, not the command's own
        return wrapper

    return wrap


def evidence_outputs(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command that ends in `emit` the `--junit PATH` and `--prometheus PATH` options
    (report/junit.py, report/prometheus.py).  Paths are checked before any work."""
    sig = inspect.signature(command, eval_str=True)
    extra = [
        inspect.Parameter("junit_path", inspect.Parameter.KEYWORD_ONLY, annotation=str, default=typer.Option(
            None, "--junit", help="Also write the checks as JUnit XML (one testcase per check) for CI.")),
        inspect.Parameter("prometheus_path", inspect.Parameter.KEYWORD_ONLY, annotation=str, default=typer.Option(
            None, "--prometheus", help="Also write node_exporter textfile-collector metrics (*.prom) here.")),
    ]

    @functools.wraps(command)
    def wrapper(*args: Any, junit_path: str | None = None, prometheus_path: str | None = None, **kw: Any) -> Any:
        check_out_path(junit_path, "--junit")
        check_out_path(prometheus_path, "--prometheus")
        _OUTPUTS[0] = EvidenceOutputs(junit_path, prometheus_path)
        try:
            return command(*args, **kw)
        finally:
            _OUTPUTS[0] = EvidenceOutputs()

    wrapper.__signature__ = sig.replace(parameters=[*sig.parameters.values(), *extra])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**command.__annotations__, "junit_path": "str", "prometheus_path": "str"}
    return wrapper


def write_evidence_outputs(doc: dict[str, Any], outputs: EvidenceOutputs | None = None, path: str = "") -> None:
    """The --junit / --prometheus files of this record (scrubbed like the JSON), each atomically."""
    from trainready.manifest.redact import scrub
    from trainready.report.kinds import record_of

    out = outputs or _OUTPUTS[0]
    if not (out.junit or out.prometheus):
        return
    rec = record_of(scrub(doc), path)  # path: where the record lies (a fleet record finds its node records beside it)
    for flag, path, write in (("--junit", out.junit, "write_junit"), ("--prometheus", out.prometheus, "write_prometheus")):
        if not path:
            continue
        mod = __import__(f"trainready.report.{flag[2:]}", fromlist=[write])
        try:
            getattr(mod, write)(path, [rec])
        except OSError as exc:
            raise UsageError(f"{flag} {path}: cannot write ({exc.strerror})") from None


def emit(report: Report, json_path: str | None, quiet: bool = False, verbose: bool = False) -> int:
    console = Console(stderr=json_path == "-")
    report = dataclasses.replace(report, context={**report.context, "argv": invocation()})
    if not quiet:
        print_report(report, console, verbose=verbose)
    if json_path:
        write_json_doc(report.to_json(), json_path, None if quiet else console)
    write_evidence_outputs(report.to_json())
    return report.exit_code
