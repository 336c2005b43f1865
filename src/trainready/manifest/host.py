"""Host facts: name resolution, OS, kernel, CPU, NUMA, memory, limits, time sync.

A common rendezvous trap: Debian/Ubuntu's default /etc/hosts maps the hostname to
127.0.1.1, so a rendezvous that advertises `hostname` sends peers to a loopback
address.  `loopback` says whether any address the hostname resolves to is one.
"""

from __future__ import annotations

import ipaddress
import os
import platform
import resource
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any, Mapping

from trainready.manifest import guarded, read_text, unavailable

# Time-sync daemons recognised by their process name (/proc/<pid>/comm).
TIME_DAEMONS = ("chronyd", "ntpd", "systemd-timesyncd", "timesyncd", "ptp4l", "phc2sys", "openntpd")


def resolve(hostname: str) -> dict[str, Any]:
    """Addresses `hostname` resolves to and whether any is loopback (127.0.0.0/8, ::1)."""
    try:
        infos = socket.getaddrinfo(hostname, None, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        return {"addresses": unavailable(f"cannot resolve {hostname!r}: {exc.strerror or exc}"), "loopback": None}
    addrs = sorted({str(i[4][0]).split("%")[0] for i in infos})
    loop = any(ipaddress.ip_address(a).is_loopback for a in addrs)
    return {"addresses": addrs, "loopback": loop}


def os_release_fields(path: str = "/etc/os-release") -> dict[str, str] | None:
    """KEY=value pairs of os-release(5), quotes removed; None when the file is not readable."""
    text = read_text(path)
    if text is None:
        return None
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and not line.lstrip().startswith("#"))
    return {k.strip(): v.strip().strip("\"'") for k, v in pairs}


def os_release(path: str = "/etc/os-release") -> str:
    fields = os_release_fields(path)
    if fields is None:
        return unavailable(f"{path} not readable")
    return fields.get("PRETTY_NAME", fields.get("NAME", "?"))


def name_version(fields: Mapping[str, str]) -> str:
    """NAME + VERSION_ID of os-release fields, e.g. 'Ubuntu 24.04': what spec `software.os` is matched
    against.  os-release(5): NAME defaults to 'Linux'; VERSION_ID is absent on rolling releases."""
    return f"{fields.get('NAME') or 'Linux'} {fields.get('VERSION_ID', '')}".strip()


def os_version(path: str = "/etc/os-release") -> str:
    """`name_version` of this machine's os-release."""
    fields = os_release_fields(path)
    if fields is None:
        return unavailable(f"{path} not readable")
    return name_version(fields)


def cpu_model(path: str = "/proc/cpuinfo") -> str:
    text = read_text(path)
    if text is None:
        return unavailable(f"{path} not readable")
    for line in text.splitlines():
        if line.lower().startswith(("model name", "cpu model", "processor\t: arm")):
            return line.split(":", 1)[1].strip()
    return platform.processor() or unavailable("no model name in /proc/cpuinfo")


def numa_nodes(root: str = "/sys/devices/system/node") -> int | str:
    p = Path(root)
    if not p.is_dir():
        return unavailable(f"{root} absent (kernel without NUMA support)")
    return len([d for d in p.iterdir() if d.name.startswith("node") and d.name[4:].isdigit()])


def mem_total_gib(path: str = "/proc/meminfo") -> float | str:
    text = read_text(path)
    for line in (text or "").splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 2**20, 2)  # /proc/meminfo gives kB (KiB) → GiB
    return unavailable(f"no MemTotal in {path}")


def _limit(which: int) -> dict[str, Any]:
    soft, hard = resource.getrlimit(which)
    fmt = lambda v: "unlimited" if v == resource.RLIM_INFINITY else int(v)  # noqa: E731
    return {"soft": fmt(soft), "hard": fmt(hard)}


def time_sync(proc: str = "/proc") -> dict[str, Any]:
    """Which time-sync daemons run, and systemd's NTPSynchronized where timedatectl exists."""
    running: set[str] = set()
    try:
        for d in os.listdir(proc):
            if d.isdigit():
                comm = read_text(f"{proc}/{d}/comm")
                if comm in TIME_DAEMONS:
                    running.add(comm)
    except OSError as exc:
        return {"daemons": unavailable(f"cannot list {proc}: {exc.strerror}")}
    out: dict[str, Any] = {"daemons": sorted(running)}
    if shutil.which("timedatectl"):
        try:
            r = subprocess.run(
                ["timedatectl", "show", "-p", "NTPSynchronized", "--value"],
                capture_output=True, text=True, timeout=5,
            )
            out["ntp_synchronized"] = r.stdout.strip() == "yes" if r.returncode == 0 else unavailable(
                (r.stderr.strip() or f"timedatectl exit {r.returncode}")
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            out["ntp_synchronized"] = unavailable(f"timedatectl: {exc}")
    else:
        out["ntp_synchronized"] = unavailable("timedatectl not installed (no systemd; typical in containers)")
    return out


def collect() -> dict[str, Any]:
    hostname = socket.gethostname()
    try:
        affinity: int | str = len(os.sched_getaffinity(0))
    except (AttributeError, OSError) as exc:
        affinity = unavailable(str(exc))
    return {
        "hostname": hostname,
        "fqdn": guarded(socket.getfqdn),
        "resolves_to": resolve(hostname),
        "os": os_release(),
        "os_version": os_version(),  # NAME + VERSION_ID: what `spec init` pins as software.os
        "kernel": platform.release(),
        "arch": platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_logical_cores": os.cpu_count() or unavailable("os.cpu_count() returned None"),
        "cpu_cores_usable": affinity,  # sched_getaffinity: the cores this process may run on (cgroup/taskset)
        "numa_nodes": numa_nodes(),
        "memory_gib": mem_total_gib(),
        "ulimit_nofile": guarded(lambda: _limit(resource.RLIMIT_NOFILE)),
        "ulimit_stack_bytes": guarded(lambda: _limit(resource.RLIMIT_STACK)),
        "time_sync": guarded(time_sync),
    }
