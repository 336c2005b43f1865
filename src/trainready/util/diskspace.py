"""Free space before writing, and a write that failed because the disk filled, named as such.

A full disk inside `torch.save`'s zip writer surfaces as ``RuntimeError: [enforce fail at
inline_container.cc:672] . unexpected pos A vs B`` (the OSError is swallowed), and inside
DCP as a `CheckpointException` holding each rank's exception.  `disk_failure` looks through
both for ENOSPC / EDQUOT / EIO; when only a short write is left, it asks the filesystem.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from trainready.errors import UsageError

DISK_ERRNOS: dict[int, str] = {
    errno.ENOSPC: "no space left on device (ENOSPC)",
    errno.EDQUOT: "disk quota exceeded (EDQUOT)",
    errno.EIO: "I/O error (EIO)",
}
# Below this many free bytes after a failed short write, the write failed for want of space.
NEARLY_FULL = 1 << 20


def free_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes an unprivileged writer may still use on the filesystem holding `path` (statvfs f_bavail)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    return shutil.disk_usage(p).free


def require_free(path: str | os.PathLike[str], need: int, what: str, flag: str = "--dir") -> int:
    """UsageError (one line, exit 2) naming the directory, bytes free and bytes needed when short."""
    free = free_bytes(path)
    if free < need:
        raise UsageError(f"{flag} {path}: {free} bytes free ({free / 2**20:.1f} MiB), expected at least {need} bytes "
                         f"({need / 2**20:.1f} MiB: {what}); free space there or point {flag} elsewhere")
    return free


def _chain(exc: BaseException) -> list[BaseException]:
    """exc, what it wraps (cause, context, DCP's per-rank failures), depth first, each once."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [x for x in (e.__cause__, e.__context__) if x is not None]
        for v in (getattr(e, "failures", None) or {}).values():  # torch CheckpointException: rank -> (exc, tb)
            todo.append(v[0] if isinstance(v, tuple) else v)
    return seen


def disk_failure(exc: BaseException, path: str | os.PathLike[str]) -> str | None:
    """'no space left on device (ENOSPC)' etc. when `exc` comes from the disk at `path`, else None."""
    chain = _chain(exc)
    for e in chain:
        if isinstance(e, OSError) and e.errno in DISK_ERRNOS:
            return DISK_ERRNOS[e.errno]
    text = " ".join(str(e) for e in chain)
    for code, name in DISK_ERRNOS.items():
        if os.strerror(code) in text:
            return name
    if "unexpected pos" in text or "file write failed" in text:  # torch's zip writer: a short write
        free = free_bytes(path)
        if free < NEARLY_FULL:
            return f"no space left on device (ENOSPC: a short write, {free} bytes free after it)"
    return None
