"""Is the fingerprint battery deterministic here?  P fresh processes each run it N times on device 0; every
entry's digest must be the same in all P x N runs.  Prints the entries that differed (the ops to leave out), the
battery's seconds per run, the largest float64 error ratio per op, and writes one run's record (the check's
rank record: key, identity, entries) to --record.

    PYTHONPATH=src python3 benchmarks/fingerprint_repeat.py --size quick --runs 10 --processes 2 --record fp.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import defaultdict

CHILD = """
import json, sys, torch
from trainready.fingerprint.battery import run_battery, settings_record
from trainready.fingerprint.key import cpu_key, gpu_key, key_id
size, runs = sys.argv[1], int(sys.argv[2])
gpu = torch.cuda.is_available()
dev = "cuda:0" if gpu else "cpu"
if not gpu:
    torch.set_num_threads(1)
out = []
for r in range(runs):
    res = run_battery(dev, size, 2, workers=max(1, (len(__import__("os").sched_getaffinity(0)))))
    print(f"run {r}: {res['battery_s']:.2f} s; slowest: " + ", ".join(f"{e['id']} {e['seconds']:.2f}" for e in
          sorted(res["entries"], key=lambda e: -e["seconds"])[:4]), file=sys.stderr, flush=True)
    out.append({"battery_s": res["battery_s"], "left_out": res["left_out"],
                "digests": {e["id"]: e["digest"] for e in res["entries"]},
                "ratios": {e["id"]: e["ratio"] for e in res["entries"]},
                "repeat_mismatches": {e["id"]: e["repeat_mismatches"] for e in res["entries"]}})
key, ident = (gpu_key(0, settings_record(True, torch.get_num_threads())) if gpu else cpu_key(0, settings_record(False, 1)))
rec = {"rank": 0, "device": dev, **ident, "key": key, "key_id": key_id(key), "size": size, "repeats": 2, **res}
print(json.dumps({"runs": out, "record": rec}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="quick", help="cpu | quick | standard")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--record", default="", help="write each process's last record here (JSON list)")
    ap.add_argument("--no-workspace", action="store_true", help="leave CUBLAS_WORKSPACE_CONFIG unset")
    a = ap.parse_args()
    env = dict(os.environ)
    if a.no_workspace:
        env.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    results = []
    for p in range(a.processes):
        cp = subprocess.run([sys.executable, "-c", CHILD, a.size, str(a.runs)], stdout=subprocess.PIPE, text=True,
                            env=env, check=False)  # stderr: the child's progress, as it goes
        if cp.returncode != 0:
            print(f"process {p} failed (exit {cp.returncode})")
            return 1
        results.append(json.loads(cp.stdout.strip().splitlines()[-1]))
    seen: dict[str, set[str]] = defaultdict(set)
    ratio: dict[str, float] = defaultdict(float)
    inter = defaultdict(int)
    for res in results:
        for run in res["runs"]:
            for k, d in run["digests"].items():
                seen[k].add(d)
                ratio[k.split("/")[0]] = max(ratio[k.split("/")[0]], run["ratios"][k])
                inter[k] += run["repeat_mismatches"][k]
    varying = sorted(k for k, v in seen.items() if len(v) > 1)
    times = [run["battery_s"] for res in results for run in res["runs"]]
    print(f"size {a.size}: {a.processes} processes x {a.runs} runs, {len(seen)} entries; "
          f"CUBLAS_WORKSPACE_CONFIG={'unset' if a.no_workspace else ':4096:8'}")
    print(f"entries with more than one digest: {varying or 'none'}; repeats differing within a run: "
          f"{sorted(k for k, v in inter.items() if v) or 'none'}")
    print(f"left out (cannot run here): {results[0]['runs'][0]['left_out'] or 'none'}")
    print(f"battery seconds per run: first {times[0]:.2f}, median {sorted(times)[len(times) // 2]:.2f}, "
          f"max {max(times):.2f}")
    print("largest float64 error ratio per op: " + ", ".join(f"{k} {v:.3g}" for k, v in sorted(ratio.items())))
    rec = results[0]["record"]
    print(f"key {rec['key_id']}: " + json.dumps(rec["key"], sort_keys=True))
    if a.record:
        with open(a.record, "w") as f:
            json.dump([r["record"] for r in results], f, indent=1, sort_keys=True)
    return 0 if not varying else 1


if __name__ == "__main__":
    sys.exit(main())
