"""A small builder of sysfs trees, for tests and the self-test on machines without RDMA hardware: the files and links the kernel shows
(Documentation/ABI/stable/sysfs-class-infiniband, sysfs-class-net, sysfs-bus-pci), with the values a
ConnectX-7 port shows on an HGX server (fw_ver 28.39.1002, board_id MT_0000000838, hca_type MT4129,
rate "400 Gb/sec (4X NDR)"), laid out under PCIe switches as an HGX H100/B200 board does: per switch one GPU
and one compute NIC, so each GPU's nearest NIC is its rail's.

    root = hgx_tree(tmp_path)                              # 8 GPUs, 8 x NDR 400 NICs, all Active
    root = hgx_tree(tmp_path, nics={3: {"state": "1: DOWN", "phys_state": "3: Disabled"}})

The root stands for /sys: point TRAINREADY_SYSFS_ROOT (or a reader's `root`) at it. tests/fabric_tree.py
re-exports this module for the tests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

# Buses of the eight PCIe switches' root ports (a DGX H100-like layout; any distinct buses do).
SWITCH_BUS = (0x17, 0x28, 0x38, 0x5b, 0x98, 0xa9, 0xb8, 0xd9)
NDR = "400 Gb/sec (4X NDR)"
HDR = "200 Gb/sec (4X HDR)"


@dataclass(frozen=True)
class Nic:
    """One single-port RDMA device and what its sysfs says."""

    device: str
    switch: int  # the PCIe switch it sits under (0..7)
    state: str = "4: ACTIVE"
    phys_state: str = "5: LinkUp"
    rate: str = NDR
    link_layer: str = "InfiniBand"
    fw_ver: str = "28.39.1002"
    board_id: str = "MT_0000000838"
    netdev: str | None = None  # default ibpBUSs0, as systemd names an IPoIB interface
    operstate: str = "up"
    roce_v2: bool = False  # write a RoCE v2 GID (gid_attrs) for an Ethernet port
    counters: dict[str, int] = field(default_factory=dict)


def gpu_pci(switch: int) -> str:
    return f"0000:{SWITCH_BUS[switch] + 3:02x}:00.0"


def nic_pci(switch: int) -> str:
    return f"0000:{SWITCH_BUS[switch] + 4:02x}:00.0"


def _chain(switch: int, leaf: str) -> list[str]:
    """The PCI path from the root complex to `leaf` under `switch`: root port, switch up, switch down, leaf."""
    b = SWITCH_BUS[switch]
    down = "00.0" if leaf == gpu_pci(switch) else "01.0"
    return [f"pci0000:{b:02x}", f"0000:{b:02x}:01.0", f"0000:{b + 1:02x}:00.0", f"0000:{b + 2:02x}:{down}", leaf]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink():
        link.unlink()
    link.symlink_to(os.path.relpath(target, link.parent))


def pci_device(root: Path, switch: int, leaf: str) -> Path:
    """Make the PCI function `leaf` under `switch` (devices/pci…/…/leaf and bus/pci/devices/leaf); its folder."""
    chain = _chain(switch, leaf)
    for i in range(2, len(chain) + 1):
        node = root.joinpath("devices", *chain[:i])
        node.mkdir(parents=True, exist_ok=True)
        _link(root / "bus/pci/devices" / chain[i - 1], node)
    return root.joinpath("devices", *chain)


def write_nic(root: Path, nic: Nic) -> None:
    pci = pci_device(root, nic.switch, nic_pci(nic.switch))
    dev = pci / "infiniband" / nic.device
    for name, text in (("fw_ver", nic.fw_ver), ("board_id", nic.board_id), ("hca_type", "MT4129"),
                       ("node_type", "1: CA")):
        _write(dev / name, text)
    _link(dev / "device", pci)
    _link(root / "class/infiniband" / nic.device, dev)
    port = dev / "ports/1"
    for name, text in (("state", nic.state), ("phys_state", nic.phys_state), ("rate", nic.rate),
                       ("link_layer", nic.link_layer)):
        _write(port / name, text)
    for name in ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors", "port_xmit_discards",
                 "excessive_buffer_overrun_errors", "local_link_integrity_errors", "port_xmit_data"):
        _write(port / "counters" / name, str(nic.counters.get(name, 0)))
    _write(port / "gids/0", "fe80:0000:0000:0000:a088:c203:00" + f"{nic.switch:02x}:abcd")
    if nic.link_layer == "Ethernet":
        _write(port / "gid_attrs/types/0", "IB/RoCE v1")
        _write(port / "gid_attrs/types/1", "RoCE v2" if nic.roce_v2 else "IB/RoCE v1")
        _write(port / "gids/1", "0000:0000:0000:0000:0000:ffff:0a00:00" + f"{nic.switch:02x}")
    net = nic.netdev or f"ibp{SWITCH_BUS[nic.switch] + 4}s0"
    ndir = pci / "net" / net
    _write(ndir / "operstate", nic.operstate)
    _write(ndir / "dev_port", "0")
    _link(root / "class/net" / net, ndir)


def default_nics(n: int = 8) -> list[Nic]:
    return [Nic(device=f"mlx5_{i}", switch=i) for i in range(n)]


def hgx_tree(root: Path, n_nics: int = 8, n_gpus: int = 8, nics: dict[int, dict[str, Any]] | None = None,
             extra: list[Nic] = ()) -> Path:
    """An HGX-like tree at `root`: n_gpus GPU functions and n_nics compute NICs, one of each per switch (up to
    8), NIC i changed by `nics[i]` (Nic's fields), `extra` NICs added (e.g. a storage NIC). Returns root."""
    for s in range(n_gpus):
        _write(pci_device(root, s, gpu_pci(s)) / "vendor", "0x10de")
    for i, nic in enumerate(default_nics(n_nics)):
        write_nic(root, replace(nic, **(nics or {}).get(i, {})))
    for nic in extra:
        write_nic(root, nic)
    _write(root / "class/net/lo/operstate", "unknown")
    return root


def set_port(root: Path, device: str, **files: str) -> None:
    """Overwrite port 1's files of `device` in an existing tree (state="1: DOWN", rate=HDR, counters/NAME=...)."""
    port = root / "class/infiniband" / device / "ports/1"
    for name, text in files.items():
        _write(port / name.replace("__", "/"), text)


def hgx_gpus(n: int = 8, links: int = 18, version: int = 5) -> list[Any]:
    """n GPUs as NVML shows an HGX B200 board's (NVIDIA HGX B200: 18 NVLink 5 links per GPU, each to an NVSwitch;
    Fabric Manager registered every GPU in clique 0x7fff of an all-zero cluster UUID), at the tree's PCI
    addresses."""
    from trainready.fabric.nvlink import GpuFabric, NvLink

    counters = {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0}
    return [GpuFabric(i, gpu_pci(i), tuple(NvLink(k, True, version, "NVSwitch", dict(counters)) for k in range(links)),
                      None, "completed", "success", 0x7FFF, "00000000-0000-0000-0000-000000000000", None)
            for i in range(n)]


def hgx_replay(out: Path, **tree: Any) -> Path:
    """A folder as `env --capture-fabric` writes it, of a healthy HGX B200 server: out/sys (hgx_tree with `tree`)
    and out/node.json (hgx_gpus, Fabric Manager and the NVLink Subnet Manager running, nvidia_peermem loaded)."""
    import json

    from trainready.fabric.capture import node_json
    from trainready.fabric.services import GpuDirect, ServiceState

    hgx_tree(out / "sys", **tree)
    states = [ServiceState("nvidia-fabricmanager", True, "systemctl is-active nvidia-fabricmanager: active"),
              ServiceState("nvlsm", True, "systemctl is-active nvlsm: active")]
    doc = node_json(hgx_gpus(), states, GpuDirect(True, False, "nvidia_peermem loaded"))
    (out / "node.json").write_text(json.dumps(doc, indent=1) + "\n")
    return out
