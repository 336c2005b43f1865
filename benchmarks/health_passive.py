"""The passive `node --health-check` against the active one (`--health-check --active`, the compute checks that
import torch), side by side on this machine, and the passive one's target: <= 1 s wall.

    PYTHONPATH=src python benchmarks/health_passive.py [--repeats 5]

Each run is a fresh interpreter, as Slurm starts its HealthCheckProgram.  SLURMD_NODENAME names no Slurm node and
SLURM_CONF points nowhere, so a failure on this machine (e.g. a GPU spec without GPUs) drains nothing real.  On a
machine without an NVIDIA driver the passive check reads no GPU (NVML absent: its figure is the start-up, the
kernel log and the state file); its figure on a GPU node, with NVML reading each GPU, is not measured here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 1.0
SRC = Path(__file__).resolve().parents[1] / "src"


def _wall(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "trainready", "node", "--health-check", *argv], capture_output=True,
                       text=True, env=env)
    took = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        raise SystemExit(f"exit {p.returncode}: {p.stdout}{p.stderr}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p),
               SLURMD_NODENAME="health-bench", SLURM_CONF="/nonexistent/slurm.conf")
    with tempfile.TemporaryDirectory() as d:
        state = ["--health-state", str(Path(d) / "state.json")]
        passive, active = [], []
        for _ in range(a.repeats):  # interleaved, so a burst of load on the host falls on both
            passive.append(_wall(state, env))
            active.append(_wall(["--active"], env))
    p, q = statistics.median(passive), statistics.median(active)
    print(f"passive: median {p:.2f} s, slowest {max(passive):.2f} s (target {TARGET_S:.0f} s: "
          f"{'meets' if max(passive) <= TARGET_S else 'MISSES'} it)")
    print(f"active (--active, torch): median {q:.2f} s, slowest {max(active):.2f} s")
    print(f"ratio passive/active {p / q:.3f} ({q / p:.0f}x faster); {a.repeats} runs each, interleaved; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
