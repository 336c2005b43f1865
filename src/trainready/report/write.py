"""Writing a record a user asked for (`--json PATH`): the folder checked first, secrets scrubbed, atomic."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from trainready.errors import UsageError
from trainready.util.atomic import atomic_write_json


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
