"""`trainready cluster run -N N` end to end on the local Slurm cluster at scale: wall time, where it goes
(submit, the array's task start-up, the cross-node step, the verdict), the collector's latency after the last
task ended, and the load on slurmctld: RPCs per node from `sdiag` (reset with `sdiag --reset` just before the
run; counted by message type), against the goal of <= 6 RPCs per node for the whole run.

    flock /tmp/trainready-slurm.lock .venv/bin/python benchmarks/cluster_scale.py --nodes 64 --up
    # --up: scripts/local-slurm.sh up --nodes N first, and back to the default 3 nodes afterwards
    flock /tmp/trainready-slurm.lock .venv/bin/python benchmarks/cluster_scale.py --nodes 128 --up --no-collective
    flock /tmp/trainready-slurm.lock .venv/bin/python benchmarks/cluster_scale.py --pairs 32 --up
    # `cluster pairs` over 32 nodes, one of them planted slow: named?, rounds, wall
    .venv/bin/python benchmarks/cluster_scale.py --nodes 640 --up --cluster big --no-collective --sweep
    # 640 slurmd of a cluster of its own (`--cluster big`): a sweep with --max-fraction 0.1 over them, then the run

Besides the wall time and the RPCs it prints the collector's peak memory and the login node's CPU seconds
(the `trainready` process and the Slurm commands it ran, from wait4(2)'s rusage) and the load average before
the run and at its highest, and the least MemAvailable (sampled every 2 s; below 2 GiB the run's jobs are
cancelled: the host is shared). CLUSTER_SCALE_LOG=FILE keeps the collector's progress lines there.

Every node is the same 2-core host (multiple slurmd), so the array phase is bounded by the CPU: each task is
one Python interpreter importing torch (~3 CPU s at --level light on a 2-core x86 VM), N of them on 2 cores.
REQUEST_STATS_INFO (the measuring `sdiag` itself) is left out of the count.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "local-slurm.sh"
# slurmctld asks every slurmd to register again every few minutes (and each answers): traffic of the cluster,
# the same with trainready idle, so left out of a run's or sweep's own count (and printed beside it)
CLUSTER_OWN = frozenset({"MESSAGE_NODE_REGISTRATION_STATUS"})
NOT_OURS = "  (the cluster's own, not the {}'s)"
GOAL_RPC_PER_NODE = 6.0  # the goal for a whole run at N >= 32 nodes (operators block tools that poll harder)
_RPC = re.compile(r"^\s+([A-Z_0-9]+)\s+\(\s*\d+\)\s+count:(\d+)")


_UPDATE = re.compile(r"^\[(\S+)\] (?:update_node: node (\S+) (reason|state) set to:? |_slurm_rpc_update_node for "
                     r"(\S+): ()?)(.*)$")


def log_dir(cluster: str) -> Path:
    """scripts/local-slurm.sh's log folder of the cluster (slurmctld.log, slurmd-NODE.log, jobcomp.log)."""
    return Path(f"/var/log/trainready-{cluster or 'local'}-slurm")


def node_updates(log: Path, since: float) -> Counter[str]:
    """What the REQUEST_UPDATE_NODE of a run were, from slurmctld's log: {"reason: TEXT" / "state: STATE": nodes}
    since `since` (slurmctld logs each change of a node's reason or state that an update made, at level info)."""
    out: Counter[str] = Counter()
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        m = _UPDATE.match(line)
        if m and (_when(m.group(1)) or 0) >= since:
            out[f"{m.group(3) or 'refused'}: {m.group(6).strip()}"] += 1
    return out


def munge_refusals(logs: Path, since: float) -> tuple[int, int]:
    """(failed munge encodes/decodes, slurmd logging any) since `since`: munged refuses a connection once its listen
    backlog is full (256 in munge 0.5.15, MUNGE_SOCKET_BACKLOG in munge_defs.h, not settable), and the message that
    needed the credential is lost: a launch answer, a step's completion.  The host's limit, not the nodes'."""
    total, daemons = 0, 0
    for log in sorted(logs.glob("slurmd-*.log")):
        try:
            lines = log.read_text(errors="replace").splitlines()
        except OSError:
            continue
        count = sum(1 for line in lines if "Munge encode failed" in line or "Munge decode failed" in line
                    if (_when(line[1:24]) or 0) >= since)
        total, daemons = total + count, daemons + (count > 0)
    return total, daemons


