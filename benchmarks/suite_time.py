"""Wall time of the README's test command and its 10 slowest tests, against the 6-minute target.

Runs `python -m pytest -q -n 4 --durations=10` (the README's second command without its set-up lines) in this
checkout, prints the wall time, the CPU seconds the whole run used (/proc/stat: every process on the host, so
run it on a quiet machine and read the load average it prints), the 10 slowest test phases as pytest reports
them, and the ratio wall / target.

    .venv/bin/python benchmarks/suite_time.py [extra pytest args]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 360.0  # the README test command on a quiet 2-core machine, Slurm and chromium installed
REPO = Path(__file__).resolve().parents[1]


def cpu_seconds() -> float:
    """Busy CPU seconds of the whole host since boot (/proc/stat: user+nice+system+irq+softirq+steal)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str]) -> int:
    load = os.getloadavg()
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "4", "--durations=10", *argv]
    c0, t0 = cpu_seconds(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    out = proc.stdout.splitlines()
    start = next((i for i, line in enumerate(out) if "slowest 10 durations" in line), None)
    if start is not None:
        print("\n".join(out[start:start + 11]))
    for line in out:  # what failed, as pytest's short summary names it (-ra)
        if line.startswith(("FAILED ", "ERROR ")):
            print(line)
    summary = next((line for line in reversed(out) if re.search(r"\d+ (passed|failed)", line)), "(no summary)")
    print(f"suite_time: {summary.strip('= ')}; wall {wall:.1f} s, {cpu:.0f} CPU s on {os.cpu_count()} cores; "
          f"load average before {load[0]:.2f}; target <= {TARGET_S:.0f} s: ratio {wall / TARGET_S:.2f}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
