"""`trainready node --health-check` wall time on the CPU default, against the 20 s target (Slurm kills a
HealthCheckProgram after 60 s before 26.05; trainready keeps a 3x margin).

    PYTHONPATH=src python benchmarks/health_check.py [--repeats 3]

Reported side by side: the whole command (interpreter start + imports + checks) and the checks alone, as
the command prints them, so a slow start (torch's import on a loaded host) is told apart from slow checks.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 20.0
SRC = Path(__file__).resolve().parents[1] / "src"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               SLURMD_NODENAME="health-bench")  # not a Slurm node: a failure could not drain anything real
    walls, checks = [], []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "trainready", "node", "--health-check"], capture_output=True,
                           text=True, env=env)
        walls.append(time.perf_counter() - t0)
        m = re.search(r"; ([\d.]+) s\)", p.stdout)
        checks.append(float(m.group(1)) if m else float("nan"))
        print(p.stdout.strip() or p.stderr.strip(), flush=True)
    worst = max(walls)
    print(f"node --health-check: slowest {worst:.1f} s wall (checks alone {max(checks):.1f} s), target {TARGET_S:.0f} s, "
          f"ratio {worst / TARGET_S:.2f} ({'meets' if worst <= TARGET_S else 'MISSES'} the target); load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
