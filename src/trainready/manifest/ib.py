"""InfiniBand / RoCE ports from sysfs: /sys/class/infiniband/<dev>/ports/<n>/{state,rate,link_layer}.

Formats (kernel drivers/infiniband/core/sysfs.c): state "4: ACTIVE", phys_state
"5: LinkUp", rate "400 Gb/sec (4X NDR)", link_layer "InfiniBand" or "Ethernet" (RoCE).
The root is a parameter so tests read a fake tree (tests/data/sysfs_ib).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainready.manifest import read_text, unavailable

SYSFS_IB = Path("/sys/class/infiniband")


def _after_colon(v: str | None) -> str | None:
    return v.split(":", 1)[1].strip() if v and ":" in v else v


def ports(root: Path = SYSFS_IB) -> list[dict[str, Any]] | str:
    if not root.is_dir():
        return unavailable(f"{root} absent (no RDMA driver loaded or no HCA)")
    out = []
    for dev in sorted(root.iterdir()):
        pdir = dev / "ports"
        if not pdir.is_dir():
            continue
        for port in sorted(pdir.iterdir(), key=lambda q: (len(q.name), q.name)):
            field = lambda n: read_text(port / n)  # noqa: E731
            out.append({
                "device": dev.name,
                "port": port.name,
                "state": _after_colon(field("state")) or unavailable("state not readable"),
                "phys_state": _after_colon(field("phys_state")) or unavailable("phys_state not readable"),
                "rate": field("rate") or unavailable("rate not readable"),
                "link_layer": field("link_layer") or unavailable("link_layer not readable"),
            })
    return out


def rate_gbps(rate: str) -> float | None:
    """"400 Gb/sec (4X NDR)" → 400.0 (Gb/s); None when not in that form."""
    try:
        return float(rate.split()[0])
    except (ValueError, IndexError, AttributeError):
        return None
