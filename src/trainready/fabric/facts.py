"""Everything the fabric check reads, in one record: the RDMA ports, the GPUs' NVLinks and fabric info, each
GPU's rail, the services, GPUDirect's prerequisites, NCCL's environment and the network interfaces that are up.
Also what `trainready env` shows and the counters' snapshot the check compares over the run."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from trainready.fabric import nccl, nvlink, pci, services, sysfs
from trainready.fabric.root import read, sysfs_root


@dataclass(frozen=True)
class FabricFacts:
    root: str
    """The sysfs root read (/sys, or TRAINREADY_SYSFS_ROOT)."""
    rdma: bool
    """ROOT/class/infiniband exists (an RDMA driver is loaded)."""
    ports: tuple[sysfs.RdmaPort, ...]
    gpus: tuple[nvlink.GpuFabric, ...]
    nvml: str | None
    """Why NVML could not be read (no driver: a CPU node); None when it was."""
    rails: tuple[pci.Rail, ...]
    services: tuple[services.ServiceState, ...]
    gpudirect: services.GpuDirect
    nccl: nccl.NcclEnv
    netdevs_up: tuple[str, ...]
    """Network interfaces whose operstate is up (or unknown, as lo and some virtual ones say)."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def netdevs_up(root: Path) -> tuple[str, ...]:
    try:
        names = sorted(p.name for p in (root / "class/net").iterdir())
    except OSError:
        return ()
    return tuple(n for n in names if read(root / "class/net" / n / "operstate") in ("up", "unknown"))


@dataclass(frozen=True)
class Snapshot:
    """The error counters at one moment: per port (DEV:PORT) and per GPU link ('GPU i link l')."""

    at: float
    """time.monotonic() when read."""
    ports: dict[str, dict[str, int]]
    links: dict[str, dict[str, int]]


def snapshot(ports: list[sysfs.RdmaPort] | tuple[sysfs.RdmaPort, ...],
             gpus: list[nvlink.GpuFabric] | tuple[nvlink.GpuFabric, ...]) -> Snapshot:
    return Snapshot(time.monotonic(), {p.name: dict(p.counters) for p in ports},
                    {f"GPU {g.index} link {lk.link}": dict(lk.counters) for g in gpus for lk in g.links if lk.counters})


def read_counters(root: Path | None = None, nv: Any = None) -> Snapshot:
    """The counters alone (the run's start): ports from sysfs, links from NVML."""
    gpus = nvlink.read_gpus(nv)
    return snapshot(sysfs.read_ports(root), gpus if isinstance(gpus, list) else [])


def read_facts(root: Path | None = None, nv: Any = None, environ: Mapping[str, str] | None = None,
               units: tuple[str, ...] = (), proc: Path = Path("/proc"), in_container: bool = False,
               replay: Path | None = None) -> FabricFacts:
    """Read it all: sysfs at `root` (default TRAINREADY_SYSFS_ROOT or /sys), NVML through `nv` (default
    pynvml), `units` the services asked about; with `replay`, a folder `env --capture-fabric` wrote instead of
    this machine (its sys/ for sysfs, its node.json for NVML, the services and GPUDirect)."""
    import os

    if replay is not None:
        from trainready.fabric.capture import load_node

        root = replay / "sys"
        got, states, gd = load_node(replay / "node.json")
        seen = {s.unit: s for s in states}
        svc = tuple(seen.get(u, services.ServiceState(u, None, f"not in {replay}/node.json")) for u in units)
    else:
        root = sysfs_root() if root is None else root
        got, gd = nvlink.read_gpus(nv), services.gpudirect(proc)
        svc = tuple(services.service_state(u, proc, in_container) for u in units)
    ports = sysfs.read_ports(root)
    gpus = got if isinstance(got, list) else []
    rails = pci.rails(root, [(g.index, g.pci) for g in gpus if g.pci],
                      [(p.device, p.pci) for p in ports if p.pci and p.port == 1])
    return FabricFacts(
        root=str(root), rdma=sysfs.rdma_present(root), ports=tuple(ports), gpus=tuple(gpus),
        nvml=None if isinstance(got, list) else got, rails=tuple(rails), services=svc, gpudirect=gd,
        nccl=nccl.read_env(os.environ if environ is None else environ), netdevs_up=netdevs_up(root))
