"""False alarms against faults caught: the main job, the comm check alone and the sweep's trend judge, each run on a
healthy machine beside three background loads, with a planted straggler and a planted decline under each.

Every drain trainready makes rests on FAIL meaning a fault, so a healthy machine must never FAIL, whatever shares
it; a judgment the machine's noise makes unreliable says "not judged" (a WARN), never FAIL; and a real fault that
stands out beyond the noise is still caught.  Backgrounds (each started before its first run, stopped after):

* quiet:  nothing else;
* busy:   two steady busy loops (`while True: pass` in 2 processes);
* bursty: 2 x cores processes, half writing /dev/urandom to a file (fsync'd), half spinning, BURST_S on and
          IDLE_S off: a load average of 2x the cores during a burst (a file upload, a page-cache flush, a build).

Under each: `trainready node` (the README's main job) RUNS times; `trainready node --only comm` RUNS times; the same
with a planted slow link (ranks 0 and 3 sleep 20 ms per pairwise exchange: must FAIL); `trainready node --only
train_step` SWEEPS times, its tokens/s fed to the sweep's trend judge (cluster/sweep/trend.py) in order as a node's
history, and the same history with the planted 5%-a-sweep decline (`--plant cluster.decline`: must WARN by the
fifth).  Prints one line per run and a table: FAIL / WARN / of them "not judged" per job and load, and whether
each planted fault was caught; the load average before each background.

    PYTHONPATH=src python3 benchmarks/false_alarms.py [--runs 3] [--sweeps 6] [--background quiet,busy,bursty]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BURST_S = 3.0  # seconds of work per burst
IDLE_S = 1.0  # seconds idle between bursts
CHUNK = 1 << 20  # bytes read from /dev/urandom and written per step of a burst
STRAGGLER = ("--plant", "comm.slow_link=0-3", "--plant", "comm.slow_ms=20")


def _spin(stop: Any) -> None:
    while not stop.is_set():
        pass


def _bursts(stop: Any, scratch: str, io: bool) -> None:
    path = Path(scratch) / f"burst-{os.getpid()}.bin"
    with open("/dev/urandom", "rb") as rnd:
        while not stop.is_set():
            end = time.monotonic() + BURST_S
            if io:
                with open(path, "wb") as f:
                    while time.monotonic() < end:
                        f.write(rnd.read(CHUNK))
                    f.flush()
                    os.fsync(f.fileno())
                path.unlink()
            else:
                while time.monotonic() < end:
                    pass
            stop.wait(IDLE_S)


def start_background(kind: str, scratch: str) -> tuple[Any, list[Any]]:
    stop = mp.Event()
    n = 2 * (os.cpu_count() or 1)
    targets: list[tuple[Any, tuple[Any, ...]]] = {
        "quiet": [],
        "busy": [(_spin, (stop,)), (_spin, (stop,))],
        "bursty": [(_bursts, (stop, scratch, k % 2 == 0)) for k in range(n)],
    }[kind]
    procs = [mp.Process(target=t, args=a, daemon=True) for t, a in targets]
    for p in procs:
        p.start()
    return stop, procs


def node(args: tuple[str, ...], env: dict[str, str], out: Path) -> tuple[str, list[str], list[str], float]:
    """(verdict, failing checks' lines, warning checks' lines, seconds) of one `trainready node` run."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "trainready", "node", "--json", str(out), *args], env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if not out.exists():
        return "NO RECORD", [(proc.stderr or proc.stdout).strip()[-300:]], [], wall
    doc = json.loads(out.read_text())
    fails = [f"{r['name']}: {r['message']}" for r in doc["results"] if r["status"] in ("fail", "error")]
    warns = [f"{r['name']}: {r['message']}" for r in doc["results"] if r["status"] == "warn"]
    busy = [f"{r['name']} machine: {r['details']['machine']}" for r in doc["results"]
            if isinstance(r.get("details"), dict) and "machine" in r["details"]]
    print("      " + " | ".join(busy)[:400], flush=True)
    return doc["status"].upper(), fails, warns, wall


def expected_warn(line: str) -> bool:
    """A WARN that is no judgment at all on a CPU node: gloo's busbw has no expectation (docs/spec.md)."""
    return "no busbw expectation" in line


def tally(name: str, runs: list[tuple[str, list[str], list[str], float]]) -> dict[str, Any]:
    warns = [w for _, _, ws, _ in runs for w in ws if not expected_warn(w)]
    return {"job": name, "runs": len(runs), "fail": sum(1 for _, f, _, _ in runs if f),
            "warn": len(warns), "not_judged": sum(1 for w in warns if "not judged" in w)}


