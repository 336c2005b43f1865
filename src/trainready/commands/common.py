"""Options and helpers shared by the commands."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from rich.console import Console

from trainready.errors import UsageError
from trainready.records import Report
from trainready.report.render import print_report, write_json

SPEC_HELP = (
    "Node spec (TOML) to hold this machine to. Default: the CPU profile. "
    "Shipped examples: example:cpu-default, example:h200-8x, example:b200-reference."
)
JSON_HELP = "Also write the versioned JSON record to this path (written atomically); '-' prints it to stdout."


def parse_plants(plants: list[str] | None) -> dict[str, str]:
    """`--plant name=value` (hidden; for fault-injection tests of the whole CLI)."""
    out = {}
    for p in plants or []:
        if "=" not in p:
            raise UsageError(f"--plant '{p}': expected NAME=VALUE")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
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


def emit(report: Report, json_path: str | None, quiet: bool = False, verbose: bool = False) -> int:
    console = Console(stderr=json_path == "-")
    if not quiet:
        print_report(report, console, verbose=verbose)
    if json_path == "-":
        from trainready.report.render import dumps

        sys.stdout.write(dumps(report) + "\n")
    elif json_path:
        parent = Path(json_path).parent
        if not parent.is_dir():
            raise UsageError(f"--json {json_path}: directory {parent} does not exist")
        try:
            write_json(report, json_path)
        except OSError as exc:
            raise UsageError(f"--json {json_path}: cannot write ({exc.strerror})") from None
        if not quiet:
            console.print(f"record written to {json_path}")
    return report.exit_code
