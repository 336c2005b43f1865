"""`trainready cluster sweep` overhead per node on the local preemption cluster (`scripts/local-slurm.sh up
--preempt --cluster sweep --nodes 4`): slurmctld RPCs per node (`sdiag`, reset just before the sweep, counted by
message type; the measuring `sdiag` itself left out) and seconds of wall outside the checks (the sweep's wall time
minus the longest task's own acceptance, `task_s` in its record: the tasks run side by side).

    SLURM_CONF=/etc/slurm-sweep/slurm.conf .venv/bin/python benchmarks/sweep_overhead.py [--level light]

Every node is this host (multiple slurmd), so the figures are the sweep's own work, not a fleet's network.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_scale import rpc_counts  # noqa: E402 - the same sdiag parsing as the fleet's scale benchmark

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--level", default="light")
    ap.add_argument("--partition", default="sweep")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["sdiag", "--reset"], check=True, capture_output=True)
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "trainready", "cluster", "sweep", "-p", a.partition, "--results", d,
                            "--spec", "example:local-slurm", "--level", a.level, "--time", "5:00"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
        wall = time.perf_counter() - t0
        rpcs = rpc_counts(subprocess.run(["sdiag"], capture_output=True, text=True).stdout)
        doc = json.loads((Path(d) / "sweep" / "last.json").read_text())
        tasks = [json.loads(Path(f).read_text()).get("task_s", 0.0)
                 for f in glob.glob(f"{d}/runs/*/nodes/*.json") if not f.endswith(".progress.json")]
    n = len(doc["swept"])
    if p.returncode not in (0, 1) or not n:
        raise SystemExit(f"sweep exit {p.returncode}, {n} node(s) swept: {p.stderr[-2000:]}")
    total = sum(rpcs.values())
    print(f"sweep of {n} node(s) at --level {a.level}: wall {wall:.1f} s, longest task's acceptance "
          f"{max(tasks):.1f} s, outside the checks {wall - max(tasks):.1f} s ({(wall - max(tasks)) / n:.1f} s per node)")
    print(f"slurmctld RPCs: {total} ({total / n:.1f} per node); by type: "
          + ", ".join(f"{k} {v}" for k, v in rpcs.most_common()))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
