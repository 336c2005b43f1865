"""RDMA ports as the kernel shows them in sysfs (Documentation/ABI/stable/sysfs-class-infiniband).

Per device `class/infiniband/DEV`: `fw_ver` ("28.39.1002"), `board_id` ("MT_0000000838"), `device` (the PCI
function, a link into `devices/pci…`), `device/net/IF` (its network interfaces: IPoIB or the RoCE port). Per port
`ports/N`: `state` ("4: ACTIVE"), `phys_state` ("5: LinkUp"), `rate` ("400 Gb/sec (4X NDR)"), `link_layer`
("InfiniBand" or "Ethernet" for RoCE), `gid_attrs/types/K` ("RoCE v2") with `gids/K`, and `counters/NAME` (the
IBA PortCounters: `symbol_error`, `link_downed`, ...). Every reader takes the root that stands for /sys
(`root.sysfs_root()`: `TRAINREADY_SYSFS_ROOT` or /sys), so a test or a captured node's tree is read like a node.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from trainready.fabric.root import read, read_int, sysfs_root

# The port error counters judged (IBA PortCounters as sysfs names them; ABI sysfs-class-infiniband "counters").
ERROR_COUNTERS: tuple[str, ...] = (
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors", "port_xmit_discards",
    "excessive_buffer_overrun_errors", "local_link_integrity_errors",
)
BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")  # a PCI address, domain:bus:device.function
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


@dataclass(frozen=True)
class RdmaPort:
    """One port of one RDMA device as sysfs shows it. A field sysfs does not carry is None."""

    device: str
    """The RDMA device's name, e.g. mlx5_0 (`class/infiniband/DEV`)."""
    port: int
    """The port number, from 1 (`ports/N`)."""
    state: str | None
    """The logical state without its number: ACTIVE, INIT, ARMED, DOWN (`ports/N/state`, "4: ACTIVE")."""
    phys_state: str | None
    """The physical state without its number: LinkUp, Polling, Disabled (`ports/N/phys_state`, "5: LinkUp")."""
    rate: str | None
    """The rate as the kernel writes it, e.g. "400 Gb/sec (4X NDR)" (`ports/N/rate`)."""
    rate_gbps: float | None
    """The rate in Gb/s, the number before "Gb/sec" (400.0); None when the text is not in that form."""
    link_layer: str | None
    """InfiniBand, or Ethernet for RoCE (`ports/N/link_layer`)."""
    fw_ver: str | None
    """The adapter's firmware version (`fw_ver`, e.g. "28.39.1002")."""
    board_id: str | None
    """The board's PSID (`board_id`, e.g. "MT_0000000838")."""
    netdev: str | None
    """The port's network interface (`device/net/IF`; with several, the one whose `dev_port` is N-1)."""
    netdev_state: str | None
    """That interface's `operstate` (`class/net/IF/operstate`: up, down, unknown)."""
    pci: str | None
    """The device's PCI address, e.g. 0000:1a:00.0 (where `device` points)."""
    roce_v2_gids: int | None
    """How many non-zero GIDs of type "RoCE v2" the port has (`gid_attrs/types/K`); None when sysfs has no
    gid_attrs (an InfiniBand port, or a kernel without them)."""
    counters: dict[str, int] = field(default_factory=dict)
    """The error counters of ERROR_COUNTERS the port has, name → count (`ports/N/counters/NAME`)."""

    @property
    def name(self) -> str:
        """DEV:PORT, as NCCL_IB_HCA and NCCL's log name a port (mlx5_0:1)."""
        return f"{self.device}:{self.port}"


def after_colon(text: str | None) -> str | None:
    """"4: ACTIVE" → "ACTIVE" (state and phys_state carry their number first)."""
    return text.split(":", 1)[1].strip() if text and ":" in text else text


def rate_gbps(rate: str | None) -> float | None:
    """"400 Gb/sec (4X NDR)" → 400.0 (Gb/s); None when not in that form."""
    try:
        return float(rate.split()[0]) if rate and "Gb/sec" in rate else None
    except (ValueError, IndexError):
        return None


def pci_address(path: Path) -> str | None:
    """The PCI address a sysfs `device` link leads to (its last path component), None when it is no PCI device."""
    try:
        name = Path(os.path.realpath(path)).name
    except OSError:
        return None
    return name if BDF.match(name) else None


def _netdev(dev: Path, port: int) -> str | None:
    try:
        nets = sorted(p for p in (dev / "device/net").iterdir())
    except OSError:
        return None
    if len(nets) > 1:
        by_port = [p for p in nets if read_int(p / "dev_port") == port - 1]
        nets = by_port or nets
    return nets[0].name if nets else None


def _roce_v2(pdir: Path) -> int | None:
    types = pdir / "gid_attrs/types"
    if not types.is_dir():
        return None
    n = 0
    for t in types.iterdir():
        if read(t) == "RoCE v2" and (read(pdir / "gids" / t.name) or ZERO_GID) != ZERO_GID:
            n += 1
    return n


def read_port(root: Path, dev: Path, port: int) -> RdmaPort:
    """One port of the device folder `dev` (under root/class/infiniband)."""
    pdir = dev / "ports" / str(port)
    net = _netdev(dev, port)
    rate = read(pdir / "rate")
    counters = {c: v for c in ERROR_COUNTERS if (v := read_int(pdir / "counters" / c)) is not None}
    return RdmaPort(
        device=dev.name, port=port, state=after_colon(read(pdir / "state")),
        phys_state=after_colon(read(pdir / "phys_state")), rate=rate, rate_gbps=rate_gbps(rate),
        link_layer=read(pdir / "link_layer"), fw_ver=read(dev / "fw_ver"), board_id=read(dev / "board_id"),
        netdev=net, netdev_state=read(root / "class/net" / net / "operstate") if net else None,
        pci=pci_address(dev / "device"), roce_v2_gids=_roce_v2(pdir), counters=counters)


def read_ports(root: Path | None = None) -> list[RdmaPort]:
    """Every port of every RDMA device under ROOT/class/infiniband, by device then port number; [] when the
    folder is absent (no RDMA driver loaded, no HCA). ROOT defaults to `sysfs_root()`."""
    root = sysfs_root() if root is None else root
    return ports_under(root / "class/infiniband", root)


def ports_under(base: Path, root: Path) -> list[RdmaPort]:
    """Every port of every device folder in `base` (a class/infiniband folder; `root` holds its class/net)."""
    try:
        devs = sorted(base.iterdir(), key=lambda p: p.name)
    except OSError:
        return []
    out = []
    for dev in devs:
        try:
            nums = sorted(int(p.name) for p in (dev / "ports").iterdir() if p.name.isdigit())
        except OSError:
            continue
        out.extend(read_port(root, dev, n) for n in nums)
    return out


def rdma_present(root: Path | None = None) -> bool:
    """Whether ROOT/class/infiniband exists (an RDMA driver is loaded), ports or not."""
    return ((sysfs_root() if root is None else root) / "class/infiniband").is_dir()
