"""What the fingerprint check adds to `trainready node`: the same node run with and without it, alternately, in
one run of this script (so a loaded machine loads both alike); the median wall time of each, the difference against the
budget (3 s on the CPU default; on a GPU the battery's own seconds per GPU against 2 s quick, 10 s standard).

    PYTHONPATH=src python3 benchmarks/fingerprint_cost.py [--rounds 3] [--level quick] [--base versions,matmul]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGET = {"cpu": 3.0, "quick": 2.0, "standard": 10.0}  # s: added on a CPU node; battery per GPU on a GPU


def _node(checks: str, level: str, out: Path) -> tuple[float, dict]:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "trainready", "node", "--only", checks, "--level", level, "--json",
                    str(out)], capture_output=True, text=True, check=False)
    return time.perf_counter() - t0, json.loads(out.read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--level", default="quick")
    ap.add_argument("--base", default="versions,matmul", help="the checks run without and with fingerprint")
    a = ap.parse_args()
    without, with_fp, check_s, battery = [], [], [], []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(a.rounds):
            t, _doc = _node(a.base, a.level, Path(d) / "a.json")
            without.append(t)
            t, doc = _node(a.base + ",fingerprint", a.level, Path(d) / "b.json")
            with_fp.append(t)
            fp = next(r for r in doc["results"] if r["name"] == "fingerprint")
            check_s.append(fp["duration_s"])
            devs = fp["details"].get("devices", [])
            battery += [x["battery_s"] for x in devs]
            size = devs[0]["size"] if devs else "cpu"
    added = statistics.median(with_fp) - statistics.median(without)
    print(f"node --only {a.base} --level {a.level}: median {statistics.median(without):.2f} s; with fingerprint "
          f"{statistics.median(with_fp):.2f} s ({a.rounds} rounds each, alternating)")
    print(f"added: {added:.2f} s (the check's own duration: median {statistics.median(check_s):.2f} s, slowest "
          f"{max(check_s):.2f} s); battery per device: median {statistics.median(battery):.2f} s, slowest "
          f"{max(battery):.2f} s ({size} battery)")
    budget = BUDGET[size]
    figure = added if size == "cpu" else max(battery)
    print(f"{'added' if size == 'cpu' else 'battery per GPU'} / budget {budget:g} s = {figure / budget:.2f}")
    return 0 if figure <= budget else 1


if __name__ == "__main__":
    sys.exit(main())
