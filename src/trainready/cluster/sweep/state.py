"""The sweep's memory across runs: RESULTS/sweep/state.json (`trainready.sweepstate/1`), and its lock.

Per node: when it was last swept and passed, its verdicts (pass / fail / unknown) with their reasons, the count of
consecutive failing sweeps (the strikes of `--strikes`), and whether the sweep drained it, when and why.  The
drains of a window (`--max-drain` counts them) are kept with their dates.  Written atomically (util/atomic.py).

The lock: RESULTS/sweep/lock, held with flock(2) for the whole sweep (the kernel releases it when the process
ends, however it ends), its text naming the holder.  A second sweep on the same RESULTS says who holds it and
exits: sweeps never overlap (scrontab(1) never starts a line while its last run still runs, but a sweep started
by hand or from another host would).  The lock file is opened with O_NOFOLLOW: a symbolic link at its path is
refused (one line), never followed.  A file system that does not lock (Lustre mounted without `flock` answers
flock(2) with ENOSYS; NFS without a lock manager with ENOLCK) is refused with one line naming the mount option:
without a lock two sweeps could drain past --max-drain together.
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import json
import os
import socket
from pathlib import Path
from typing import IO, Any

SCHEMA = "trainready.sweepstate/1"
FOLDER = "sweep"


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def stamp(t: dt.datetime | None = None) -> str:
    return (t or now()).isoformat(timespec="seconds")


def parse(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def path(results: Path) -> Path:
    return results / FOLDER / "state.json"


def load(results: Path) -> dict[str, Any]:
    """The state, or a fresh one; a file of another format is refused (one line, exit 2)."""
    from trainready.errors import UsageError

    p = path(results)
    if not p.exists():
        return {"schema": SCHEMA, "nodes": {}, "drains": []}
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise UsageError(f"{p}: not JSON ({exc}); expected {SCHEMA}") from None
    if doc.get("schema") != SCHEMA:
        raise UsageError(f"{p}: schema {doc.get('schema')!r}, expected {SCHEMA}")
    return doc


def save(results: Path, doc: dict[str, Any]) -> None:
    from trainready.util.atomic import atomic_write_text

    p = path(results)
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(p, json.dumps(doc, indent=1, sort_keys=True) + "\n")


def node(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return doc["nodes"].setdefault(name, {"strikes": 0, "runs": []})


class Busy(Exception):
    """Another sweep holds the lock: its holder's line."""


def lock(results: Path) -> IO[str]:
    """Hold RESULTS/sweep/lock until the returned file is closed (or the process ends); Busy if another holds it,
    UsageError (one line) if it is a symbolic link or its file system cannot lock."""
    from trainready.errors import UsageError

    p = results / FOLDER / "lock"
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        why = "a symbolic link: refused, never followed" if exc.errno == errno.ELOOP else exc.strerror
        raise UsageError(f"{p}: {why}") from None
    f = os.fdopen(fd, "a+", encoding="utf-8")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "a process that has not written its name yet"
        f.close()
        raise Busy(holder) from None
    except OSError as exc:
        f.close()
        raise UsageError(f"{p}: its file system cannot lock (flock(2): {exc.strerror}); two sweeps could overlap. "
                         "Mount it with locking (Lustre: -o flock; NFS: a running lock manager, not -o nolock), or "
                         "give --results a local or locking file system") from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()} on {socket.gethostname()}, started {stamp()}\n")
    f.flush()
    return f
