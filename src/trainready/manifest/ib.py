"""InfiniBand / RoCE ports for the manifest: /sys/class/infiniband/<dev>/ports/<n>/{state,rate,link_layer}.

Read by `fabric/sysfs.py` (the one reader, kernel Documentation/ABI/stable/sysfs-class-infiniband); here as the
manifest's plain JSON. The root is a parameter so tests read a fake tree (tests/data/sysfs_ib); by default
`TRAINREADY_SYSFS_ROOT`/class/infiniband, else /sys/class/infiniband.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainready.fabric import sysfs
from trainready.fabric.root import sysfs_root
from trainready.manifest import unavailable

SYSFS_IB = Path("/sys/class/infiniband")


def ports(root: Path | None = None) -> list[dict[str, Any]] | str:
    root = sysfs_root() / "class/infiniband" if root is None else root
    if not root.is_dir():
        return unavailable(f"{root} absent (no RDMA driver loaded or no HCA)")
    return [{
        "device": p.device,
        "port": str(p.port),
        "state": p.state or unavailable("state not readable"),
        "phys_state": p.phys_state or unavailable("phys_state not readable"),
        "rate": p.rate or unavailable("rate not readable"),
        "link_layer": p.link_layer or unavailable("link_layer not readable"),
    } for p in sysfs.ports_under(root, root.parent.parent)]


def rate_gbps(rate: str) -> float | None:
    """"400 Gb/sec (4X NDR)" → 400.0 (Gb/s); None when not in that form."""
    return sysfs.rate_gbps(rate)
