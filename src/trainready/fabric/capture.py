"""A node's fabric as files: `trainready env --capture-fabric DIR` copies the sysfs files the fabric check reads
into DIR/sys (the kernel's layout, links kept relative, so TRAINREADY_SYSFS_ROOT=DIR/sys reads it like /sys) and
writes what NVML, systemd and /proc said into DIR/node.json (`trainready.fabricnode/1`); the plant
`fabric.replay=DIR` judges such a folder instead of the machine, so a site's capture becomes a test.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from trainready.errors import ConfigError
from trainready.fabric import nvlink, services
from trainready.fabric.sysfs import BDF
from trainready.util.atomic import atomic_write_text

SCHEMA = "trainready.fabricnode/1"
# The per-port files and folders the check reads (Documentation/ABI/stable/sysfs-class-infiniband).
PORT_FILES = ("state", "phys_state", "rate", "link_layer", "counters", "gids", "gid_attrs/types")
DEV_FILES = ("fw_ver", "board_id", "hca_type", "node_type")


def _copy_file(src: Path, root: Path, out: Path) -> None:
    """Copy one sysfs file (its text; sysfs sizes lie) to the same place under `out`."""
    real = Path(os.path.realpath(src))
    dst = out / real.relative_to(root)
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        dst.write_text(real.read_text(errors="replace"))
    except OSError:
        pass  # a counter the driver refuses to read: left out, as the check would find it


def _link(out: Path, root: Path, link: Path) -> None:
    """Recreate the symlink `link` (under root) under `out`, relative, pointing where it points on the node (a
    plain folder is made as a folder)."""
    if not link.is_symlink():
        (out / link.relative_to(root)).mkdir(parents=True, exist_ok=True)
        return
    real = Path(os.path.realpath(link)).relative_to(root)
    dst = out / Path(os.path.realpath(link.parent)).relative_to(root) / link.name  # the folder it really is in
    dst.parent.mkdir(parents=True, exist_ok=True)
    (out / real).mkdir(parents=True, exist_ok=True)
    if not dst.is_symlink():
        dst.symlink_to(os.path.relpath(out / real, dst.parent))


def _walk(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return [p for p in sorted(path.rglob("*")) if p.is_file()] if path.is_dir() else []


def _pci_chain(out: Path, root: Path, address: str) -> None:
    """bus/pci/devices/ADDR for the device and every bridge above it (their links make the PCIe path)."""
    real = Path(os.path.realpath(root / "bus/pci/devices" / address))
    for part in real.parts:
        if BDF.match(part):
            _link(out, root, root / "bus/pci/devices" / part)


def copy_sysfs(root: Path, out: Path, gpu_pci: list[str]) -> int:
    """Copy what the check reads from the sysfs at `root` into `out`; the number of files copied."""
    n = 0
    base = root / "class/infiniband"
    for dev in sorted(base.iterdir()) if base.is_dir() else []:
        _link(out, root, dev)
        files = [dev / f for f in DEV_FILES] + [f for port in sorted((dev / "ports").iterdir())
                                                 for name in PORT_FILES for f in _walk(port / name)]
        for f in files:
            if f.is_file():
                _copy_file(f, root, out)
                n += 1
        pci = Path(os.path.realpath(dev / "device")).name
        if BDF.match(pci):
            _link(out, root, dev / "device")
            _pci_chain(out, root, pci)
        for net in sorted((dev / "device/net").iterdir()) if (dev / "device/net").is_dir() else []:
            _link(out, root, root / "class/net" / net.name)
            for name in ("operstate", "dev_port"):
                if (net / name).is_file():
                    _copy_file(net / name, root, out)
                    n += 1
    for net in sorted((root / "class/net").iterdir()) if (root / "class/net").is_dir() else []:
        if (net / "operstate").is_file():
            _link(out, root, net)
            _copy_file(net / "operstate", root, out)
            n += 1
    for address in gpu_pci:
        if (root / "bus/pci/devices" / address).exists():
            _pci_chain(out, root, address)
    return n


def node_json(gpus: list[nvlink.GpuFabric] | str, states: list[services.ServiceState],
              gd: services.GpuDirect) -> dict[str, Any]:
    import dataclasses

    return {"schema": SCHEMA, "gpus": [dataclasses.asdict(g) for g in gpus] if isinstance(gpus, list) else gpus,
            "services": [dataclasses.asdict(s) for s in states], "gpudirect": dataclasses.asdict(gd)}


def capture(out: Path, root: Path, nv: Any = None) -> str:
    """Write DIR/sys and DIR/node.json from this node; one line saying what was written."""
    out.mkdir(parents=True, exist_ok=True)
    if (out / "sys").exists():
        shutil.rmtree(out / "sys")
    gpus = nvlink.read_gpus(nv)
    n = copy_sysfs(root, out / "sys", [g.pci for g in gpus] if isinstance(gpus, list) else [])
    states = [services.service_state(u) for u in services.PROCESSES]
    atomic_write_text(out / "node.json", json.dumps(node_json(gpus, states, services.gpudirect()), indent=1) + "\n")
    return (f"{n} sysfs file(s) under {out / 'sys'}; "
            f"{len(gpus) if isinstance(gpus, list) else 0} GPU(s) and {len(states)} service(s) in {out / 'node.json'}")


def load_node(path: Path) -> tuple[list[nvlink.GpuFabric] | str, list[services.ServiceState], services.GpuDirect]:
    """DIR/node.json back as the check's facts; a file not of this format is a ConfigError naming it."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(str(path), None, f"expected a {SCHEMA} file ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ConfigError(str(path), "schema", f"expected {SCHEMA}")
    raw = doc.get("gpus")
    gpus: list[nvlink.GpuFabric] | str = raw if isinstance(raw, str) else [
        nvlink.GpuFabric(**{**g, "links": tuple(nvlink.NvLink(**lk) for lk in g["links"])}) for g in raw]
    states = [services.ServiceState(**s) for s in doc.get("services", [])]
    return gpus, states, services.GpuDirect(**doc["gpudirect"])
