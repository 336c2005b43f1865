"""How often trainready's fleet verdicts are right: faults drawn at random from the catalogue, planted on a real
local Slurm cluster with a tree topology, at a delivery's rate, the other nodes healthy under the backgrounds of
benchmarks/false_alarms.py, each judged as an operator runs it (`cluster run --drain`, `cluster sweep --drain`,
`cluster pairs`).

Per fault kind: how many were planted, caught (the planted node rejected or failing, or its switch named), on the
right node, for the right cause and class, drained or held as it should be, and in how many sweeps.  For the
healthy nodes, per node-run and per node-sweep: false FAIL, false drain and "not judged", each with its one-sided
95% upper bound (Clopper-Pearson; none seen in n trials gives 1 - 0.05^(1/n), about 3/n: "the rule of three").

    scripts/local-slurm.sh up --cluster acc --nodes 16 --topology 4 --preempt
    PYTHONPATH=src cpuslot python3 benchmarks/accuracy.py --cluster acc --nodes 16 --switch 4 --runs 7 --sweeps 7 \
        --seed 55 --json /tmp/accuracy.json
    scripts/local-slurm.sh down --cluster acc

Phases, in order: RUNS `cluster run` rounds over every node (each round its own faults, drains undone after it);
SWEEPS `cluster sweep` rounds (a fault stays on its node from sweep to sweep until it is drained or --strikes + 1
sweeps passed: sweeps to detection); PAIRS `cluster pairs` searches over the nodes of three switches, one switch's
links slow.  Everything a round does is printed as it happens; the tables come after each phase and at the end.
The cluster must have been brought up with --topology and --preempt (the sweep's low `sweep` partition, the
`batch` partition whose jobs preempt it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from false_alarms import start_background  # noqa: E402  (the same backgrounds, started the same way)

REPO = Path(__file__).resolve().parents[1]
SPEC = "example:local-slurm"
STRIKES = 2  # cluster sweep's default --strikes


@dataclass(frozen=True)
class Kind:
    """One fault of the catalogue: how it is planted and what a right verdict is."""

    name: str
    plant: str  # the --plant name (suite/plants.py)
    value: str  # its value: {node}, {victim}, {nodes} (every node of one leaf switch)
    phases: tuple[str, ...]  # "run", "sweep", "pairs"
    checks: tuple[str, ...] = ()  # node checks the verdict needs
    collective: bool = False  # needs the cross-node all_reduce
    expect: str = "drain"  # drain | switch (named, none drained) | accept | not tested | unknown | trend | busy
    cause: str = ""  # regex the planted node's cause key must match
    klass: str = ""  # hw / sw / fab: the class its drain reason must carry ("" none expected)
    hard: bool = True  # a fault that must be caught (and drained, unless a switch or the guard holds it)
    nodes: str = "one"  # one | switch | pair (node + victim)


CATALOGUE: tuple[Kind, ...] = (
    Kind("matmul", "cluster.fail", "{node}", ("run", "sweep"), ("matmul",), cause=r"^check matmul$", klass="hw"),
    Kind("nan loss", "cluster.fail", "{node}:train_step", ("run", "sweep"), ("train_step",),
         cause=r"^check train_step$", klass="hw"),
    Kind("one ulp", "cluster.fail", "{node}:fingerprint", ("run", "sweep"), ("fingerprint",),
         cause=r"fingerprint", klass="hw"),
    Kind("text", "cluster.text", "{node}", ("run", "sweep"), ("matmul",), cause=r"^check matmul$", klass="hw"),
    Kind("drift", "cluster.drift", "{node}", ("run", "sweep"), ("versions",), cause=r"^drift torch", klass="sw"),
    Kind("slow", "cluster.slow", "{node}:0.001", ("run", "sweep"), ("train_step",),
         cause=r"^slow train_tokens_per_s", klass="hw"),
    Kind("slow once", "cluster.slow_once", "{node}:0.02", ("run",), ("train_step",), expect="accept", hard=False),
    Kind("hang", "cluster.hang", "{node}", ("run",), cause=r"^no result"),
    # a hang in a sweep is judged as a kill there (no record: unknown) and holds the sweep for its whole --time:
    # left to the runs, where it is named "hung" and drained
    Kind("kill", "cluster.kill", "{node}", ("run",), cause=r"^no result", klass="sw"),
    Kind("kill (sweep)", "cluster.kill", "{node}", ("sweep",), expect="unknown", hard=False),
    Kind("clock", "cluster.clock", "{node}:5", ("run",), cause=r"^clock", klass="sw"),
    Kind("storage", "cluster.storage", "{node}", ("run",), cause=r"^storage", klass="fab"),
    Kind("nofile", "cluster.nofile", "{node}:1024", ("run",), cause=r"^limits", klass="sw"),
    Kind("silent rank", "cluster.silent", "{node}", ("run",), collective=True, cause=r"^collective", klass="fab"),
    Kind("vanish", "cluster.vanish", "{node}", ("run",), collective=True, cause=r"cross-node"),
    Kind("forged record", "cluster.forge", "{node}:{victim}", ("run", "sweep"), expect="not tested", hard=False,
         nodes="pair"),
    Kind("switch down", "cluster.switch_down", "{nodes}", ("run",), collective=True, expect="switch",
         cause=r"^(collective|cross-node)", nodes="switch"),
    Kind("decline", "cluster.decline", "{node}:30", ("sweep",), ("train_step",), expect="trend", hard=False),
    Kind("busy node", "", "", ("sweep",), expect="busy", hard=False),
    Kind("preempted", "", "", ("sweep",), expect="unknown", hard=False),
    Kind("slow links, one switch", "cluster.slow_link", "{nodes}", ("pairs",), expect="switch", nodes="switch"),
)
BY_NAME = {k.name: k for k in CATALOGUE}


@dataclass
class Planted:
    kind: Kind
    nodes: tuple[str, ...]  # the node(s) the fault is on (a switch: all of its nodes; forge: the victim)
    where: int  # the round it was planted in
    extra: tuple[str, ...] = ()  # nodes the fault involves but is not on (forge: the rogue node)
    seen: list[dict[str, Any]] = field(default_factory=list)  # per round: what the verdict said of it
    phase: str = "run"


# ---------------------------------------------------------------- statistics


def binom_cdf(k: int, n: int, p: float) -> float:
    if p <= 0:
        return 1.0
    if p >= 1:
        return 0.0 if k < n else 1.0
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))


def upper95(k: int, n: int) -> float:
    """One-sided 95% upper bound of a rate seen k times in n (Clopper-Pearson: the p at which P(X <= k) = 0.05)."""
    if n == 0:
        return 1.0
    if k >= n:
        return 1.0
    lo, hi = k / n, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if binom_cdf(k, n, mid) > 0.05 else (lo, mid)
    return hi


def lower95(k: int, n: int) -> float:
    """One-sided 95% lower bound of a rate seen k times in n (1 - the upper bound of its complement)."""
    return 0.0 if n == 0 else 1.0 - upper95(n - k, n)


def rate(k: int, n: int) -> str:
    bound = upper95(k, n)
    rule = " (none seen: rule of three)" if k == 0 and n else ""
    return f"{k}/{n} = {100 * k / max(1, n):.2f}%, ≤ {100 * bound:.2f}% (95%){rule}"


# ---------------------------------------------------------------- the cluster


def slurm(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True).stdout


def switches(nodes: list[str]) -> dict[str, list[str]]:
    """The leaf switches of the cluster's tree (`scontrol show topology`), over `nodes`."""
    out: dict[str, list[str]] = {}
    for line in slurm("scontrol", "show", "topology").splitlines():
        m = re.match(r"SwitchName=(\S+) Level=0 .*Nodes=(\S+)", line)
        if m:
            members = slurm("scontrol", "show", "hostnames", m.group(2)).split()
            out[m.group(1)] = [n for n in members if n in nodes]
    if not out:
        raise SystemExit("accuracy: the cluster has no tree topology (scripts/local-slurm.sh up --topology K)")
    return {s: ns for s, ns in out.items() if ns}