def own_count(rpcs: Counter[str]) -> int:
    """The RPCs a run or sweep caused: all but the cluster's own (CLUSTER_OWN)."""
    return sum(c for k, c in rpcs.items() if k not in CLUSTER_OWN)


def rpc_counts(text: str) -> Counter[str]:
    """`sdiag` → {message type: count}, from its "Remote Procedure Call statistics by message type" part."""
    part = text.split("by message type", 1)[-1].split("by user", 1)[0]
    out: Counter[str] = Counter()
    for line in part.splitlines():
        m = _RPC.match(line)
        if m and m.group(1) != "REQUEST_STATS_INFO":
            out[m.group(1)] += int(m.group(2))
    return out


def _when(text: str) -> float | None:
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def slurm_jobs(since: float, cluster: str = "") -> list[dict[str, str]]:
    """Every job of the run (submitted at or after `since`), from the cluster's jobcomp/filetxt log (one record
    per job or array task as it ends, kept whatever its age: slurmctld forgets an ended job MinJobAge = 600 s
    after its end, and a run at 640 nodes lasts longer than that); scontrol's records where there is no log."""
    log = log_dir(cluster) / "jobcomp.log"
    if log.is_file():
        jobs = [dict(f.split("=", 1) for f in line.split() if "=" in f) for line in log.read_text().splitlines()]
        for j in jobs:
            j["JobName"] = j.get("Name", "")
    else:
        out = subprocess.run(["scontrol", "show", "jobs", "-o"], capture_output=True, text=True).stdout
        jobs = [dict(re.findall(r"(\w+)=(\S*)", line)) for line in out.splitlines()]
    return [j for j in jobs if (_when(j.get("SubmitTime", "")) or 0) >= since - 1]


def phases(jobs: list[dict[str, str]], t_start: float, t_end: float) -> dict[str, float]:
    """Submit → first task start, first start → last task end, the cross step, and what follows it."""
    tasks = [j for j in jobs if j.get("JobName") == "trainready-accept" and j.get("ArrayTaskId", "").isdigit()]
    cross = [j for j in jobs if j.get("JobName") == "trainready-cross"]
    starts = [s for s in (_when(j.get("StartTime", "")) for j in tasks) if s]
    ends = [e for e in (_when(j.get("EndTime", "")) for j in tasks) if e]
    runs = [e - s for s, e in ((_when(j.get("StartTime", "")), _when(j.get("EndTime", ""))) for j in tasks) if s and e]
    out = {"tasks": float(len(tasks)), "first_start": min(starts) - t_start if starts else float("nan"),
           "last_end": max(ends) - t_start if ends else float("nan"),
           "task_mean_s": sum(runs) / len(runs) if runs else float("nan"), "task_max_s": max(runs, default=float("nan"))}
    if cross:
        cs, ce = _when(cross[-1].get("StartTime", "")), _when(cross[-1].get("EndTime", ""))
        out["cross_s"] = (ce - cs) if cs and ce else float("nan")
        out["cross_end"] = (ce - t_start) if ce else float("nan")
    out["after_last_task_s"] = (t_end - max(ends)) if ends else float("nan")
    return out


MEM_FLOOR_GIB = 2.0  # below this much MemAvailable the run's jobs are cancelled: the host is shared, never OOM it


def mem_available_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return float("nan")


