"""The machine's state while a check measured a timing: other work on its CPUs and GPUs, and hypervisor steal.

A figure judged against a floor (busbw, TFLOP/s, GB/s, seconds per exchange) is only as good as the machine it was
measured on.  So every timing check (`Check.timing`) is measured between two readings of:

* all CPUs' time from /proc/stat (proc(5): user nice system idle iowait irq softirq steal, in USER_HZ ticks);
* this process tree's CPU time: utime + stime + cutime + cstime of every live process descended from this one
  (/proc/PID/stat fields 14-17; cutime/cstime hold the children each one reaped, so rank processes that ended
  inside the window still count as ours);
* the 1-minute load average (getloadavg(3)), reported, not judged: it lags by a minute and counts our own ranks;
* NVML's compute processes on each GPU (nvmlDeviceGetComputeRunningProcesses) that are not ours: only those
  visible in this PID namespace with a /dev/nvidia* device open count (in a container NVML reports host PIDs,
  and the same number may name an unrelated process here).

Foreign CPU = the CPUs' busy time over the window minus ours, as a number of cores kept busy on average.  The
machine is *busy* when foreign work kept more than BUSY_CORES_FRACTION of its cores busy, when the hypervisor
stole more than STEAL_FRACTION of the CPU time, or when another process computed on our GPUs.  On a busy machine
a timing that failed only within its own noise is WARN "not judged: <why, with numbers>" (suite/base.py).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainready.records import BEYOND_NOISE, NOT_JUDGED, TIMING_ONLY

if TYPE_CHECKING:
    from trainready.records import Outcome

__all__ = ["BEYOND_NOISE", "TIMING_ONLY", "MachineState", "beyond_noise", "between", "judged_on", "read"]

# Foreign work keeping more than a fifth of the cores busy.  Our own ranks compete for the same cores, so foreign
# work gets less than it would alone: on a 2-core x86 VM running other builds at load average 15, `trainready node`'s
# comm check (8 gloo ranks, ~1.2 cores of its own) read 0.8 foreign cores; the quiet figure and two busy loops'
# figure are in docs/measurements.md (benchmarks/false_alarms.py prints each run's).
BUSY_CORES_FRACTION = 0.2
# Hypervisor steal above 10% of all CPU time: the VM's vCPUs were not running a tenth of the time (a quiet cloud VM
# reads 0-1%).
STEAL_FRACTION = 0.10
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # USER_HZ: /proc's unit of CPU time


@dataclass(frozen=True)
class Reading:
    """One reading of the counters (a window is two of them)."""

    t: float  # time.monotonic(), seconds
    busy_ticks: int  # all CPUs: user + nice + system + irq + softirq
    steal_ticks: int
    total_ticks: int  # all CPUs, every column
    ours_ticks: int  # this process tree
    ours: frozenset[int] = frozenset()  # its PIDs at this reading


@dataclass(frozen=True)
class MachineState:
    """What else ran while a timing was measured."""

    cores: int  # online CPUs (os.cpu_count: the CPUs /proc/stat sums over)
    seconds: float  # the window's wall time
    foreign_cores: float  # cores other processes kept busy, on average over the window
    steal_fraction: float  # of all CPU time, stolen by the hypervisor
    load1: float  # 1-minute load average at the end (reported only)
    gpu_others: tuple[int, ...]  # PIDs of other processes computing on this machine's GPUs

    def busy(self) -> str:
        """'' on a machine quiet enough to judge a timing; else why not, with the numbers."""
        why = []
        if self.foreign_cores > BUSY_CORES_FRACTION * self.cores:
            why.append(f"other processes kept {self.foreign_cores:.1f} of {self.cores} CPU cores busy "
                       f"(load average {self.load1:.1f})")
        if self.steal_fraction > STEAL_FRACTION:
            why.append(f"the hypervisor stole {self.steal_fraction:.0%} of the CPU time")
        if self.gpu_others:
            why.append(f"{len(self.gpu_others)} other process(es) on the GPUs (PID {', '.join(map(str, self.gpu_others[:4]))})")
        return "; ".join(why)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "gpu_others": list(self.gpu_others), "busy": self.busy()}


def _stat_fields(pid: str) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()  # after "pid (comm) ": state ppid ... (comm may hold spaces)


def tree_pids(root: int | None = None) -> dict[int, int]:
    """Every live process under `root` (default: this one), itself included: PID -> its CPU ticks (utime + stime +
    cutime + cstime)."""
    root = os.getpid() if root is None else root
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or (f := _stat_fields(entry)) is None:
            continue
        pid = int(entry)
        parent[pid] = int(f[1])
        ticks[pid] = sum(int(x) for x in f[11:15])
    ours = {root}
    grew = True
    while grew:
        more = {p for p, pp in parent.items() if pp in ours and p not in ours}
        ours |= more
        grew = bool(more)
    return {p: ticks.get(p, 0) for p in ours}


def read() -> Reading:
    """The counters now."""
    try:
        cpu = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        cpu = []
    cpu += [0] * (8 - len(cpu))
    user, nice, system, _idle, _iowait, irq, softirq, steal = cpu[:8]
    tree = tree_pids()
    return Reading(time.monotonic(), user + nice + system + irq + softirq, steal, sum(cpu[:8]),
                   sum(tree.values()), frozenset(tree))


def gpu_others(ours: set[int]) -> tuple[int, ...]:
    """PIDs computing on this machine's GPUs that are not in `ours` and are visible here (NVML; () without it)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML (a CPU node): nothing to read
        return ()
    found: set[int] = set()
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(pynvml.nvmlDeviceGetHandleByIndex(i)):
                found.add(int(proc.pid))
    except Exception:  # noqa: BLE001 - a GPU that cannot list its processes reads as none
        pass
    finally:
        pynvml.nvmlShutdown()
    return tuple(sorted(p for p in found if p not in ours and _holds_a_gpu(p)))


