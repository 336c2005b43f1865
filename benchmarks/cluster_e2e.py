"""`trainready cluster run` end to end on the local 3-node Slurm cluster (scripts/local-slurm.sh up first):
wall time of each run against the 180 s target, and whether repeated healthy runs give every node the
same verdict (stability: tools in this field are criticised for verdicts that flip between identical runs).

    scripts/local-slurm.sh up
    PYTHONPATH=src python benchmarks/cluster_e2e.py [--repeats 10] [--only versions,matmul,train_step]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 180.0  # target: a fleet run on the local cluster in <= 180 s on a 2-core x86 VM
SRC = Path(__file__).resolve().parents[1] / "src"


def one(results: Path, only: str) -> tuple[float, int, dict[str, bool]]:
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    argv = [sys.executable, "-m", "trainready", "cluster", "run", "-N", "3", "--results", str(results),
            "--spec", "example:local-slurm", "--level", "quick", "--time", "5:00", "--json", str(results) + ".json"]
    if only:
        argv += ["--only", only]
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    took = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        raise SystemExit(f"cluster run failed (exit {p.returncode}): {p.stderr.strip().splitlines()[-1:]}")
    doc = json.loads(Path(str(results) + ".json").read_text())
    return took, p.returncode, {n["node"]: n["accepted"] for n in doc["nodes"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--only", default="", help="node checks per node (default: the whole quick level)")
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cluster-e2e-"))
    times, verdicts = [], []
    for i in range(a.repeats):
        took, rc, v = one(root / f"run{i}", a.only)
        times.append(took)
        verdicts.append(v)
        marks = " ".join(f"{n}={'accept' if ok else 'REJECT'}" for n, ok in v.items())
        print(f"run {i + 1}/{a.repeats}: {took:.1f} s  exit {rc}  {marks}", flush=True)
    worst = max(times)
    print(f"cluster run, 3 nodes, level quick{' --only ' + a.only if a.only else ''}: median {sorted(times)[len(times) // 2]:.1f} s, "
          f"slowest {worst:.1f} s   target {TARGET_S:.0f} s   ratio {worst / TARGET_S:.2f} "
          f"({'meets' if worst <= TARGET_S else 'MISSES'} the target)")
    same = all(v == verdicts[0] for v in verdicts)
    print(f"stability: {a.repeats} healthy runs, every node's verdict the same in all: {same} "
          f"({'all accepted' if same and all(verdicts[0].values()) else verdicts})")


if __name__ == "__main__":
    main()
