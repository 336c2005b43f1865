"""How long `trainready selftest` takes on the CPU default, against the 5-minute target.

Runs every self-test case (the real CLI, one fresh process per case, as `trainready selftest`
does) and prints each case's seconds, the total, and total / 300 s (target <= 1.0).  Side by side,
in the same run: the start-up cost of one `python -m trainready node --list` process (interpreter,
torch and the check registry imported, nothing run), times the number of case processes: the part of
the total that is start-up, not work.

    PYTHONPATH=src python3 benchmarks/selftest_time.py
    PYTHONPATH=src python3 benchmarks/selftest_time.py --only matmul.corrupt,resume.skip_rng
    PYTHONPATH=src python3 benchmarks/selftest_time.py --with-cluster   # also the cluster.* cases (Slurm up)

The cluster.* cases (each a `cluster run` on the local Slurm cluster) are left out unless
--with-cluster; the 5-minute target holds with them.  Cases run side by side (selftest/schedule.py), and
each family's control run is one more process.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

TARGET_S = 300.0  # target: every CPU-applicable fault detected in <= 5 minutes on the 2-core machine


def startup_s() -> tuple[float, float]:
    """Seconds of one `node --list`: (a new interpreter, a fork of a zygote started beforehand)."""
    import tempfile
    from pathlib import Path

    from trainready.selftest.zygote import Zygote

    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "trainready", "node", "--list"], capture_output=True, env=os.environ,
                   check=True)
    fresh = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        z = Zygote(os.environ, Path(tmp))
        try:
            z.run(["--version"], os.environ, Path(tmp), Path(tmp) / "o", Path(tmp) / "e", 120)  # until it is ready
            t0 = time.perf_counter()
            z.run(["node", "--list"], os.environ, Path(tmp), Path(tmp) / "o", Path(tmp) / "e", 120)
            forked = time.perf_counter() - t0
        finally:
            z.close()
    return fresh, forked


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--with-cluster", action="store_true", help="also the cluster.* cases (need Slurm)")
    args = ap.parse_args()
    from trainready.selftest.cases import CASES
    from trainready.selftest.schedule import run_selftest

    names = {n for n in args.only.split(",") if n}
    cases = [c for c in CASES if (not names or c.name in names) and (args.with_cluster or c.needs != "slurm")]
    boot = startup_s()
    doc = run_selftest(cases, on_done=lambda r: print(f"{r.outcome:<9} {r.seconds:7.1f} s  {r.name}", flush=True))
    ran = sum(1 for c in doc["cases"] if c["outcome"] != "skipped")
    print(f"\nselftest: {doc['duration_s']:.1f} s for {len(cases)} cases ({doc['counts']}); "
          f"target {TARGET_S:.0f} s; ratio {doc['duration_s'] / TARGET_S:.2f} (<= 1.0 meets it)")
    fresh, forked = boot
    print(f"start-up of one command: {fresh:.2f} s as a new interpreter, {forked:.2f} s forked from the zygote "
          f"(ratio {forked / fresh:.2f}); x {ran} case processes: {fresh * ran:.0f} s -> {forked * ran:.0f} s; "
          f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