def _holds_a_gpu(pid: int) -> bool:
    """Whether the process `pid` of this PID namespace has a /dev/nvidia* device open: NVML reports host PIDs
    inside a container, where the same number may name an unrelated process; one that cannot be read is not
    counted (a timing is downgraded only on evidence)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/dev/nvidia"):
                return True
        except OSError:
            continue
    return False


def between(start: Reading, end: Reading, gpus: bool = False) -> MachineState:
    """The state over the window from `start` to `end`; `gpus`: read NVML's processes too (a GPU check)."""
    seconds = max(end.t - start.t, 1e-9)
    busy_s = (end.busy_ticks - start.busy_ticks) / TICK
    ours_s = max(0, end.ours_ticks - start.ours_ticks) / TICK
    total = max(1, end.total_ticks - start.total_ticks)
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return MachineState(os.cpu_count() or 1, round(seconds, 3), round(max(0.0, busy_s - ours_s) / seconds, 2),
                        round((end.steal_ticks - start.steal_ticks) / total, 3), round(load1, 2),
                        gpu_others(set(end.ours)) if gpus else ())


def beyond_noise(repeats: list[float], floor: float, k: float = 3.0) -> bool:
    """A figure (higher is better) below `floor` in every repeat, by more than `k` times the repeats' own spread
    (max - min): a slow part is slow every time; a figure pushed down by other work moves between repeats."""
    if not repeats:
        return False
    best, worst = max(repeats), min(repeats)
    return best < floor and floor - best > k * (best - worst)


def judged_on(out: "Outcome", state: MachineState) -> "Outcome":
    """A timing check's outcome with the machine's state in its details; on a busy machine a FAIL that rests on
    timings within their noise becomes WARN "not judged", never a fault."""
    from dataclasses import replace

    from trainready.records import Outcome, Status

    details = {**dict(out.details), "machine": state.as_dict()}
    why = state.busy()
    if out.status != Status.FAIL or not out.details.get(TIMING_ONLY) or out.details.get(BEYOND_NOISE) or not why:
        return replace(out, details=details)
    return Outcome(Status.WARN, f"not judged: {why} while it measured (the figure: {out.message})", out.metrics,
                   remedy="Measure again with nothing else on the machine's CPUs and GPUs; a part that is slow "
                   "stays slow on a quiet machine.", details={**details, NOT_JUDGED: why})
