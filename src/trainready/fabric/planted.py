"""The fabric check's planted faults (suite/plants.py `fabric.*`), applied to what was read, so the judge sees
the fault as a node with it would show it: a port Down, a port at half its rate, NCCL_IB_HCA without one
compute NIC, an NVLink inactive, a service stopped, a counter that rose."""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from trainready.errors import UsageError
from trainready.fabric.facts import FabricFacts, Snapshot
from trainready.fabric.nccl import NcclEnv
from trainready.fabric.nvlink import GpuFabric
from trainready.fabric.services import ServiceState


class Plants(Protocol):
    """What holds the planted faults (the check's context): `fault(NAME)` gives a plant's value or None."""

    def fault(self, name: str) -> str | None: ...


def _gpu_link(value: str, plant: str) -> tuple[int, int]:
    gpu, _, link = value.partition(":")
    if not (gpu.isdigit() and link.isdigit()):
        raise UsageError(f"--plant {plant}={value}: expected GPU:LINK, e.g. 3:5")
    return int(gpu), int(link)


def _link_down(g: GpuFabric, link: int) -> GpuFabric:
    return replace(g, links=tuple(replace(lk, active=False, counters={}) if lk.link == link else lk for lk in g.links))


def apply(facts: FabricFacts, plants: Plants) -> FabricFacts:
    """`facts` with each planted fault made true."""
    ports, gpus, svc, env = facts.ports, facts.gpus, facts.services, facts.nccl
    if dev := plants.fault("fabric.port_down"):
        ports = tuple(replace(p, state="DOWN", phys_state="Disabled") if p.device == dev else p for p in ports)
    if dev := plants.fault("fabric.half_rate"):
        ports = tuple(replace(p, rate_gbps=p.rate_gbps / 2, rate=f"{p.rate_gbps / 2:g} Gb/sec (planted: half of "
                              f"{p.rate})") if p.device == dev and p.rate_gbps else p for p in ports)
    if dev := plants.fault("fabric.hca_missing"):
        rest = sorted({p.device for p in ports if p.device != dev})
        env = NcclEnv("=" + ",".join(rest), env.socket_ifname, env.ib_disable, env.net)
    if v := plants.fault("fabric.nvlink_down"):
        gi, link = _gpu_link(v, "fabric.nvlink_down")
        gpus = tuple(_link_down(g, link) if g.index == gi else g for g in gpus)
    if unit := plants.fault("fabric.service_down"):
        svc = tuple(ServiceState(s.unit, False, "planted: not running") if s.unit == unit else s for s in svc)
        if unit not in {s.unit for s in svc}:
            svc += (ServiceState(unit, False, "planted: not running"),)
    return replace(facts, ports=ports, gpus=gpus, services=svc, nccl=env)


def rise(end: Snapshot, plants: Plants, bound: int) -> Snapshot:
    """`end` with the planted counter (`fabric.counter_rise=NIC` or `GPU:LINK`) `bound + 1` above its start."""
    v = plants.fault("fabric.counter_rise")
    if not v:
        return end
    ports, links = {k: dict(c) for k, c in end.ports.items()}, {k: dict(c) for k, c in end.links.items()}
    if ":" in v and v.split(":")[0].isdigit():
        gi, link = _gpu_link(v, "fabric.counter_rise")
        key = f"GPU {gi} link {link}"
        if key in links:
            links[key]["replay"] = links[key].get("replay", 0) + bound + 1
    else:
        for name, c in ports.items():
            if name.split(":")[0] == v:
                c["symbol_error"] = c.get("symbol_error", 0) + bound + 1
    return replace(end, ports=ports, links=links)
