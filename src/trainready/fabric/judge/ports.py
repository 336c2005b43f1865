"""The compute NICs' ports (sysfs) against the spec's [fabric], or against each other when it names none.

A port is judged as the IBTA and the kernel show it (Documentation/ABI/stable/sysfs-class-infiniband): `state`
ACTIVE and `phys_state` LinkUp, `rate` at the expected Gb/s (a port trained to HDR 200 on an NDR 400 fabric
halves what the node sends), `link_layer` the spec's, a RoCE port's interface up with a RoCE v2 GID.
"""

from __future__ import annotations

from trainready.fabric.judge.findings import Findings, names
from trainready.fabric.sysfs import RdmaPort
from trainready.spec.fabric import FabricSpec


def compute_ports(ports: tuple[RdmaPort, ...], spec: FabricSpec) -> list[RdmaPort]:
    """The spec's compute NICs' ports; with none named, every RDMA port."""
    return [p for p in ports if p.device in spec.nics] if spec.nics else list(ports)


def _expected_rate(p: RdmaPort, ports: list[RdmaPort], spec: FabricSpec) -> tuple[float | None, str]:
    if p.device in spec.nics:
        return spec.nics[p.device], f"fabric.nics.{p.device}"
    peers = [q.rate_gbps for q in ports if q.rate_gbps and q.link_layer == p.link_layer and q.state == "ACTIVE"]
    return (max(peers), "the node's fastest compute port") if peers else (None, "")


def _one(out: Findings, p: RdmaPort, ports: list[RdmaPort], spec: FabricSpec, used: bool) -> None:
    if p.state != "ACTIVE" or p.phys_state != "LinkUp":
        text = f"NIC {p.name} is {p.state or 'unreadable'} ({p.phys_state or 'phys_state unreadable'}), expected ACTIVE (LinkUp)"
        if used:
            out.fail("nic", text)
        else:
            out.info("nic", f"{text}; NCCL_IB_HCA leaves it out")
        return
    want, source = _expected_rate(p, ports, spec)
    if want is not None and (p.rate_gbps or 0) < want:
        out.fail("nic", f"NIC {p.name} at {p.rate or 'an unreadable rate'}, expected {want:g} Gb/s ({source})")
    if spec.link_layer and p.link_layer != spec.link_layer:
        out.fail("nic", f"NIC {p.name} link layer {p.link_layer}, expected {spec.link_layer} (fabric.link_layer)")
    if p.link_layer == "Ethernet":
        if p.netdev_state != "up":
            out.fail("nic", f"NIC {p.name} (RoCE): its interface {p.netdev or '(none)'} is {p.netdev_state or 'absent'}, expected up")
        if p.roce_v2_gids == 0:
            out.fail("nic", f"NIC {p.name} (RoCE): no RoCE v2 GID (gid_attrs/types), expected one on its interface's address")
    if spec.fw_ver and not (p.fw_ver or "").startswith(spec.fw_ver):
        out.fail("nic", f"NIC {p.device} firmware {p.fw_ver}, expected {spec.fw_ver} (fabric.fw_ver)")


def judge_ports(out: Findings, ports: tuple[RdmaPort, ...], spec: FabricSpec, used: set[str]) -> list[RdmaPort]:
    """Judge the compute ports (those NCCL uses: `used`, DEV:PORT names, the others said); returns them."""
    present = {p.device for p in ports}
    missing = [n for n in sorted(spec.nics) if n not in present]
    if missing:
        out.fail("nic", f"NIC {names(missing)} absent: the spec's compute NICs are {names(sorted(spec.nics))} "
                 f"(fabric.nics); class/infiniband has {names(sorted(present)) or 'no device'}")
    compute = compute_ports(ports, spec)
    for p in compute:
        _one(out, p, compute, spec, p.name in used)
    fws = sorted({p.fw_ver for p in compute if p.fw_ver})
    if len(fws) > 1:
        by = {fw: [p.device for p in compute if p.fw_ver == fw] for fw in fws}
        out.warn("nic", "compute NICs run different firmware: " + "; ".join(f"{fw} on {names(d)}" for fw, d in by.items()))
    up = [p for p in compute if p.state == "ACTIVE"]
    if compute:
        rates = sorted({p.rate for p in up if p.rate})
        out.info("nic", f"{len(up)} of {len(compute)} compute port(s) Active ({', '.join(rates) or 'no rate'})")
    return compute