def trend_history(figures: list[float], decline_pct: float | None) -> tuple[int, int, bool]:
    """(fall WARNs, 'not judged' WARNs, whether the planted decline was named by the fifth sweep) of a node's
    history made of these tokens/s figures, judged as `cluster sweep` judges it."""
    from trainready.cluster.sweep import trend

    runs: list[dict[str, Any]] = []
    falls = noisy = 0
    named_by = None
    for k, value in enumerate(figures):
        now = {"when": f"2026-12-{k + 1:02d}T03:00:00+00:00", "verdict": "pass", "run": f"r{k}",
               "figures": {"train_tokens_per_s@cpu": value}, "counters": {}, "gpus": []}
        if decline_pct is not None:
            now = trend.plant_decline(now, runs, decline_pct)
        said = trend.judge(now, runs, 0.10, 5)
        falls += sum(1 for s in said if trend.NOISY not in s)
        noisy += sum(1 for s in said if trend.NOISY in s)
        if named_by is None and any(trend.NOISY not in s for s in said):
            named_by = k + 1
        runs.append({**now, "trend": said})
    return falls, noisy, named_by is not None and named_by <= 5


def tokens_per_s(out: Path) -> float | None:
    doc = json.loads(out.read_text()) if out.exists() else {}
    for r in doc.get("results", []):
        for m in r.get("metrics", []):
            if m.get("name") == "train_tokens_per_s":
                return float(m["value"])
    return None


def under(bg: str, ns: argparse.Namespace, env: dict[str, str], tmp: Path) -> list[dict[str, Any]]:
    load = os.getloadavg()
    print(f"== background {bg} (load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"{os.cpu_count()} cores)", flush=True)
    stop, procs = start_background(bg, str(tmp))
    rows = []
    try:
        for job, args, n in (("node (main job)", (), ns.runs), ("comm check alone", ("--only", "comm"), ns.runs),
                             ("comm, planted slow link", ("--only", "comm", *STRAGGLER), 1)):
            runs = []
            for i in range(n):
                runs.append(node(args, env, tmp / f"{bg}-{len(rows)}-{i}.json"))
                v, fails, warns, wall = runs[-1]
                print(f"  {job} {i + 1}/{n}: {v:<5} {wall:6.1f} s  " + " | ".join(fails + warns)[:600], flush=True)
            rows.append(tally(job, runs))
        rows[-1]["caught"] = rows[-1]["fail"] == rows[-1]["runs"]
        figs = []
        for i in range(ns.sweeps):
            out = tmp / f"{bg}-ts-{i}.json"
            node(("--only", "train_step"), env, out)
            figs.append(tokens_per_s(out))
        figs_ok = [f for f in figs if f is not None]
        print(f"  train_step tokens/s over {len(figs_ok)} sweeps: {', '.join(f'{f:.0f}' for f in figs_ok)}", flush=True)
        falls, noisy, _ = trend_history(figs_ok, None)
        rows.append({"job": "sweep trend judge", "runs": len(figs_ok), "fail": 0, "warn": falls + noisy,
                     "not_judged": noisy})
        _, _, caught = trend_history(figs_ok, 5.0)
        rows.append({"job": "trend, planted 5%/sweep decline", "runs": len(figs_ok), "fail": 0, "warn": 0,
                     "not_judged": 0, "caught": caught})
    finally:
        stop.set()
        for p in procs:
            p.join(5)
    return [{"background": bg, "load1_before": round(load[0], 2), **r} for r in rows]


def table(rows: list[dict[str, Any]]) -> None:
    print("\n| background | job | runs | FAIL | WARN | of which not judged | planted fault caught |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        caught = {True: "yes", False: "**no**"}.get(r.get("caught"), "-")  # type: ignore[arg-type]
        print(f"| {r['background']} | {r['job']} | {r['runs']} | {r['fail']} | {r['warn']} | {r['not_judged']} | "
              f"{caught} |", flush=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--background", default="quiet,busy,bursty", help="comma-separated: quiet, busy, bursty")
    ap.add_argument("--runs", type=int, default=3, help="runs of the main job and of the comm check per background")
    ap.add_argument("--sweeps", type=int, default=6, help="train_step runs per background (the trend's history)")
    ns = ap.parse_args(argv)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src") + os.pathsep + env.get("PYTHONPATH", "")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for bg in ns.background.split(","):
            rows += under(bg.strip(), ns, env, Path(tmp))
            table(rows)  # after each background: a run stopped later keeps what it measured
    table(rows)
    healthy = [r for r in rows if "planted" not in r["job"]]
    false_fail = sum(r["fail"] for r in healthy)
    missed = sum(1 for r in rows if r.get("caught") is False)
    print(f"\nfalse_alarms: {false_fail} FAIL on healthy runs (ratio {false_fail / max(1, sum(r['runs'] for r in healthy)):.2f}),"
          f" {missed} planted fault(s) missed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
