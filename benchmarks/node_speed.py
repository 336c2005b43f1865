"""`trainready node` on one GPU, cold and warm: the wall time, each check's seconds, the fingerprint battery's
seconds in its rank and where its launch's time went, resume's phases; against the targets.

Targets (1 GPU, default level): the whole command <= 20 s wall cold (printed with its ratio to the 43 s it took
on an H100 with torch 2.11.0+cu130 before the battery's and the checks' start-up were cut); the fingerprint's
standard battery <= 5 s cold, the quick battery <= 2 s.  "Cold" is a run's first `node` (a fresh interpreter,
CUDA context, cuBLAS handles, forkserver); later runs are "warm" (the OS's file cache and the driver's caches
filled).  --src runs another tree's sources (a baseline beside this one on the same machine).

    PYTHONPATH=src python3 benchmarks/node_speed.py [--runs 2] [--level standard] [--src DIR] [--label NAME]
        [--against OTHER/src]   # the two trees alternately, the ratio of their median walls printed
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

NODE_TARGET_S = 20.0  # one GPU, default level, wall
BASELINE_S = 43.0  # the same command before: 1x H100 80GB HBM3, driver 580.159.04, torch 2.11.0+cu130
BATTERY_TARGET_S = {"standard": 5.0, "quick": 2.0}


def one_run(src: str, level: str, extra: list[str]) -> tuple[float, dict]:
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "node.json"
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "trainready", "node", "--level", level, "--json", str(out),
                               *extra], env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if not out.exists():
            print(proc.stdout[-2000:], proc.stderr[-2000:], sep="\n")
            raise SystemExit(f"node_speed: no JSON written (exit {proc.returncode})")
        return wall, json.loads(out.read_text())


def show(label: str, i: int, wall: float, rep: dict, level: str) -> dict:
    checks = {r["name"]: r["duration_s"] for r in rep["results"]}
    row = {"label": label, "run": i, "wall_s": round(wall, 2), "checks_s": round(rep["duration_s"], 2),
           "status": rep["status"], "checks": {k: round(v, 2) for k, v in checks.items()}}
    for r in rep["results"]:
        d = r.get("details") or {}
        if r["name"] == "fingerprint" and d.get("devices"):
            row["battery_s"] = round(max(x["battery_s"] for x in d["devices"]), 2)
            row["fingerprint_launch_s"] = d.get("launch_s")
            row["digests"] = {e["id"]: e["digest"] for e in d["devices"][0]["entries"]}
        if r["name"] == "resume":
            row["resume_phases_s"] = d.get("phases_s") or d.get("wall_s")
    kind = "cold" if i == 0 else "warm"
    print(f"[{label}] run {i} ({kind}): wall {wall:.1f} s, checks {rep['duration_s']:.1f} s, {rep['status']}; "
          + ", ".join(f"{k} {v:.2f}" for k, v in checks.items()), flush=True)
    if "battery_s" in row:
        size = "quick" if level == "quick" else "standard"
        print(f"    fingerprint battery {row['battery_s']:.2f} s (target <= {BATTERY_TARGET_S[size]:.0f} s, ratio "
              f"{row['battery_s'] / BATTERY_TARGET_S[size]:.2f}); launch {row['fingerprint_launch_s']}", flush=True)
    if "resume_phases_s" in row:
        print(f"    resume {row['resume_phases_s']}", flush=True)
    if level == "standard":
        print(f"    node wall {wall:.1f} s: target <= {NODE_TARGET_S:.0f} s ratio {wall / NODE_TARGET_S:.2f}; "
              f"ratio to the {BASELINE_S:.0f} s baseline {wall / BASELINE_S:.2f}", flush=True)
    return row


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--level", default="standard")
    ap.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"))
    ap.add_argument("--label", default="this tree")
    ap.add_argument("--against", help="another tree's src/: its runs alternate with this tree's (the same machine, "
                    "the same minutes) and the ratio of the two median walls is printed")
    ap.add_argument("--json", help="write every run's row here")
    args, extra = ap.parse_known_args(argv)
    rows = []
    trees = [(args.label, args.src)] + ([("against", args.against)] if args.against else [])
    for i in range(args.runs):
        for label, src in trees if i % 2 == 0 else trees[::-1]:  # alternate who goes first: neither always cold
            wall, rep = one_run(src, args.level, extra)
            rows.append(show(label, i, wall, rep, args.level))
    if args.against:
        import statistics

        med = {label: statistics.median(r["wall_s"] for r in rows if r["label"] == label) for label, _ in trees}
        load = os.getloadavg()
        print(f"median wall: {args.label} {med[args.label]:.1f} s, against {med['against']:.1f} s: ratio "
              f"{med[args.label] / med['against']:.2f} ({args.runs} run(s) each, alternating; load average now "
              f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f})", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
