"""Options and helpers shared by the commands."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console

from trainready.errors import UsageError
from trainready.records import Report
from trainready.report.render import print_report
from trainready.util.atomic import atomic_write_json

SPEC_HELP = (
    "Node spec (TOML) to hold this machine to. Default: the CPU profile. "
    "Shipped examples: example:cpu-default, example:h200-8x, example:b200-reference."
)
JSON_HELP = "Also write the versioned JSON record to this path (written atomically); '-' prints it to stdout."


def parse_plants(plants: list[str] | None, command: str) -> dict[str, str]:
    """`--plant name=value` (hidden; for fault-injection tests of the whole CLI).

    Names are checked against checks/plants.py for this command: a misspelled plant is
    exit 2, never a silently unplanted (and so meaningless) PASS."""
    from trainready.checks.plants import validate, validate_values

    out = {}
    for p in plants or []:
        if "=" not in p:
            raise UsageError(f"--plant '{p}': expected NAME=VALUE")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    validate(list(out), command)
    validate_values(out)
    return out


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


def check_out_path(path: str | None, flag: str = "--json") -> None:
    """A user-given output file's folder must exist: no folders made from a typo (one line, exit 2).
    Commands call this before any work, so a typo costs nothing; None and '-' (stdout) pass."""
    if path is None or path == "-":
        return
    p = Path(path).expanduser()
    if not p.parent.is_dir():
        raise UsageError(f"{flag} {path}: directory {p.parent} does not exist (create it first)")
    if p.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; expected a file path")


def write_json_doc(doc: dict[str, Any], path: str, console: Console | None, what: str = "record") -> None:
    """`-` → stdout; else an atomic write, every token-shaped/secret-named value scrubbed."""
    from trainready.probe.envvars import scrub

    doc = scrub(doc)
    if path == "-":
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    check_out_path(path)
    try:
        atomic_write_json(path, doc)
    except OSError as exc:
        raise UsageError(f"--json {path}: cannot write ({exc.strerror})") from None
    if console is not None:
        console.print(f"{what} written to {path}")


def emit(report: Report, json_path: str | None, quiet: bool = False, verbose: bool = False) -> int:
    console = Console(stderr=json_path == "-")
    if not quiet:
        print_report(report, console, verbose=verbose)
    if json_path:
        write_json_doc(report.to_json(), json_path, None if quiet else console)
    return report.exit_code
