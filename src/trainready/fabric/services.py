"""The services an NVSwitch system needs, and GPUDirect RDMA's readiness.

NVIDIA Fabric Manager (`nvidia-fabricmanager`, process `nv-fabricmanager`) configures the NVSwitches of an HGX
H100/H200/B200 board and registers its GPUs with the NVLink fabric; on Blackwell the NVLink Subnet Manager
(`nvlsm`) trains the NVLink 5 network first (NVIDIA Fabric Manager User Guide). Running: the systemd unit is
active (`systemctl is-active UNIT`), or where systemd is not PID 1 a process of that name is in /proc (its
`comm`, which the kernel truncates to 15 characters).

GPUDirect RDMA (the NIC reading and writing GPU memory) needs the `nvidia_peermem` module (/proc/modules), or
the DMA-BUF path: Linux >= 5.12 and the open GPU kernel modules (/proc/driver/nvidia/version says "Open Kernel
Module") (NVIDIA GPUDirect RDMA documentation; NCCL's NCCL_DMABUF_ENABLE).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# systemd unit → the process names it runs (Fabric Manager User Guide; the nvlsm package's unit).
PROCESSES: dict[str, tuple[str, ...]] = {"nvidia-fabricmanager": ("nv-fabricmanager",), "nvlsm": ("nvlsm",)}
COMM_LEN = 15  # TASK_COMM_LEN - 1: /proc/PID/comm holds the first 15 characters of a process name
SYSTEMCTL_S = 2.0  # seconds `systemctl is-active` may take (it answers in ~10 ms)


@dataclass(frozen=True)
class ServiceState:
    """Whether one service runs, and how that was found."""

    unit: str
    running: bool | None
    """True running, False not, None: could not tell (no systemd, not visible from inside a container)."""
    how: str
    """The evidence: 'systemctl is-active: inactive', 'process nv-fabricmanager (pid 812)', ..."""


def _systemctl(unit: str) -> ServiceState | None:
    exe = shutil.which("systemctl")
    if exe is None or not Path("/run/systemd/system").is_dir():  # sd_booted(3): systemd is PID 1
        return None
    try:
        res = subprocess.run([exe, "is-active", unit], capture_output=True, text=True, timeout=SYSTEMCTL_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ServiceState(unit, None, f"systemctl is-active {unit}: {exc}")
    word = (res.stdout.strip() or res.stderr.strip() or f"exit {res.returncode}").splitlines()[0]
    return ServiceState(unit, word == "active", f"systemctl is-active {unit}: {word}")


def _process(unit: str, proc: Path, in_container: bool) -> ServiceState:
    names = {n[:COMM_LEN] for n in PROCESSES.get(unit, (unit,))}
    try:
        pids = [p for p in proc.iterdir() if p.name.isdigit()]
    except OSError as exc:
        return ServiceState(unit, None, f"cannot list {proc}: {exc.strerror}")
    for p in pids:
        try:
            comm = (p / "comm").read_text().strip()
        except OSError:
            continue
        if comm in names:
            return ServiceState(unit, True, f"process {comm} (pid {p.name}) in {proc}")
    where = f"no process {'/'.join(sorted(names))} in {proc}"
    if in_container:  # the host's services are not in a container's /proc: say so, do not fail the node for it
        return ServiceState(unit, None, f"{where} (inside a container: the host's services are not visible)")
    return ServiceState(unit, False, where)


def service_state(unit: str, proc: Path = Path("/proc"), in_container: bool = False,
                  use_systemd: bool = True) -> ServiceState:
    """Whether `unit` runs: systemd's word where systemd runs the host, else a process of its name."""
    found = _systemctl(unit) if use_systemd else None
    return found or _process(unit, proc, in_container)


@dataclass(frozen=True)
class GpuDirect:
    """GPUDirect RDMA's prerequisites as this host shows them."""

    peermem: bool
    """nvidia_peermem is loaded (/proc/modules)."""
    dmabuf: bool
    """The DMA-BUF path is there: Linux >= 5.12 and the open GPU kernel modules."""
    text: str
    """One line saying which, and from where."""

    @property
    def ready(self) -> bool:
        return self.peermem or self.dmabuf


def _kernel_at_least(release: str, want: tuple[int, int]) -> bool:
    try:
        major, minor = (int(x) for x in release.split("-")[0].split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= want


def gpudirect(proc: Path = Path("/proc"), release: str | None = None) -> GpuDirect:
    try:
        modules = (proc / "modules").read_text()
    except OSError:
        modules = ""
    peermem = any(line.split(" ", 1)[0] == "nvidia_peermem" for line in modules.splitlines())
    try:
        open_km = "Open Kernel Module" in (proc / "driver/nvidia/version").read_text()
    except OSError:
        open_km = False
    release = release or os.uname().release
    dmabuf = open_km and _kernel_at_least(release, (5, 12))
    parts = ["nvidia_peermem loaded" if peermem else f"nvidia_peermem not in {proc}/modules",
             "DMA-BUF: open kernel modules on Linux " + release if dmabuf else
             f"no DMA-BUF path (Linux {release}, {'open' if open_km else 'no open'} GPU kernel modules)"]
    return GpuDirect(peermem, dmabuf, "; ".join(parts))
