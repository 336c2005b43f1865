"""What NCCL will use against the compute NICs (NCCL docs, "Environment Variables": NCCL_IB_HCA,
NCCL_SOCKET_IFNAME, NCCL_IB_DISABLE, NCCL_NET). The documents' warning: with several IB NICs per node and
NCCL_IB_HCA naming only some, NCCL uses those alone and the bandwidth between servers falls with them.
"""

from __future__ import annotations

from trainready.fabric.judge.findings import Findings, names
from trainready.fabric.nccl import NcclEnv, parse
from trainready.fabric.sysfs import RdmaPort


def used_ports(env: NcclEnv, ports: tuple[RdmaPort, ...]) -> set[str]:
    """The ports (DEV:PORT) NCCL_IB_HCA selects; unset, every port (NCCL then takes the active ones)."""
    if not env.ib_hca or not env.ib_hca.strip():
        return {p.name for p in ports}
    hca = parse(env.ib_hca)
    return {p.name for p in ports if hca.selects(p.device, p.port)}


def judge_nccl(out: Findings, env: NcclEnv, ports: tuple[RdmaPort, ...], compute: list[RdmaPort],
               netdevs_up: tuple[str, ...]) -> None:
    active = [p for p in compute if p.state == "ACTIVE"]
    if env.rdma_off and active:
        out.fail("nccl", f"{env.rdma_off} with {len(active)} active RDMA port(s): NCCL will use TCP sockets between "
                 "servers, not the NICs (unset it)")
    if env.ib_hca and env.ib_hca.strip():
        _ib_hca(out, env.ib_hca, ports, compute)
    elif compute:
        out.info("nccl", f"NCCL_IB_HCA unset: NCCL uses every active RDMA port ({len(active)})")
    if env.socket_ifname and env.socket_ifname.strip():
        ifs = parse(env.socket_ifname)
        chosen = [n for n in netdevs_up if ifs.selects(n)]
        if not chosen:
            out.fail("nccl", f"NCCL_SOCKET_IFNAME={env.socket_ifname} names no interface that is up "
                     f"(up: {names(list(netdevs_up)) or 'none'})")
        else:
            out.info("nccl", f"NCCL_SOCKET_IFNAME={env.socket_ifname}: {names(chosen)}")


def _ib_hca(out: Findings, text: str, ports: tuple[RdmaPort, ...], compute: list[RdmaPort]) -> None:
    hca = parse(text)
    devices = sorted({p.device for p in ports})
    for entry in hca.unmatched([(p.device, p.port) for p in ports]):
        line = f"NCCL_IB_HCA={text}: {entry} names no RDMA device here (class/infiniband: {names(devices) or 'none'})"
        if hca.exclude:
            out.warn("nccl", line)
        else:
            out.fail("nccl", line + ", expected one of them")
    left = [p.name for p in compute if not hca.selects(p.device, p.port)]
    if left and compute:
        kept = len(compute) - len(left)
        out.fail("nccl", f"NCCL_IB_HCA={text} leaves out compute NIC {names(left)}: NCCL will use {kept} of "
                 f"{len(compute)} and the bandwidth between servers falls to {kept}/{len(compute)}; expected all of "
                 f"them named (or NCCL_IB_HCA unset)")
    else:
        out.info("nccl", f"NCCL_IB_HCA={text} selects all {len(compute)} compute port(s)")