def measured(argv: list[str]) -> tuple[int, str, dict[str, float]]:
    """Run `argv` (the collector); (exit code, stderr tail, {cpu_s, peak_rss_mib, load_before, load_max,
    mem_min_gib, stopped_for_memory})."""
    import threading

    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    loads, mems, done, stopped = [os.getloadavg()[0]], [mem_available_gib()], threading.Event(), []

    def sample() -> None:
        while not done.wait(2.0):
            loads.append(os.getloadavg()[0])
            mems.append(mem_available_gib())
            if mems[-1] < MEM_FLOOR_GIB and not stopped:
                stopped.append(time.time())
                for name in ("trainready-cross", "trainready-accept"):
                    subprocess.run(["scancel", "-n", name], capture_output=True)

    threading.Thread(target=sample, daemon=True).start()
    log = os.environ.get("CLUSTER_SCALE_LOG")  # the collector's progress lines, kept there to follow a long run
    with (open(log, "ab+") if log else tempfile.TemporaryFile()) as err:
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        done.set()
        err.seek(0)
        tail = err.read().decode(errors="replace")[-1500:]  # (a+: reads from the start, writes append)
    if stopped:
        print(f"  STOPPED: MemAvailable fell below {MEM_FLOOR_GIB:g} GiB; the run's jobs were cancelled", flush=True)
    return p.returncode, tail, {"cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_mib": ru.ru_maxrss / 1024.0,
                                "load_before": loads[0], "load_max": max(loads), "mem_min_gib": min(mems),
                                "stopped_for_memory": float(bool(stopped))}


def run(n: int, level: str, parallel: int, limit: str, results: Path,
        collective: bool = True, cluster: str = "", keep: Path | None = None) -> tuple[float, int, Counter[str], dict]:
    argv = [sys.executable, "-m", "trainready", "cluster", "run", "-N", str(n), "--results", str(results),
            "--spec", "example:local-slurm", "--level", level, "--max-parallel", str(parallel), "--time", limit,
            "--json", str(results) + ".json"] + ([] if collective else ["--no-collective"])
    subprocess.run(["sdiag", "--reset"], check=True, capture_output=True)
    t0 = time.time()
    rc, tail, use = measured(argv)
    t1 = time.time()
    rpcs = rpc_counts(subprocess.run(["sdiag"], capture_output=True, text=True).stdout)
    if rc not in (0, 1):
        raise SystemExit(f"cluster run failed (exit {rc}): {tail}")
    doc = json.loads(Path(str(results) + ".json").read_text())
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(str(results) + ".json", keep / "run.json")
        for logs in results.glob("runs/*/logs"):  # the array's and the cross-node step's output (srun's errors)
            shutil.copytree(logs, keep / "run-logs", dirs_exist_ok=True)
    updates = node_updates(log_dir(cluster) / "slurmctld.log", t0)
    return t1 - t0, rc, rpcs, {"doc": doc, "phases": phases(slurm_jobs(t0, cluster), t0, t1), "use": use,
                               "updates": updates, "munge": munge_refusals(log_dir(cluster), t0)}


def sweep(n: int, level: str, results: Path) -> None:
    """`cluster sweep --max-fraction 0.1` over the partition: wall, nodes swept, RPCs per swept node, the
    collector's peak memory and CPU seconds."""
    argv = [sys.executable, "-m", "trainready", "cluster", "sweep", "--results", str(results), "--spec",
            "example:local-slurm", "--level", level, "--max-fraction", "0.1", "--time", "20:00", "--json",
            str(results) + ".json"]
    subprocess.run(["sdiag", "--reset"], check=True, capture_output=True)
    t0 = time.time()
    rc, tail, use = measured(argv)
    wall = time.time() - t0
    rpcs = rpc_counts(subprocess.run(["sdiag"], capture_output=True, text=True).stdout)
    if not Path(str(results) + ".json").is_file():
        raise SystemExit(f"cluster sweep failed (exit {rc}): {tail}")
    doc = json.loads(Path(str(results) + ".json").read_text())
    swept = len(doc.get("swept", []))
    verdicts = Counter(o.get("verdict") for o in doc.get("outcomes", []))
    total, own = sum(rpcs.values()), own_count(rpcs)
    print(f"cluster sweep --max-fraction 0.1 over {n} nodes: exit {rc}, {swept} swept {dict(verdicts)}; wall "
          f"{wall:.1f} s; slurmctld RPCs {total} = {total / max(1, swept):.2f} per swept node, of them the sweep's "
          f"own {own} = {own / max(1, swept):.2f} per swept node (goal <= {GOAL_RPC_PER_NODE:g}: "
          f"{'meets' if own / max(1, swept) <= GOAL_RPC_PER_NODE else 'MISSES'}); collector peak RSS "
          f"{use['peak_rss_mib']:.0f} MiB, login CPU {use['cpu_s']:.1f} s; load average {use['load_before']:.1f} "
          f"before, {use['load_max']:.1f} at most; MemAvailable at least {use['mem_min_gib']:.1f} GiB")
    for name, count in rpcs.most_common():
        print(f"    {name:<40} {count:6d}  {count / max(1, swept):6.2f} per swept node"
              + (NOT_OURS.format("sweep") if name in CLUSTER_OWN else ""))


