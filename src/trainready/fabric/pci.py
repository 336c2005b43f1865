"""PCIe paths from sysfs (Documentation/ABI/testing/sysfs-bus-pci): where a GPU and a NIC sit, and each GPU's
nearest NIC, the one under the same PCIe switch (a rail-optimised server such as HGX H100/B200 gives every
GPU a compute NIC of its own under its switch, so GPUDirect RDMA traffic never crosses the CPU).

A device's path is the chain of PCI functions from its root complex down to it, read from where
`bus/pci/devices/ADDR` points: `devices/pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:00.0/0000:1a:00.0`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from trainready.fabric.sysfs import BDF

# Common path elements two devices need to sit under one PCIe switch: the root complex (pciDDDD:BB), its root
# port, the switch's upstream port.  Fewer: they meet only at the root port or the CPU.
SWITCH_DEPTH = 3


def normalize(bus_id: str) -> str:
    """NVML's "00000000:1B:00.0" → sysfs's "0000:1b:00.0" (a 32-bit domain written with 8 digits)."""
    head, _, fn = bus_id.strip().lower().rpartition(":")
    domain, _, bus = head.partition(":")
    return f"{int(domain, 16):04x}:{bus}:{fn}" if domain and bus else bus_id.strip().lower()


def path_of(root: Path, address: str) -> tuple[str, ...]:
    """The chain root complex → device of `address` (a BDF); () when sysfs does not have it."""
    link = root / "bus/pci/devices" / address
    try:
        real = Path(os.path.realpath(link))
    except OSError:
        return ()
    if not link.exists():
        return ()
    parts = real.parts
    start = next((i for i, p in enumerate(parts) if p.startswith("pci") and ":" in p), None)
    if start is None:
        return ()
    return tuple(p for p in parts[start:] if p == parts[start] or BDF.match(p))


def shared(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """How many leading path elements two devices share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@dataclass(frozen=True)
class Rail:
    """One GPU's nearest NIC by PCIe path."""

    gpu: int
    """The GPU's NVML index."""
    gpu_pci: str
    """Its PCI address."""
    nic: str | None
    """The nearest RDMA device (mlx5_0); None when no NIC shares more than the CPU with it."""
    nic_pci: str | None
    """That NIC's PCI address."""
    via: str
    """Where the two meet: 'switch' (under one PCIe switch), 'root port', 'host bridge', 'cpu', or why unknown."""


def _via(depth: int) -> str:
    return "switch" if depth >= SWITCH_DEPTH else {2: "root port", 1: "host bridge"}.get(depth, "cpu")


def rails(root: Path, gpus: list[tuple[int, str]], nics: list[tuple[str, str]]) -> list[Rail]:
    """Each GPU (index, PCI address) with its nearest NIC of `nics` (device, PCI address): the one sharing the
    longest path; ties go to the lowest device name. A GPU whose path sysfs lacks says so in `via`."""
    paths = {dev: path_of(root, addr) for dev, addr in nics}
    out = []
    for index, addr in gpus:
        gp = path_of(root, addr)
        if not gp:
            out.append(Rail(index, addr, None, None, f"not in {root}/bus/pci/devices"))
            continue
        best = sorted(((shared(gp, p), dev) for dev, p in paths.items() if p), key=lambda t: (-t[0], t[1]))
        if not best or best[0][0] == 0:
            out.append(Rail(index, addr, None, None, "cpu"))
            continue
        depth, dev = best[0]
        out.append(Rail(index, addr, dev, dict(nics)[dev], _via(depth)))
    return out