def undrain(nodes: list[str]) -> list[str]:
    """Resume every node trainready drained (its reason starts 'trainready:'): the next round starts whole."""
    back = []
    for line in slurm("sinfo", "-h", "-N", "-o", "%N|%T|%E").splitlines():
        node, state, reason = (line.split("|") + ["", ""])[:3]
        if node in nodes and reason.startswith("trainready:") and "drain" in state:
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], capture_output=True)
            back.append(node)
    return back


def settle(max_load: float, wait_s: float = 180.0) -> None:
    """Wait (at most `wait_s`) until this host's 1-minute load average is at most `max_load` (0: never wait): a
    round starts under its declared background, not in a peak of other work on the host (a test suite's other
    workers reached load average 31 on 2 cores)."""
    t0 = time.monotonic()
    while max_load > 0 and os.getloadavg()[0] > max_load and time.monotonic() - t0 < wait_s:
        time.sleep(5)
    if time.monotonic() - t0 > 5:
        print(f"  waited {time.monotonic() - t0:.0f} s for the load average to fall to {max_load:g} (now "
              f"{os.getloadavg()[0]:.2f})", flush=True)


def answering(nodes: list[str], wait_s: float = 180.0) -> list[str]:
    """The nodes whose slurmd answers slurmctld (no '*' on the state, not down), waiting up to `wait_s` for the rest:
    on a busy host a slurmd misses a ping now and then (SlurmdTimeout) and comes back; a fault is planted only on a
    node the round can test."""
    t0 = time.monotonic()
    while True:
        states = dict((line.split("|") + [""])[:2] for line in slurm("sinfo", "-h", "-N", "-o", "%N|%T").splitlines())
        deaf = [n for n in nodes if states.get(n, "down").endswith("*") or states.get(n, "").startswith(("down", "fail"))]
        if not deaf or time.monotonic() - t0 > wait_s:
            break
        time.sleep(5)
    if deaf or time.monotonic() - t0 > 5:
        print(f"  waited {time.monotonic() - t0:.0f} s for slurmd to answer; not answering: {', '.join(deaf) or 'none'}",
              flush=True)
    return [n for n in nodes if n not in deaf]


