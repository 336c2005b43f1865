"""Atomic file writes: a crash never leaves a half-written file that looks valid.

Pattern: write to a temporary file in the same directory, flush + fsync it,
`os.replace` it over the target (atomic on POSIX within one filesystem), then
fsync the directory so the rename itself survives a power loss.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Callable


def fsync_path(path: str | os.PathLike[str]) -> None:
    """fsync a file or directory by path (a directory: so a rename/creation inside it is durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


fsync_dir = fsync_path


def _umask() -> int:
    """The process umask without changing it (Linux /proc; else the usual 022)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    return atomic_write_stream(path, lambda fh: fh.write(data))


def atomic_write_stream(path: str | os.PathLike[str], fill: Callable[[BinaryIO], object]) -> Path:
    """Atomically write whatever `fill(fh)` writes into the open binary file `fh`."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fill(fh)
            fh.flush()
            # mkstemp creates 0600; a record on a shared filesystem must be as readable
            # as any file the user creates (0666 minus the umask).
            os.fchmod(fh.fileno(), 0o666 & ~_umask())
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(target.parent)
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")