def report(n: int, wall: float, rc: int, rpcs: Counter[str], info: dict, args: argparse.Namespace) -> None:
    ph, doc = info["phases"], info["doc"]
    s = doc.get("summary", {})
    total = sum(rpcs.values())
    print(f"cluster run -N {n} --level {args.level} --max-parallel {args.max_parallel}"
          f"{'' if args.collective else ' --no-collective'} on the local Slurm "
          f"cluster ({os.cpu_count()} cores): exit {rc}, {s.get('accepted')} accepted, {s.get('rejected')} rejected, "
          f"{s.get('not_tested', 0)} not tested")
    print(f"  wall {wall:.1f} s: submit -> first task start {ph['first_start']:.1f} s; array tasks until "
          f"{ph['last_end']:.1f} s ({ph['tasks']:.0f} tasks, each {ph['task_mean_s']:.1f} s mean / "
          f"{ph['task_max_s']:.1f} s max from start to end)")
    if "cross_s" in ph:
        print(f"  cross-node step: {ph['cross_s']:.1f} s over {n} ranks (ended at {ph['cross_end']:.1f} s)")
    print(f"  after the last task ended: {ph['after_last_task_s']:.1f} s (cross-node step + verdict: the "
          f"collector's own latency)")
    use = info["use"]
    print(f"  collector: peak RSS {use['peak_rss_mib']:.0f} MiB, login CPU {use['cpu_s']:.1f} s (the collector and "
          f"the Slurm commands it ran); load average {use['load_before']:.1f} before, {use['load_max']:.1f} at most; "
          f"MemAvailable at least {use['mem_min_gib']:.1f} GiB")
    why = Counter(re.sub(r"(\w+N)(, \1)+", r"\1, ...", re.sub(r"\d+(\.\d+)?", "N",
                                                            (e.get("reasons") or ["(no reason given)"])[0]))[:160]
                  for e in doc.get("nodes", []) if e.get("verdict") == "reject")
    for reason, count in why.most_common(8):  # what rejected them, numbers folded, so alike causes count together
        print(f"  rejected x {count}: {reason}")
    failed, daemons = info["munge"]
    if failed:
        print(f"  munge: {failed} credentials not made or checked on {daemons} slurmd (munged's listen backlog of 256 "
              f"full: the host's limit; a message that needed one was lost)")
    own = own_count(rpcs)
    per = own / n
    print(f"  slurmctld RPCs: {total}, the run's own {own} = {per:.2f} per node   goal <= {GOAL_RPC_PER_NODE:g}   "
          f"ratio {per / GOAL_RPC_PER_NODE:.2f} ({'meets' if per <= GOAL_RPC_PER_NODE else 'MISSES'} the goal); "
          f"all counted {total / n:.2f} per node")
    for name, count in rpcs.most_common():
        print(f"    {name:<40} {count:6d}  {count / n:6.2f} per node"
              + (NOT_OURS.format("run") if name in CLUSTER_OWN else ""))
    for what, count in info["updates"].most_common():  # who sent REQUEST_UPDATE_NODE, in slurmctld's words
        print(f"    node updates in slurmctld.log: {what!r} x {count}")