def cli(args: list[str], log: Path) -> tuple[int, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.monotonic()
    with open(log, "w") as f:
        p = subprocess.run([sys.executable, "-m", "trainready", *args], env=env, stdout=f, stderr=subprocess.STDOUT)
    return p.returncode, time.monotonic() - t0


# ---------------------------------------------------------------- drawing faults


class Deck:
    """The phase's kinds in a seeded random order, drawn without replacement and shuffled again when used up: at
    random, yet every kind within one pass of the deck."""

    def __init__(self, rng: random.Random, phase: str, only: set[str] | None = None) -> None:
        self.rng, self.cards = rng, []  # type: list[Kind]
        self.kinds = [k for k in CATALOGUE if phase in k.phases and k.name != "decline"  # decline: from sweep 1
                      and (not only or k.name in only)]

    def draw(self, taken: set[str]) -> Kind | None:
        for _ in range(2):
            if not self.cards:
                self.cards = self.rng.sample(self.kinds, len(self.kinds))
            for k in self.cards:
                if not k.plant or k.plant not in taken:
                    self.cards.remove(k)
                    return k
            self.cards = []
        return None


def place(kind: Kind, rng: random.Random, free: list[str], leaves: dict[str, list[str]], where: int) -> Planted | None:
    """The node(s) the fault goes on, among `free` ones (a switch's faults: a leaf all of whose nodes are free)."""
    if kind.nodes == "switch":
        whole = [s for s, ns in leaves.items() if len(ns) >= 2 and all(n in free for n in ns)]
        return Planted(kind, tuple(leaves[rng.choice(whole)]), where) if whole else None
    if kind.nodes == "pair":
        if len(free) < 2:
            return None
        rogue, victim = rng.sample(free, 2)
        return Planted(kind, (victim,), where, extra=(rogue,))
    return Planted(kind, (rng.choice(free),), where) if free else None


def plant_args(planted: list[Planted]) -> list[str]:
    out: list[str] = []
    for p in planted:
        if not p.kind.plant:
            continue
        value = p.kind.value.format(node=p.nodes[0], nodes="+".join(p.nodes), victim=p.nodes[0])
        if p.kind.nodes == "pair":
            value = f"{p.extra[0]}:{p.nodes[0]}"
        out += ["--plant", f"{p.kind.plant}={value}"]
    return out


def units(rng: random.Random, n: int, fraction: float) -> int:
    """How many faults a round gets: one, and each other node faulty with probability `fraction` (a delivery's few %)."""
    return 1 + sum(rng.random() < fraction for _ in range(n - 1))


def draw(deck: Deck, rng: random.Random, k: int, free: list[str], leaves: dict[str, list[str]], where: int,
         taken: set[str]) -> list[Planted]:
    out: list[Planted] = []
    for _ in range(k):
        for _ in range(len(CATALOGUE)):
            kind = deck.draw(taken)
            if kind is None:
                return out
            p = place(kind, rng, free, leaves, where)
            if p is None:
                continue
            out.append(p)
            taken.add(kind.plant)
            for n in p.nodes + p.extra:
                free.remove(n)
            break
    return out


# ---------------------------------------------------------------- judging one round


def drained_now(nodes: list[str]) -> dict[str, str]:
    """node -> its Slurm reason, for the nodes trainready drained."""
    out = {}
    for line in slurm("sinfo", "-h", "-N", "-o", "%N|%T|%E").splitlines():
        node, state, reason = (line.split("|") + ["", ""])[:3]
        if node in nodes and reason.startswith("trainready:") and "drain" in state:
            out[node] = reason
    return out


def klass_of(node: str, causes: list[str], drained: dict[str, str]) -> str:
    """The class the drain reason carries (Slurm's reason where it was drained, else the one it would carry)."""
    m = re.match(r"trainready:\w+/(\w+)", drained.get(node, ""))
    if m:
        return m.group(1)
    from trainready.cluster.repair import reasons

    return reasons.CODE[reasons.class_of_causes(causes)] if causes else ""


def judge_run(p: Planted, doc: dict[str, Any], drained: dict[str, str]) -> dict[str, Any]:
    """What one `cluster run` verdict said of one planted fault."""
    by = {n["node"]: n for n in doc.get("nodes", [])}
    k = p.kind
    named = [s for s in (doc.get("guard") or {}).get("switches", []) if set(p.nodes) <= set(s.get("nodes", []))]
    mine = [by.get(n, {}) for n in p.nodes]
    causes = [c for v in mine for c in v.get("causes", [])]
    said = "; ".join(r for v in mine for r in (v.get("reasons") or v.get("warnings") or []))[:300]
    verdicts = {n: by.get(n, {}).get("verdict", "absent") for n in p.nodes}
    if k.expect != "not tested" and any(v.get("not_tested") for v in mine):
        return {"void": "; ".join(v["not_tested"] for v in mine if v.get("not_tested")), "said": said,
                "verdicts": verdicts}  # its task never ran
    if k.expect == "switch":
        caught = bool(named)
        right_node, ok_drain = caught, not any(n in drained for n in p.nodes)
    elif k.expect in ("accept", "not tested"):
        caught = all(v.get("verdict") == ("accept" if k.expect == "accept" else "not tested") for v in mine)
        right_node, ok_drain = caught, not any(n in drained for n in p.nodes)
    else:
        caught = all(v.get("verdict") == "reject" for v in mine)
        right_node, ok_drain = caught, all(n in drained for n in p.nodes)
    cause = bool(k.cause) and caught and any(re.search(k.cause, c) for c in causes)
    klass = klass_of(p.nodes[0], mine[0].get("causes", []), drained) if caught and k.klass else ""
    return {"caught": caught, "right_node": right_node, "right_cause": cause if k.cause else None,
            "right_class": (klass == k.klass) if k.klass else None, "drain_ok": ok_drain, "said": said,
            "verdicts": verdicts, "class": klass}


def judge_healthy(nodes: list[str], verdicts: dict[str, tuple[str, str]], drained: dict[str, str]) -> dict[str, Any]:
    """Per healthy node: (verdict, what it said) -> counts of false FAIL, false drain and not judged, with who."""
    bad = {n: s for n, (v, s) in verdicts.items() if n in nodes and v in ("reject", "fail")}
    unjudged = {n: s for n, (v, s) in verdicts.items() if n in nodes and (v in ("not tested", "unknown", "absent")
                                                                          or "not judged" in s)}
    return {"n": len(nodes), "false_fail": bad, "false_drain": {n: drained[n] for n in nodes if n in drained},
            "not_judged": unjudged}


# ---------------------------------------------------------------- the phases


@dataclass
class Campaign:
    ns: argparse.Namespace
    rng: random.Random
    nodes: list[str]
    leaves: dict[str, list[str]]
    out: Path
    planted: list[Planted] = field(default_factory=list)
    healthy: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # phase -> per round
    walls: dict[str, list[float]] = field(default_factory=dict)
    backgrounds: list[str] = field(default_factory=list)
    deck_run: Any = None
    deck_sweep: Any = None

    def background(self, i: int) -> str:
        return self.backgrounds[i % len(self.backgrounds)]

    def common(self, checks: set[str]) -> list[str]:
        return ["--nodelist", ",".join(self.nodes), "--spec", SPEC, "--level", "quick", "--only", ",".join(sorted(checks)),
                "--time", self.ns.time, "--drain"]


def under(bg: str, scratch: Path, fn: Any) -> Any:
    load = os.getloadavg()
    print(f"  background {bg} (load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})", flush=True)
    stop, procs = start_background(bg, str(scratch))
    try:
        return fn()
    finally:
        stop.set()
        for proc in procs:
            proc.join(5)


RUN_CHECKS = {"versions"}


def run_round(c: Campaign, i: int) -> None:
    settle(c.ns.max_load)
    free = answering(c.nodes)
    planted = draw(c.deck_run, c.rng, units(c.rng, len(c.nodes), c.ns.rate), free, c.leaves, i, set())
    checks = RUN_CHECKS | {x for p in planted for x in p.kind.checks} | set(c.ns.run_checks.split(","))
    collective = any(p.kind.collective for p in planted) or c.rng.random() < c.ns.collective
    res = c.out / f"run-{i}"
    args = ["cluster", "run", "-p", c.ns.partition, *c.common(checks), "--results", str(res), "--max-drain",
            c.ns.max_drain, "--collective" if collective else "--no-collective", *plant_args(planted)]
    print(f"run {i + 1}/{c.ns.runs}: " + ", ".join(f"{p.kind.name} on {'+'.join(p.nodes)}" for p in planted)
          + f"; checks {','.join(sorted(checks))}; collective {'yes' if collective else 'no'}", flush=True)
    rc, wall = under(c.background(i), c.out, lambda: cli(args, c.out / f"run-{i}.log"))
    c.walls.setdefault("run", []).append(wall)
    doc = json.loads((res / "fleet.json").read_text()) if (res / "fleet.json").exists() else {}
    drained = drained_now(c.nodes)
    for p in planted:
        p.seen.append({"round": i, **judge_run(p, doc, drained)})
        c.planted.append(p)
        print(f"  {p.kind.name} on {'+'.join(p.nodes)}: {p.seen[-1]}", flush=True)
    involved = {n for p in planted for n in p.nodes + p.extra}
    verdicts = {n["node"]: (n["verdict"], "; ".join(n.get("reasons", []) + n.get("warnings", [])))
                for n in doc.get("nodes", [])}
    verdicts.update({n: ("absent", "no verdict") for n in c.nodes if n not in verdicts})
    h = judge_healthy([n for n in c.nodes if n not in involved], verdicts, drained)
    c.healthy.setdefault("run", []).append({"round": i, "background": c.background(i), "exit": rc, **h})
    print(f"  {wall:.0f} s, exit {rc}; healthy {h['n']}: false FAIL {sorted(h['false_fail'])}, false drain "
          f"{sorted(h['false_drain'])}, not judged {sorted(h['not_judged'])}", flush=True)
    for n, s in {**h["false_fail"], **h["not_judged"]}.items():
        print(f"    {n}: {s[:300]}", flush=True)
    undrain(c.nodes)


def occupy(node: str, after_task: bool, partition: str, results: Path) -> tuple[Any, dict[str, str], Any]:
    """A real job on `node` in the high tier: at once (a busy node), or once the sweep's task there has started (its
    progress file under RESULTS/runs/*-sweep/nodes/: it preempts that task).  (the watcher thread, {"job": id}, the
    event that ends the watch: set once the sweep is over, so a job is never submitted after it)."""
    import threading

    box: dict[str, str] = {}
    done = threading.Event()
    before = set(results.glob(f"runs/*-sweep/nodes/{node}.progress.json"))

    def submit() -> None:
        while after_task and not done.is_set():
            if set(results.glob(f"runs/*-sweep/nodes/{node}.progress.json")) - before:
                done.wait(2.0)  # inside its checks, not at its first line
                break
            done.wait(0.5)
        if after_task and done.is_set():
            return
        box["job"] = slurm("sbatch", "--parsable", "-p", partition, "-w", node, "-J", "accuracy-job",
                           "-o", "/dev/null", "--wrap", "sleep 900").strip().split(";")[0]

    t = threading.Thread(target=submit, daemon=True)
    t.start()
    if not after_task:
        t.join()
        for _ in range(60):
            if slurm("squeue", "--local", "-h", "-j", box.get("job", "0"), "-t", "RUNNING", "-o", "%i").strip():
                break
            time.sleep(0.5)
    return t, box, done


def sweep_round(c: Campaign, s: int, active: list[Planted]) -> None:
    busy = {n for p in active for n in p.nodes + p.extra}
    settle(c.ns.max_load)
    free = [n for n in answering(c.nodes) if n not in busy]
    taken = {p.kind.plant for p in active if p.kind.plant}
    k = units(c.rng, len(free) + 1, c.ns.rate) if s <= c.ns.sweeps - STRIKES else 0  # the last: no time to drain
    new = draw(c.deck_sweep, c.rng, k, free, c.leaves, s, taken)
    for p in new:
        p.phase = "sweep"
    active += new
    jobs: list[Any] = []
    for p in active:
        if p.kind.name in ("busy node", "preempted") and p.where == s:
            jobs.append(occupy(p.nodes[0], p.kind.name == "preempted", c.ns.batch, c.out / "sweep"))
    checks = set(c.ns.sweep_checks.split(","))
    res = c.out / "sweep"
    args = ["cluster", "sweep", "-p", c.ns.sweep_partition, *c.common(checks), "--results", str(res), "--max-fraction",
            "1", "--max-drain", c.ns.sweep_max_drain, "--drain-window", c.ns.drain_window, "--strikes", str(STRIKES), "--json", str(c.out / f"sweep-{s}.json"),
            *plant_args(active)]
    print(f"sweep {s + 1}/{c.ns.sweeps}: " + ", ".join(f"{p.kind.name} on {'+'.join(p.nodes)} (since sweep "
                                                         f"{p.where + 1})" for p in active), flush=True)
    rc, wall = under(c.background(s), c.out, lambda: cli(args, c.out / f"sweep-{s}.log"))
    c.walls.setdefault("sweep", []).append(wall)
    for t, box, done in jobs:
        done.set()
        t.join(30)
        if box.get("job"):
            subprocess.run(["scancel", box["job"]], capture_output=True)
    path = c.out / f"sweep-{s}.json"
    doc = json.loads(path.read_text()) if path.exists() else {}
    outs = {o["node"]: o for o in doc.get("outcomes", [])}
    left = dict(doc.get("left", {}))
    drained = drained_now(c.nodes)
    for p in active:
        n = p.nodes[0]
        o = outs.get(n, {})
        p.seen.append({"round": s, "verdict": o.get("verdict", "not swept"), "action": o.get("action", ""),
                       "strikes": o.get("strikes", 0), "trend": bool(o.get("trend")), "left": left.get(n, ""),
                       "drained": n in drained, "causes": o.get("causes", []), "class": klass_of(n, o.get("causes", []), drained)
                       if o.get("verdict") == "fail" else "", "said": (o.get("text") or "")[:300]})
        print(f"  {p.kind.name} on {n}: {p.seen[-1]}", flush=True)
    verdicts = {n: (o["verdict"], "; ".join([o.get("text") or ""] + list(o.get("trend") or []))) for n, o in outs.items()}
    h = judge_healthy([n for n in c.nodes if n not in {x for p in active for x in p.nodes + p.extra} and n in outs],
                      verdicts, drained)
    h["left"] = {n: w for n, w in left.items() if n not in {x for p in active for x in p.nodes + p.extra}}
    c.healthy.setdefault("sweep", []).append({"round": s, "background": c.background(s), "exit": rc, **h})
    print(f"  {wall:.0f} s, exit {rc}; healthy swept {h['n']}: false FAIL {sorted(h['false_fail'])}, false drain "
          f"{sorted(h['false_drain'])}, not judged {sorted(h['not_judged'])}, not swept {sorted(h['left'])}", flush=True)
    for n, why in {**h["false_fail"], **h["not_judged"], **h["left"]}.items():
        print(f"    {n}: {str(why)[:300]}", flush=True)
    retire(c, s, active, drained)


def retire(c: Campaign, s: int, active: list[Planted], drained: dict[str, str]) -> None:
    """Faults end when their node was drained (it goes to repair: resumed here, healthy again), after --strikes + 1
    sweeps, or after one sweep for a busy node and a preemption; the decline stays for the whole phase."""
    for p in list(active):
        age = s - p.where + 1
        if any(n in drained for n in p.nodes) or (p.kind.name != "decline" and age >= STRIKES + 1) \
                or p.kind.name in ("busy node", "preempted"):
            active.remove(p)
            c.planted.append(p)
    undrain(c.nodes)


def pairs_round(c: Campaign, i: int) -> None:
    """`cluster pairs` over the nodes of two leaf switches, every link of one of them slow: the switch named?"""
    names = sorted(c.leaves, key=lambda s: int(re.sub(r"\D", "", s) or 0))
    two = c.rng.sample(names, 2)
    slow = two[0]
    nodes = [n for s in sorted(two) for n in c.leaves[s]]
    p = Planted(BY_NAME["slow links, one switch"], tuple(c.leaves[slow]), i, phase="pairs")
    res = c.out / f"pairs-{i}"
    args = ["cluster", "pairs", "--nodelist", ",".join(nodes), "--spec", SPEC, "--time", c.ns.time, "--results",
            str(res), "--seed", str(c.rng.randrange(1 << 30)), *plant_args([p])]
    print(f"pairs {i + 1}/{c.ns.pairs}: slow links on {slow} ({'+'.join(p.nodes)}); nodes {','.join(nodes)}", flush=True)
    rc, wall = under(c.background(i), c.out, lambda: cli(args, c.out / f"pairs-{i}.log"))
    c.walls.setdefault("pairs", []).append(wall)
    path = res / "pairs" / "pairs.json"
    doc = json.loads(path.read_text()) if path.exists() else {}
    status = {n["node"]: n["status"] for n in doc.get("nodes", [])}
    named = [s["switch"] for s in doc.get("switches", [])]
    p.seen.append({"round": i, "caught": slow in named, "right_node": named == [slow], "right_cause": None,
                   "right_class": None, "drain_ok": True, "said": f"switches {named}, culprits {doc.get('culprits')}, "
                   f"reference {doc.get('reference_gbps')} GB/s, floor {doc.get('floor_gbps')} GB/s",
                   "verdicts": {n: status.get(n, "absent") for n in p.nodes}})
    c.planted.append(p)
    print(f"  {wall:.0f} s, exit {rc}: {p.seen[-1]}", flush=True)
    healthy = [n for n in nodes if n not in p.nodes]
    verdicts = {n: ("fail" if st == "bad" else "pass" if st == "good" else "unknown", st) for n, st in status.items()}
    h = judge_healthy(healthy, verdicts, {})
    c.healthy.setdefault("pairs", []).append({"round": i, "background": c.background(i), "exit": rc, **h})


# ---------------------------------------------------------------- the tables


def kind_rows(planted: list[Planted]) -> list[dict[str, Any]]:
    """Per fault kind (and phase): planted, caught, right node / cause / class, drained or held as it should be,
    sweeps to detection."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for p in planted:
        phase = p.phase
        if phase == "sweep" and p.kind.expect == "drain" and len(p.seen) < STRIKES and not any(
                x["drained"] for x in p.seen):
            continue  # planted too late in the phase to reach --strikes sweeps: censored, said in the log
        r = rows.setdefault((p.kind.name, phase), {"kind": p.kind.name, "phase": phase, "expect": p.kind.expect,
                                                   "hard": p.kind.hard, "n": 0, "caught": 0, "right_node": 0,
                                                   "right_cause": 0, "cause_n": 0, "right_class": 0, "class_n": 0,
                                                   "drain_ok": 0, "sweeps": [], "misses": [], "void": []})
        verdict = sweep_verdict(p) if phase == "sweep" else p.seen[0] if p.seen else {}
        if verdict.get("void"):  # Slurm never ran its node's task (slurmd not answering): the plant never acted
            r["void"].append(f"{'+'.join(p.nodes)} (round {p.where + 1}): {verdict['void']}"[:400])
            continue
        r["n"] += 1
        for key in ("caught", "right_node", "drain_ok"):
            r[key] += bool(verdict.get(key))
        for key, n in (("right_cause", "cause_n"), ("right_class", "class_n")):
            if verdict.get(key) is not None:
                r[n] += 1
                r[key] += bool(verdict[key])
        if verdict.get("sweeps") is not None:
            r["sweeps"].append(verdict["sweeps"])
        if not (verdict.get("caught") and verdict.get("drain_ok")) or verdict.get("right_cause") is False \
                or verdict.get("right_class") is False:
            r["misses"].append(f"{'+'.join(p.nodes)} (round {p.where + 1}): {verdict.get('said', '')}"[:400])
    return sorted(rows.values(), key=lambda r: (r["phase"], r["kind"]))


def sweep_verdict(p: Planted) -> dict[str, Any]:
    """What the sweeps said of a fault that stayed on its node from sweep to sweep."""
    k, seen = p.kind, p.seen
    fails = [i for i, s in enumerate(seen) if s["verdict"] == "fail"]
    drained = [i for i, s in enumerate(seen) if s["drained"]]
    said = " | ".join(f"sweep {s['round'] + 1}: {s['verdict']} {s['action']} {s['left']} {s['said']}".strip()
                      for s in seen)
    if k.expect == "drain":
        caught = bool(fails)
        first = seen[fails[0]] if fails else {}
        cause = any(re.search(k.cause, c) for c in first.get("causes", [])) if caught else False
        return {"caught": caught and bool(drained), "right_node": caught, "right_cause": cause,
                "right_class": first.get("class") == k.klass if caught else False,
                "drain_ok": bool(drained) and drained[0] == fails[0] + STRIKES - 1 if fails else False,
                "sweeps": (drained[0] + 1) if drained else None, "said": said}
    if k.expect == "trend":
        named = [i for i, s in enumerate(seen) if s["trend"]]
        return {"caught": bool(named), "right_node": bool(named), "drain_ok": not drained,
                "sweeps": (named[0] + 1) if named else None, "said": said}
    if k.expect == "busy":
        ok = all(s["verdict"] == "not swept" and "busy" in s["left"] for s in seen)
        return {"caught": ok, "right_node": ok, "drain_ok": not drained, "said": said}
    ok = all(s["verdict"] == "unknown" for s in seen)  # unknown: preempted, hung, killed, a forged record
    return {"caught": ok, "right_node": ok, "drain_ok": not drained and all(s["strikes"] == 0 for s in seen),
            "said": said}


def print_tables(c: Campaign) -> dict[str, Any]:
    rows = kind_rows(c.planted)
    print("\n| phase | fault | expected | planted | caught | right node | right cause | right class | drained/held "
          "as it should | sweeps to detection | recall, 95% lower bound | not exercised |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cause = f"{r['right_cause']}/{r['cause_n']}" if r["cause_n"] else "-"
        klass = f"{r['right_class']}/{r['class_n']}" if r["class_n"] else "-"
        sweeps = ", ".join(str(s) for s in r["sweeps"]) or "-"
        print(f"| {r['phase']} | {r['kind']} | {r['expect']} | {r['n']} | {r['caught']} | {r['right_node']} | {cause} "
              f"| {klass} | {r['drain_ok']}/{r['n']} | {sweeps} | {100 * r['caught'] / r['n']:.0f}%, "
              f"≥ {100 * lower95(r['caught'], r['n']):.0f}% | {len(r['void'])} |" if r["n"] else
              f"| {r['phase']} | {r['kind']} | {r['expect']} | 0 | - | - | - | - | - | - | - | {len(r['void'])} |")
    healthy = {}
    print("\n| healthy nodes | trials | false FAIL | false drain | not judged |")
    print("|---|---|---|---|---|")
    for phase, rounds in c.healthy.items():
        n = sum(h["n"] for h in rounds)
        ff, fd, nj = (sum(len(h[k]) for h in rounds) for k in ("false_fail", "false_drain", "not_judged"))
        healthy[phase] = {"n": n, "false_fail": ff, "false_drain": fd, "not_judged": nj}
        unit = {"run": "node-runs", "sweep": "node-sweeps", "pairs": "node-searches"}[phase]
        print(f"| {phase} | {n} {unit} | {rate(ff, n)} | {rate(fd, n)} | {rate(nj, n)} |")
    if len(healthy) > 1:
        n, ff, fd, nj = (sum(h[k] for h in healthy.values()) for k in ("n", "false_fail", "false_drain", "not_judged"))
        print(f"| all | {n} | {rate(ff, n)} | {rate(fd, n)} | {rate(nj, n)} |")
    misses = [m for r in rows for m in (f"{r['phase']} {r['kind']}: {x}" for x in r["misses"])]
    if misses:
        print("\nmisses:\n" + "\n".join("  " + m for m in misses))
    void = [m for r in rows for m in (f"{r['phase']} {r['kind']}: {x}" for x in r["void"])]
    if void:
        print("\nnot exercised (Slurm never ran the planted node's task; neither caught nor missed):\n"
              + "\n".join("  " + m for m in void))
    return {"kinds": rows, "healthy": healthy, "misses": misses, "void": void}


def rescore(paths: list[Path]) -> int:
    """The tables of earlier campaigns' --json (one or several, pooled), judged again by this file's rules."""
    c = Campaign(argparse.Namespace(), random.Random(0), [], {}, paths[0].parent)
    for path in paths:
        doc = json.loads(path.read_text())
        c.planted += [Planted(BY_NAME[p["kind"]], tuple(p["nodes"]), p["where"], tuple(p["extra"]), p["seen"],
                              p["phase"]) for p in doc["planted"] if p["kind"] in BY_NAME]
        gone = sorted({p["kind"] for p in doc["planted"] if p["kind"] not in BY_NAME})
        if gone:
            print(f"accuracy: kinds no longer in the catalogue, left out: {', '.join(gone)}")
        for phase, rounds in doc["rounds"].items():
            c.healthy.setdefault(phase, []).extend(rounds)
        print(f"accuracy: seed {doc['seed']} ({path}), {doc['wall_s'] / 60:.1f} min, {len(doc['nodes'])} nodes")
    print_tables(c)
    return 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", default="acc", help="scripts/local-slurm.sh --cluster NAME (its SLURM_CONF)")
    ap.add_argument("--nodes", type=int, default=16, help="nodes NAME1..NAMEN")
    ap.add_argument("--runs", type=int, default=7, help="`cluster run` rounds")
    ap.add_argument("--sweeps", type=int, default=7, help="`cluster sweep` rounds")
    ap.add_argument("--pairs", type=int, default=1, help="`cluster pairs` searches")
    ap.add_argument("--seed", type=int, default=None, help="the draw's seed (default: from the clock; printed)")
    ap.add_argument("--rate", type=float, default=0.03, help="each node beyond a round's first fault faulty with this "
                    "probability (a delivery's few percent)")
    ap.add_argument("--background", default="quiet,busy,bursty", help="false_alarms.py's backgrounds, round by round")
    ap.add_argument("--run-checks", default="versions,matmul", help="node checks of every `cluster run` round (a "
                    "fault's own checks are added)")
    ap.add_argument("--sweep-checks", default="versions,matmul,train_step,fingerprint", help="node checks of every sweep")
    ap.add_argument("--collective", type=float, default=0.3, help="chance of the cross-node all_reduce in a round "
                    "with no fault that needs it")
    ap.add_argument("--time", default="5:00", help="--time of each task")
    ap.add_argument("--max-drain", default="25%", help="cluster run --max-drain (a delivery: raised from 10%%)")
    ap.add_argument("--sweep-max-drain", default="50%", help="cluster sweep --max-drain: weeks of sweeps in an hour")
    ap.add_argument("--drain-window", default="24h", help="cluster sweep --drain-window")
    ap.add_argument("--rescore", default=None, help="print the tables of earlier --json files "
                    "(comma-separated: pooled), judged again")
    ap.add_argument("--partition", default="debug")
    ap.add_argument("--sweep-partition", default="sweep")
    ap.add_argument("--batch", default="batch", help="the partition whose jobs preempt the sweep's")
    ap.add_argument("--kinds", default="", help="draw only these kinds of the catalogue (comma-separated names)")
    ap.add_argument("--max-load", type=float, default=0.0, help="before each round wait (at most 180 s) for the "
                    "host's 1-minute load average to fall to this (0: start at once)")
    ap.add_argument("--json", default=None, help="write the tables and every round here")
    ap.add_argument("--keep", default=None, help="keep the records here (default: a temporary folder)")
    ns = ap.parse_args(argv)
    if ns.rescore:
        return rescore([Path(x) for x in ns.rescore.split(",")])
    seed = ns.seed if ns.seed is not None else int(time.time())
    print(f"accuracy: seed {seed}", flush=True)
    os.environ["SLURM_CONF"] = f"/etc/slurm-{ns.cluster}/slurm.conf"
    nodes = [f"{ns.cluster}{k}" for k in range(1, ns.nodes + 1)]
    leaves = switches(nodes)
    print(f"accuracy: {len(nodes)} nodes, leaf switches " + ", ".join(f"{s} ({len(v)})" for s, v in leaves.items()),
          flush=True)
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(ns.keep or tmp)
        out.mkdir(parents=True, exist_ok=True)
        c = Campaign(ns, rng, nodes, leaves, out, backgrounds=[b.strip() for b in ns.background.split(",")])
        only = {k.strip() for k in ns.kinds.split(",")} if ns.kinds else None
        c.deck_run, c.deck_sweep = Deck(rng, "run", only), Deck(rng, "sweep", only)
        t0, load0 = time.monotonic(), os.getloadavg()
        undrain(nodes)
        for i in range(ns.runs):
            run_round(c, i)
        if ns.runs:
            print_tables(c)
        active: list[Planted] = []
        if ns.sweeps >= 4 and (not only or "decline" in only):
            d = Planted(BY_NAME["decline"], (rng.choice(nodes),), 0, phase="sweep")
            active.append(d)
        for s in range(ns.sweeps):
            sweep_round(c, s, active)
        c.planted += active
        for i in range(ns.pairs):
            pairs_round(c, i)
        wall = time.monotonic() - t0
        result = print_tables(c)
        load1 = os.getloadavg()
        print(f"\naccuracy: seed {seed}; {wall / 60:.1f} min; load average {load0[0]:.2f} at the start, {load1[0]:.2f} "
              f"({load1[2]:.2f} over 15 min) at the end; walls per round: " + ", ".join(
                  f"{k} {sum(v) / len(v):.0f} s" for k, v in c.walls.items() if v), flush=True)
        if ns.json:
            doc = {"seed": seed, "wall_s": wall, "load_start": load0, "load_end": load1, "nodes": nodes,
                   "leaves": leaves, "args": vars(ns), **result,
                   "rounds": {k: v for k, v in c.healthy.items()},
                   "planted": [{"kind": p.kind.name, "phase": p.phase, "nodes": p.nodes, "extra": p.extra,
                                "where": p.where, "seen": p.seen} for p in c.planted]}
            Path(ns.json).write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
