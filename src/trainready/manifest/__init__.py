"""Probes: read facts about this machine for `trainready env` and the checks.

Every probe returns plain JSON-able data.  A fact that cannot be read is the
string ``"unavailable: <reason>"`` (see `unavailable`), never an exception, so
one unsupported query costs one field, not the manifest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, TypeVar

from trainready.fabric.root import read

T = TypeVar("T")

UNAVAILABLE = "unavailable: "


def unavailable(reason: str) -> str:
    """The value written for a fact that could not be read."""
    reason = " ".join(str(reason).split()) or "unknown reason"
    return f"{UNAVAILABLE}{reason}"


def is_unavailable(value: object) -> bool:
    return isinstance(value, str) and value.startswith(UNAVAILABLE)


def why(value: str) -> str:
    """An "unavailable: reason" fact as just its reason, for messages."""
    return value[len(UNAVAILABLE):] if is_unavailable(value) else value


def guarded(fn: Callable[[], T], what: str = "") -> T | str:
    """Call `fn`; on any exception return `unavailable(<exception, one line>)`."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - a probe must never crash the manifest
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return unavailable(f"{what + ': ' if what else ''}{text}")


def read_text(path: Any) -> str | None:
    """First-class sysfs/procfs read: stripped text, or None when absent/unreadable (fabric/root.py's reader)."""
    return read(Path(path))
