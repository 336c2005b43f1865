"""Where sysfs is: `/sys`, or the tree `TRAINREADY_SYSFS_ROOT` names (a captured node, a test's tree).

The root stands for `/sys`: its `class/infiniband`, `class/net` and `bus/pci/devices` are read as the kernel lays
them out (Documentation/ABI/stable/sysfs-class-infiniband, sysfs-class-net, sysfs-bus-pci).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "TRAINREADY_SYSFS_ROOT"


def sysfs_root() -> Path:
    """`$TRAINREADY_SYSFS_ROOT` when set and not empty, else /sys."""
    return Path(os.environ.get(ENV) or "/sys")


def read(path: Path) -> str | None:
    """A sysfs attribute's text, stripped; None when absent or unreadable (a counter the driver lacks)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return None


def read_int(path: Path) -> int | None:
    """A sysfs attribute holding one integer (a port counter); None when absent or not a number."""
    text = read(path)
    try:
        return int(text, 0) if text is not None else None
    except ValueError:
        return None
