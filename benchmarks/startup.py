"""Start-up time of the CLI: `trainready --help` and `trainready plan --help` vs a bare `python -c pass`.

Each command runs in a fresh interpreter (as a user runs it), interleaved with the bare
interpreter so both see the same machine load; prints the median wall time and CPU time
(user + system: what the command itself costs, less inflated by a loaded machine) of each and
their ratio to the bare interpreter.  Target: each help under 1 s.  What made it ~4 s was
importing torch before parsing; tests/test_startup_help.py asserts torch stays unimported.

    PYTHONPATH=src python3 benchmarks/startup.py              # 7 runs each
    PYTHONPATH=src python3 benchmarks/startup.py --reps 15
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
CASES = {
    "python -c pass": ["-c", "pass"],
    "trainready --help": ["-m", "trainready", "--help"],
    "trainready plan --help": ["-m", "trainready", "plan", "--help"],
    "trainready --version": ["-m", "trainready", "--version"],
    "trainready spec show": ["-m", "trainready", "spec", "show"],
}


def _once(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s of the child: user + system, which a loaded machine inflates far less than wall)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7, help="runs of each command (median reported)")
    a = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for args in CASES.values():  # warm the file cache and the .pyc files once
        _once(args, env)
    wall: dict[str, list[float]] = {k: [] for k in CASES}
    cpu: dict[str, list[float]] = {k: [] for k in CASES}
    for _ in range(a.reps):
        for name, args in CASES.items():  # interleaved: same load for every case
            w, c = _once(args, env)
            wall[name].append(w)
            cpu[name].append(c)
    bare_w, bare_c = statistics.median(wall["python -c pass"]), statistics.median(cpu["python -c pass"])
    print(f"load average (1 min) {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {a.reps} runs each, medians")
    print(f"{'command':<24} {'wall s':>7} {'× bare':>7} {'CPU s':>7} {'× bare':>7}")
    for name in CASES:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"{name:<24} {w:7.3f} {w / bare_w:7.1f} {c:7.3f} {c / bare_c:7.1f}")
    keys = ("trainready --help", "trainready plan --help")
    worst_w = max(statistics.median(wall[k]) for k in keys)
    worst_c = max(statistics.median(cpu[k]) for k in keys)
    print(f"target --help and plan --help < 1 s: wall {worst_w:.3f} s ({'met' if worst_w < 1 else 'NOT met'}), "
          f"CPU {worst_c:.3f} s ({'met' if worst_c < 1 else 'NOT met'})")


if __name__ == "__main__":
    main()
