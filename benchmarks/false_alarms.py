"""False alarms of the main job: `trainready node` run N times on a healthy machine beside a named background.

Every drain trainready makes rests on FAIL meaning a fault, so a healthy machine must never FAIL, also when other
work shares it.  Backgrounds (each started before the first run and stopped after the last):

* quiet:  nothing else;
* busy:   two steady busy loops (one per core of a 2-core host: `while True: pass` in 2 processes);
* bursty: BURST_S of CPU and disk work (one process hashing /dev/urandom into a file, fsync'd, another spinning),
          then IDLE_S idle, repeated: a file upload, a page-cache flush, a monitoring agent.

Prints one line per run (exit, verdict, seconds, the failing checks' messages) and a summary with the ratio
FAIL / runs, and the load average before the first run (a "quiet" figure needs a quiet machine).

    PYTHONPATH=src python3 benchmarks/false_alarms.py --background bursty --runs 20 [-- node args...]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BURST_S = 2.0  # seconds of work per burst (the background the false alarm was first seen beside: ~2 s of dd)
IDLE_S = 2.0  # seconds idle between bursts
CHUNK = 1 << 20  # bytes read from /dev/urandom and written per step of a burst


def _spin(stop: mp.Event) -> None:  # type: ignore[valid-type]
    while not stop.is_set():  # type: ignore[attr-defined]
        pass


def _bursts(stop: mp.Event, scratch: str) -> None:  # type: ignore[valid-type]
    path = Path(scratch) / "burst.bin"
    with open("/dev/urandom", "rb") as rnd:
        while not stop.is_set():  # type: ignore[attr-defined]
            end = time.monotonic() + BURST_S
            with open(path, "wb") as f:
                while time.monotonic() < end:
                    f.write(rnd.read(CHUNK))
                f.flush()
                os.fsync(f.fileno())
            path.unlink()
            stop.wait(IDLE_S)  # type: ignore[attr-defined]


def _burst_spin(stop: mp.Event) -> None:  # type: ignore[valid-type]
    while not stop.is_set():  # type: ignore[attr-defined]
        end = time.monotonic() + BURST_S
        while time.monotonic() < end:
            pass
        stop.wait(IDLE_S)  # type: ignore[attr-defined]


def start_background(kind: str, scratch: str) -> tuple[mp.Event, list[mp.Process]]:  # type: ignore[valid-type]
    stop = mp.Event()
    targets: list[tuple] = {  # type: ignore[type-arg]
        "quiet": [],
        "busy": [(_spin, (stop,)), (_spin, (stop,))],
        "bursty": [(_bursts, (stop, scratch)), (_burst_spin, (stop,))],
    }[kind]
    procs = [mp.Process(target=t, args=a, daemon=True) for t, a in targets]
    for p in procs:
        p.start()
    return stop, procs


def one_run(args: list[str], env: dict[str, str], out: Path) -> tuple[int, str, float, list[str]]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "trainready", "node", "--json", str(out), *args],
                          env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if not out.exists():
        return proc.returncode, "NO RECORD", wall, [(proc.stderr or proc.stdout).strip()[-300:]]
    report = json.loads(out.read_text())
    fails = [f"{r['name']}: {r['message']}" for r in report["results"] if r["status"] in ("fail", "error")]
    return proc.returncode, report["status"].upper(), wall, fails + straggler_figures(report)


def straggler_figures(report: dict) -> list[str]:  # type: ignore[type-arg]
    """The pairwise matrix's worst pair / median pair, and each suspect's solo ratio (comm/confirm.py)."""
    comm = next((r for r in report["results"] if r["name"] == "comm"), None)
    pairs = ((comm or {}).get("details") or {}).get("comm.pairs") or {}
    m = pairs.get("seconds_matrix")
    if not m:
        return []
    vals = sorted(m[i][j] for i in range(len(m)) for j in range(i + 1, len(m)))
    med = statistics.median(vals)
    probes = [f"{p['kind']} {p['subject']} alone {p['ratio']:.2f}x" for p in pairs.get("probes", [])]
    return [f"matrix worst pair {vals[-1] / med:.2f}x median" + (f"; suspects: {', '.join(probes)}" if probes else "")]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--background", choices=("quiet", "busy", "bursty"), default="quiet")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("node_args", nargs="*", help="passed to `trainready node` (after --)")
    ns = ap.parse_args(argv)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src") + os.pathsep + env.get("PYTHONPATH", "")
    load = os.getloadavg()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        stop, procs = start_background(ns.background, tmp)
        try:
            for i in range(ns.runs):
                out = Path(tmp) / f"node{i}.json"
                rc, verdict, wall, fails = one_run(ns.node_args, env, out)
                failed += rc == 1 or verdict in ("FAIL", "ERROR", "NO RECORD")
                print(f"run {i + 1:>2}/{ns.runs}: exit {rc} {verdict:<5} {wall:6.1f} s  " + " | ".join(fails),
                      flush=True)
        finally:
            stop.set()
            for p in procs:
                p.join(5)
    print(f"false_alarms: background {ns.background}, {failed} FAIL in {ns.runs} runs "
          f"(ratio {failed / max(1, ns.runs):.2f}); load average before the first run "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
