"""Host settings that must be alike on every node of a fleet: kernel tunables, the process limits a job's task
runs with, the size of /dev/shm, NUMA balancing, transparent hugepages, the CPU frequency governor, the GPUs'
modes (NVML, manifest/gpumodes.py) and the InfiniBand ports.

Each setting is ``{"value": ..., "source": ...}``: the value as read (an integer, a float, or text), and where it
came from (a /proc/sys or /sys path, the getrlimit(2) call, NVML's function).  A setting that cannot be read is
``"unavailable: why"`` with its source, as every probe says it.  The roots are parameters so that tests read fake
trees.  Keys are the sysctl names where there is one (``net.core.rmem_max``), else a short dotted name.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Any

from trainready.manifest import ib, read_text, unavailable

# sysctl keys read from /proc/sys (sysctl(8): dots become slashes), each with what it bounds
SYSCTLS: dict[str, str] = {
    "net.core.rmem_max": "largest socket receive buffer a process may ask for (bytes)",
    "net.core.wmem_max": "largest socket send buffer a process may ask for (bytes)",
    "net.ipv4.tcp_rmem": "TCP receive buffer min, default, max (bytes; autotuning range)",
    "net.ipv4.tcp_wmem": "TCP send buffer min, default, max (bytes; autotuning range)",
    "kernel.numa_balancing": "automatic NUMA page migration (0 off, 1 on)",
}
THP = ("enabled", "defrag")  # /sys/kernel/mm/transparent_hugepage/{enabled,defrag}: "always [madvise] never"
GIB = 2**30  # bytes per GiB


def setting(value: Any, source: str) -> dict[str, Any]:
    """One setting as the manifest holds it."""
    return {"value": value, "source": source}


def _number_or_text(text: str) -> int | str:
    """'212992' → 212992; '4096 131072 6291456' → the same text with single spaces."""
    words = text.split()
    return int(words[0]) if len(words) == 1 and words[0].lstrip("-").isdigit() else " ".join(words)


def sysctls(proc_sys: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for key in SYSCTLS:
        path = proc_sys / key.replace(".", "/")
        text = read_text(path)
        out[key] = setting(_number_or_text(text) if text is not None else
                           unavailable(f"{path} absent or unreadable (this kernel has no such tunable, or "
                                       "/proc/sys is not mounted here)"), str(path))
    return out


def limit_kib(which: int) -> int | str:
    """A soft limit in KiB (ulimit -l shows KiB), or 'unlimited'."""
    soft, _hard = resource.getrlimit(which)
    return "unlimited" if soft == resource.RLIM_INFINITY else int(soft) // 1024  # bytes → KiB


def limits() -> dict[str, dict[str, Any]]:
    """The limits this process (a job's task) runs with: what every rank it starts inherits."""
    soft_nofile, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    nofile: int | str = "unlimited" if soft_nofile == resource.RLIM_INFINITY else int(soft_nofile)
    return {
        "ulimit.memlock": setting(limit_kib(resource.RLIMIT_MEMLOCK),
                                  "getrlimit(RLIMIT_MEMLOCK) soft limit of this task, KiB (ulimit -l)"),
        "ulimit.nofile": setting(nofile, "getrlimit(RLIMIT_NOFILE) soft limit of this task, files (ulimit -n)"),
    }


def shm_size(shm: Path) -> dict[str, Any]:
    """The size of the filesystem on /dev/shm in GiB (statvfs: f_blocks x f_frsize), 3 decimals (1 MiB)."""
    try:
        st = os.statvfs(shm)
    except OSError as exc:
        return setting(unavailable(f"statvfs({shm}): {exc.strerror}"), f"statvfs({shm})")
    return setting(round(st.f_blocks * st.f_frsize / GIB, 3), f"statvfs({shm}) f_blocks x f_frsize, GiB")


def bracketed(text: str) -> str:
    """'always [madvise] never' → 'madvise' (the kernel marks the active choice with brackets)."""
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    return text.strip()


def thp(sys: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for name in THP:
        path = sys / "kernel/mm/transparent_hugepage" / name
        text = read_text(path)
        out[f"thp.{name}"] = setting(bracketed(text) if text is not None else
                                     unavailable(f"{path} absent (kernel built without transparent hugepages)"),
                                     str(path))
    return out


def governor(sys: Path) -> dict[str, Any]:
    """The CPU frequency governor of every CPU: one name when all agree, else 'NAME xN, NAME xM'."""
    base = sys / "devices/system/cpu"
    src = f"{base}/cpu*/cpufreq/scaling_governor"
    try:
        cpus = sorted(p for p in base.iterdir() if p.name[3:].isdigit() and p.name.startswith("cpu"))
    except OSError as exc:
        return setting(unavailable(f"cannot list {base}: {exc.strerror}"), src)
    found = [g for g in (read_text(c / "cpufreq/scaling_governor") for c in cpus) if g is not None]
    if not found:
        return setting(unavailable("no cpufreq driver here (no scaling_governor under "
                                   f"{base}/cpu*/cpufreq: a VM or a BIOS that keeps frequency control)"), src)
    counts = {g: found.count(g) for g in sorted(set(found))}
    return setting(found[0] if len(counts) == 1 else ", ".join(f"{g} x{n}" for g, n in counts.items()), src)


def ib_ports(sys: Path) -> dict[str, dict[str, Any]]:
    """Per InfiniBand/RoCE port: state, rate and the MTU of the device's network interface (IPoIB or the RoCE
    Ethernet port: /sys/class/infiniband/DEV/device/net/IF/mtu; the IB path MTU is not in sysfs)."""
    root = sys / "class/infiniband"
    ports = ib.ports(root)
    if isinstance(ports, str):
        return {}  # no HCA: no ib.* keys at all (a CPU or Ethernet-only fleet compares nothing here)
    out: dict[str, dict[str, Any]] = {}
    for p in ports:
        key = f"ib.{p['device']}/{p['port']}"
        pdir = root / p["device"] / "ports" / p["port"]
        out[f"{key}.state"] = setting(p["state"], str(pdir / "state"))
        out[f"{key}.rate"] = setting(p["rate"], str(pdir / "rate"))
        nets = sorted((root / p["device"] / "device/net").glob("*/mtu"))
        mtu = read_text(nets[0]) if nets else None
        out[f"{key}.mtu"] = setting(_number_or_text(mtu) if mtu else unavailable("no network interface under "
                                    f"{root / p['device'] / 'device/net'}"), str(nets[0]) if nets else "sysfs")
    return out


def collect(proc_sys: Path = Path("/proc/sys"), sys: Path = Path("/sys"), shm: Path = Path("/dev/shm"),
            nvml: Any = None) -> dict[str, dict[str, Any]]:
    """Every host setting, by key (sorted)."""
    from trainready.manifest.gpumodes import gpu_modes

    out = {**sysctls(proc_sys), **limits(), "shm.size_gib": shm_size(shm), **thp(sys),
           "cpu.governor": governor(sys), **gpu_modes(nvml), **ib_ports(sys)}
    return dict(sorted(out.items()))


def values(settings: Any) -> dict[str, str]:
    """key → the value as text (what the fleet compares); {} for a manifest without the section."""
    if not isinstance(settings, dict):
        return {}
    return {k: str(v.get("value")) if isinstance(v, dict) else str(v) for k, v in settings.items()}
