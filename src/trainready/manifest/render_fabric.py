"""`trainready env`'s fabric tables: the RDMA ports' firmware, interface, PCI address and error counters; each
GPU's NVLinks and its NVSwitch fabric registration; the rails; the services, GPUDirect and NCCL's variables."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _table(title: str, cols: tuple[str, ...], rows: list[tuple[str, ...]]) -> Table:
    t = Table(title=title, title_justify="left")
    for c in cols:
        t.add_column(c)
    for r in rows:
        t.add_row(*r)
    return t


def _nvlink_row(g: dict[str, Any]) -> tuple[str, ...]:
    links = g.get("links") or []
    if g.get("not_applicable"):
        head = f"not applicable ({g['not_applicable']})"
        return str(g["index"]), g.get("pci") or "", head, "", "", "", ""
    active = [lk for lk in links if lk.get("active")]
    versions = sorted({str(lk.get("version")) for lk in active})
    remotes = sorted({str(lk.get("remote")) for lk in active})
    errors = sum(sum(lk.get("counters", {}).values()) for lk in links)
    fabric = (f"{g.get('fabric_state')}, {g.get('fabric_status')}, clique {g.get('clique')}" if g.get("fabric_state")
              else f"({g.get('fabric_reason')})")
    return (str(g["index"]), g.get("pci") or "", f"{len(active)} of {len(links)}", "/".join(versions),
            "/".join(remotes), str(errors), fabric)


def print_fabric(f: Any, console: Console) -> None:
    if not isinstance(f, dict):
        console.print(_table("Fabric", ("fabric",), [(str(f),)]))
        return
    ports = f.get("ports") or []
    if ports:
        console.print(_table("RDMA ports: firmware, interface, PCI, error counters (sysfs)",
                             ("port", "fw_ver", "board_id", "netdev", "PCI", "errors (non-zero)"),
                             [(f"{p['device']}:{p['port']}", str(p.get("fw_ver")), str(p.get("board_id")),
                               f"{p.get('netdev')} ({p.get('netdev_state')})", str(p.get("pci")),
                               ", ".join(f"{k} {v}" for k, v in (p.get("counters") or {}).items() if v) or "none")
                              for p in ports]))
    gpus = f.get("gpus") or []
    if gpus:
        console.print(_table("NVLink and the NVSwitch fabric (NVML)",
                             ("GPU", "PCI", "active links", "version", "reaches", "link errors", "fabric"),
                             [_nvlink_row(g) for g in gpus]))
    rails = f.get("rails") or []
    if rails:
        console.print(_table("Rails: each GPU's nearest NIC by PCIe path", ("GPU", "PCI", "NIC", "NIC PCI", "via"),
                             [(str(r["gpu"]), r["gpu_pci"], str(r.get("nic")), str(r.get("nic_pci")), r["via"])
                              for r in rails]))
    nccl = f.get("nccl") or {}
    rows = [(s["unit"], s["how"]) for s in f.get("services") or []]
    rows += [("GPUDirect RDMA", (f.get("gpudirect") or {}).get("text", "?")),
             ("NVML", f.get("nvml") or "read")]
    rows += [(f"NCCL_{k.upper()}", str(v) if v is not None else "(unset)") for k, v in nccl.items()]
    console.print(_table(f"Fabric services, GPUDirect, NCCL (sysfs at {f.get('root')})", ("what", "found"), rows))