def pairs(n: int, slow: str, results: Path) -> None:
    """`cluster pairs -w node[1-n]` with `slow` planted slow: which nodes it names, in how many rounds, how long."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    argv = [sys.executable, "-m", "trainready", "cluster", "pairs", "-w", f"node[1-{n}]", "--results", str(results),
            "--spec", "example:local-slurm", "--plant", f"cluster.slow={slow}", "--json", str(results) + ".json"]
    t0 = time.time()
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.time() - t0
    if not Path(str(results) + ".json").is_file():
        raise SystemExit(f"cluster pairs failed (exit {p.returncode}): {p.stderr.strip()[-1500:]}")
    doc = json.loads(Path(str(results) + ".json").read_text())
    named = doc.get("culprits", [])
    print(f"cluster pairs over {n} nodes, {slow} planted slow: named {named or 'nobody'} "
          f"({'right' if named == [slow] else 'WRONG'}), undecided {doc.get('undecided') or 'none'}; "
          f"{doc.get('rounds')} round(s) of {n // 2} pairs (round-robin would take {doc.get('round_robin_rounds')}); "
          f"wall {wall:.1f} s, {wall / max(1, doc.get('rounds') or 1):.1f} s per round")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--level", default="light")
    ap.add_argument("--max-parallel", type=int, default=8, help="array tasks at once: 8 keeps 8 torch processes "
                    "(~0.3 GiB each) in memory at a time; more gains nothing on 2 cores")
    ap.add_argument("--time", default="20:00")
    ap.add_argument("--pairs", type=int, default=0, help="instead: `cluster pairs` over this many nodes, one slow")
    ap.add_argument("--no-collective", dest="collective", action="store_false",
                    help="leave the all_reduce out of the cross-node step (no torch process per node in it: what "
                         "lets N = 128 fit in 24 GiB here)")
    ap.add_argument("--up", action="store_true", help="bring the local cluster up with --nodes first, back to 3 after")
    ap.add_argument("--cluster", default="", help="a local cluster of its own (scripts/local-slurm.sh --cluster "
                    "NAME; taken down after with --up), so the default 3 nodes stay as they are")
    ap.add_argument("--sweep", action="store_true", help="first `cluster sweep --max-fraction 0.1` over the nodes")
    ap.add_argument("--keep-logs", type=Path, help="copy the cluster's Slurm logs (slurmctld, every slurmd, "
                    "jobcomp) here before the cluster is taken down")
    a = ap.parse_args()
    n = a.pairs or a.nodes
    own = ["--cluster", a.cluster] if a.cluster else []
    # past 128 nodes a munged of the cluster's own, with threads for N slurmd (scripts/local-slurm.sh own_munge)
    many = ["--own-munge"] if a.cluster and n > 128 else []
    if a.cluster:
        os.environ["SLURM_CONF"] = f"/etc/slurm-{a.cluster}/slurm.conf"
    if a.up:
        t = time.time()
        subprocess.run(["bash", str(SCRIPT), "up", "--nodes", str(n), *own, *many], check=True)
        print(f"up --nodes {n}: {time.time() - t:.0f} s (load average {os.getloadavg()[0]:.1f} after)")
    try:
        with tempfile.TemporaryDirectory(prefix="cluster-scale-") as tmp:
            if a.pairs:
                pairs(a.pairs, f"node{a.pairs // 2 + 1}", Path(tmp) / "p")
                return
            if a.sweep:  # first: the smaller job, so its figures stand even where the whole run cannot finish
                sweep(a.nodes, a.level, Path(tmp) / "s")
                sys.stdout.flush()
            wall, rc, rpcs, info = run(a.nodes, a.level, a.max_parallel, a.time, Path(tmp) / "r", a.collective, a.cluster,
                                       a.keep_logs)
            report(a.nodes, wall, rc, rpcs, info, a)
    finally:
        if a.keep_logs:
            shutil.copytree(log_dir(a.cluster), a.keep_logs, dirs_exist_ok=True)
        if a.up:
            subprocess.run(["bash", str(SCRIPT), "down" if a.cluster else "up", *own], check=True)


if __name__ == "__main__":
    main()
