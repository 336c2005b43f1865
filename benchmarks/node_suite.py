"""Wall time of `trainready node` on this machine, with each check's duration.

Targets: <= 60 s on the 2-core CPU development machine, <= 30 s on a 1x H200 machine with no --spec
(the automatic spec: the GPUs NVML sees).  Extra arguments are passed to `trainready node` (e.g.
--spec example:h200-8x).  Prints the wall time, each check's seconds and resume's A/B/C walls.

    PYTHONPATH=src python3 benchmarks/node_suite.py [--spec ...]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_CPU_S = 60.0
TARGET_GPU_S = 30.0  # 1x H200, no --spec


def main(argv: list[str]) -> int:
    try:
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        gpus = 0
    target = TARGET_GPU_S if gpus else TARGET_CPU_S
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "node.json"
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "trainready", "node", "--json", str(out), *argv],
                              env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if not out.exists():
            print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
            print(f"node_suite: no JSON written (exit {proc.returncode})")
            return 1
        report = json.loads(out.read_text())
    print(f"{'check':<16} {'status':<6} {'seconds':>8}")
    for r in report["results"]:
        print(f"{r['name']:<16} {r['status']:<6} {r['duration_s']:>8.2f}")
        walls = (r.get("details") or {}).get("wall_s") if r["name"] == "resume" else None
        if walls:
            print("  resume runs: " + ", ".join(f"{k} {v:.1f} s" for k, v in walls.items()))
    first = (proc.stdout.splitlines() or [""])[0]
    print(f"first line: {first}")
    where = f"{gpus} GPU(s)" if gpus else "CPU only"
    verdict = "OK" if wall <= target else "OVER TARGET"
    print(f"trainready node: exit {proc.returncode}, verdict {report['status']}; wall {wall:.1f} s "
          f"(checks {report['duration_s']:.1f} s) on {where}, {os.cpu_count()} cores; "
          f"target <= {target:.0f} s: ratio {wall / target:.2f} {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
