"""Writing a record a user asked for (`--json PATH`): the folder checked first, secrets scrubbed, atomic."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console

from trainready.errors import UsageError
from trainready.util.atomic import atomic_write_json


def check_out_path(path: str | None, flag: str = "--json") -> None:
    """A user-given output file must be writable where it goes: its folder exists (no folders made from a
    typo), it is no folder or device, and a file can be made beside it (where the atomic write puts its
    temporary file; a read-only or pseudo filesystem such as /proc refuses here).  Commands call this before
    any work, so a typo or an unwritable place costs nothing (one line, exit 2); None and '-' (stdout) pass."""
    if path is None or path == "-":
        return
    p = Path(path).expanduser()
    if not p.parent.is_dir():
        raise UsageError(f"{flag} {path}: directory {p.parent} does not exist (create it first)")
    if p.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; expected a file path")
    if p.exists() and not p.is_file():
        raise UsageError(f"{flag} {path}: not a regular file (a device or pipe); expected a file path")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".probe", dir=p.parent)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot create a file in {p.parent} ({exc.strerror})") from None
    os.close(fd)
    os.unlink(probe)


def write_json_doc(doc: dict[str, Any], path: str, console: Console | None, what: str = "record") -> None:
    """`-` → stdout; else an atomic write, every token-shaped/secret-named value scrubbed."""
    from trainready.manifest.envvars import scrub

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
