"""`trainready cluster pairs`: name the slow nodes from rounds of disjoint node pairs (cluster/pairs/pairing.py decides).

Every pair of a round is its own Slurm step, all started at once: `srun -N2 --nodelist=A,B ... trainready
cluster pair-task` (cluster/tasks/pair.py), whose rank 0 writes the pair's comm record under RESULTS/pairs/round-R/.
A pair whose step fails or writes no record has no result, which counts as below the floor; one whose srun could
not reach slurmctld is run again once the controller answers.  The search keeps its state per round
(state.py), so `cluster pairs --attach` picks it up at the round it reached.
Writes RESULTS/pairs/pairs.json (schema trainready.pairs/1): every pair, every node's standing, the culprits.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from trainready.cluster.control import outage, slurm
from trainready.cluster.options import FleetOptions, time_seconds
from trainready.cluster.pairs import state as ps
from trainready.cluster.pairs.pairing import Pair, PairingOptions, PairingOutcome, PairResult, find_culprits
from trainready.cluster.tasks.pair import pair_record
from trainready.util.listing import natural

SCHEMA = "trainready.pairs/1"
GRACE_S = 60.0  # beyond --time before a pair's srun is given up (Slurm kills the step at its limit)
RESENDS = 5  # a round's steps whose srun could not reach slurmctld: run again at most this often


@dataclass(frozen=True)
class PairsOptions:
    fleet: FleetOptions  # nodes, partition, spec, results, time limit, container, plants
    pairing: PairingOptions
    gpus_per_node: int = 0
    fabric: bool = False  # --fabric: ib_write_bw rail by rail (fabric.py, rails.py) instead of the all_reduce


def pair_argv(opts: PairsOptions, rnd: int, a: str, b: str) -> list[str]:
    """The srun line of one pair's step (pure: tests assert it)."""
    f = opts.fleet
    cmd = f.remote() + ["cluster", "pair-task", "--results", str(f.results), "--round", str(rnd), "--pair", f"{a},{b}"]
    if f.spec:
        cmd += ["--spec", str(Path(f.spec).resolve()) if Path(f.spec).is_file() else f.spec]
    for k, v in f.plants.items():
        cmd += ["--plant", f"{k}={v}"]
    cmd += ["--fabric"] if opts.fabric else []
    flags = f.container.srun_flags(f.results) if f.container else []
    return slurm.srun_argv(f"{a},{b}", 2, f.time_limit, f.partition, flags, cmd, job_name="trainready-pair",
                           tasks_per_node=1 if opts.fabric else max(1, opts.gpus_per_node), reservation=f.reservation,
                           gpus=opts.gpus_per_node, comment=ps.comment(f.results, rnd))


def busbw_of(path: Path) -> tuple[float | None, str]:
    """(the pair's all_reduce busbw in GB/s, '') or (None, why there is none); of a --fabric pair: its worst
    rail's share of the rate (fabric.py)."""
    from trainready.cluster.pairs import fabric
    from trainready.cluster.tasks.layout import read_json

    if fabric.is_rail_record(path):
        return fabric.share_of(path)
    from trainready.records import SCHEMA_VERSION

    doc, why = read_json(path, SCHEMA_VERSION)
    if doc is None:
        return None, why
    for r in doc.get("results") or []:
        if r.get("status") in ("fail", "error") and "wrong" in str(r.get("message", "")):
            return None, f"wrong all_reduce results: {r.get('message')}"
        for m in r.get("metrics") or []:
            if m.get("name") == "comm_busbw_avg" and isinstance(m.get("value"), (int, float)):
                return float(m["value"]), ""
    first = next((r.get("message", "") for r in doc.get("results") or [] if r.get("status") in ("fail", "error")), "")
    return None, f"no busbw in {path}{': ' + first if first else ''}"


def make_measure(opts: PairsOptions, addr: Mapping[str, str], say: Callable[[str], None],
                 why: dict[Pair, str]) -> Callable[[int, Sequence[Pair]], dict[Pair, float | None]]:
    """Each round's busbw per pair: a round this search finished is read from its state (state.py), an
    unfinished one keeps the pairs whose record its earlier steps wrote; the rest run as steps, and a step whose
    srun could not reach slurmctld runs again once the controller answers."""
    f = opts.fleet

    def measure(rnd: int, pairs: Sequence[Pair]) -> dict[Pair, float | None]:
        got = kept(f.results, rnd, pairs, say)
        todo = [ab for ab in pairs if ab not in got]
        if todo:
            ps.round_started(f.results, rnd, pairs)
        for attempt in range(RESENDS + 1):
            if not todo:
                break
            ran, todo = run_steps(opts, addr, rnd, todo, say)
            got.update(ran)
            if todo and attempt < RESENDS:
                say(f"round {rnd}: {', '.join(f'{a}+{b}' for a, b in todo)}: srun could not reach slurmctld; "
                    "again once it answers")
                slurm.nodes([n for ab in todo for n in ab])  # waits for a silent controller (control/outage.py)
        got.update({ab: (None, f"srun could not reach slurmctld, {RESENDS + 1} times") for ab in todo})
        ps.round_done(f.results, rnd, {ab: got[ab] for ab in pairs})
        why.update({ab: got[ab][1] for ab in pairs})
        return {ab: got[ab][0] for ab in pairs}
    return measure


def kept(results: Path, rnd: int, pairs: Sequence[Pair], say: Callable[[str], None]) -> dict[Pair, tuple[float | None, str]]:
    """The results round `rnd` of this search already has: all of a finished round's; an unfinished round's pairs
    whose record its steps wrote (once those still running have ended)."""
    r = ps.begun(results, rnd, pairs)
    if r.get("results"):
        say(f"round {rnd}: measured earlier; not run again")
        return {ab: (r["results"][ps.key(ab)]["busbw_gbps"], r["results"][ps.key(ab)]["why"]) for ab in pairs}
    if not r:
        return {}
    ps.wait_steps(results, rnd, say)
    got = {ab: busbw_of(pair_record(results, rnd, *ab)) for ab in pairs if pair_record(results, rnd, *ab).is_file()}
    if got:
        say(f"round {rnd}: {', '.join(f'{a}+{b}' for a, b in got)}: measured earlier; not run again")
    return got


def run_steps(opts: PairsOptions, addr: Mapping[str, str], rnd: int, pairs: Sequence[Pair],
              say: Callable[[str], None]) -> tuple[dict[Pair, tuple[float | None, str]], list[Pair]]:
    """({pair: (busbw, why none)} of the pairs that ran, [the pairs whose srun could not reach slurmctld])."""
    f = opts.fleet
    logs = f.results / "pairs" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    pair_record(f.results, rnd, "a", "b").parent.mkdir(parents=True, exist_ok=True)
    procs = []
    for a, b in pairs:
        pair_record(f.results, rnd, a, b).unlink(missing_ok=True)
        first = min((a, b), key=natural)  # rank 0's node in srun's block distribution
        env = dict(os.environ, MASTER_ADDR=addr.get(first, first))
        log = logs / f"round-{rnd}-{a}__{b}.out"
        with open(log, "w", encoding="utf-8") as fh:
            procs.append(((a, b), log, subprocess.Popen(pair_argv(opts, rnd, a, b), stdout=fh,
                                                        stderr=subprocess.STDOUT, env=env)))
    say(f"round {rnd}: {len(pairs)} pair(s) at once: {', '.join(f'{a}+{b}' for a, b in pairs[:6])}"
        f"{' ...' if len(pairs) > 6 else ''}")
    deadline = time.monotonic() + time_seconds(f.time_limit) + GRACE_S
    out: dict[Pair, tuple[float | None, str]] = {}
    unsent: list[Pair] = []
    for (a, b), log, p in procs:
        try:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        rec = pair_record(f.results, rnd, a, b)
        if p.returncode != 0 and not rec.is_file() and outage.srun_silent(log.read_text(errors="replace")):
            unsent.append((a, b))
        else:
            out[(a, b)] = busbw_of(rec)
    return out, unsent


def run_pairs(opts: PairsOptions, nodes: list[str], say: Callable[[str], None]) -> tuple[PairingOutcome, dict[Pair, str]]:
    info = slurm.nodes(nodes)
    addr = {n: i.addr for n, i in info.items() if i.addr}
    why: dict[Pair, str] = {}

    def on_round(rnd: int, results: Sequence[PairResult]) -> None:
        for r in results:
            figure = f"worst rail {r.busbw_gbps:.0%} of its rate" if opts.fabric else f"{r.busbw_gbps:.3g} GB/s"
            shown = figure if r.busbw_gbps is not None else f"no result ({why.get((r.a, r.b), '')})"
            say(f"  round {rnd}: {r.a} + {r.b}: {shown}")

    out = find_culprits(nodes, make_measure(opts, addr, say, why), opts.pairing, on_round)
    return out, why


def name_switches(out: PairingOutcome, fleet: FleetOptions) -> tuple[Any, ...]:
    """The leaf switches most of whose nodes the search named (judge/switches.py: a slow pair is a 'link' cause)."""
    from trainready.cluster.judge import switches
    from trainready.spec import load_spec

    fs = load_spec(fleet.spec)[0].fleet
    return switches.for_rejected({n: ("link",) for n in out.culprits}, fs.switch_fraction, fs.switch_causes,
                                 fleet.topology, {v.node for v in out.verdicts if v.status != "untested"})  # those it paired


def to_json(out: PairingOutcome, opts: PairsOptions, nodes: list[str], why: Mapping[Pair, str],
            named: Sequence[Any] = ()) -> dict[str, Any]:
    """The record; nodes under a switch in `named` are the switch's, not culprits of their own."""
    n = len(nodes)
    under = {x for s in named for x in s.nodes}
    return {
        "schema": SCHEMA,
        "nodes_tested": n,
        "rounds": out.rounds,
        "round_robin_rounds": n - 1 if n % 2 == 0 else n,
        "floor_gbps": out.floor_gbps,
        "reference_gbps": out.reference_gbps,
        "floor_fraction": opts.pairing.floor_fraction,
        "expected_gbps": opts.pairing.expected_gbps,
        "confirm": opts.pairing.confirm,
        "culprits": [c for c in out.culprits if c not in under],
        "switches": [s.to_json() for s in named],
        "undecided": list(out.undecided),
        "fleet_slow": out.fleet_slow,
        "pairs": [{"round": r.round, "a": r.a, "b": r.b, "busbw_gbps": r.busbw_gbps, "passed": r.passed(out.floor_gbps),
                   "record": str(pair_record(opts.fleet.results, r.round, r.a, r.b)),
                   **({"no_result": why.get((r.a, r.b), "")} if r.busbw_gbps is None else {})} for r in out.results],
        "nodes": [{"node": v.node, "status": "switch" if v.node in under else v.status, "passes": v.passes,
                   "fails": v.fails, "strikes": v.strikes,
                   "pass_ratio": None if v.passes + v.fails == 0 else v.pass_ratio, "reason": v.reason}
                  for v in out.verdicts],
        "planted": dict(opts.fleet.plants),
        **({"fabric": _fabric(out, opts)} if opts.fabric else {}),
    }


def _fabric(out: PairingOutcome, opts: PairsOptions) -> dict[str, Any]:
    from trainready.cluster.pairs import fabric

    return fabric.section(out, opts.fleet.results, opts.pairing, ps.read(opts.fleet.results).get("not_tested") or {})


def write(doc: dict[str, Any], results: Path) -> Path:
    from trainready.records import _jsonable
    from trainready.util.atomic import atomic_write_json

    return atomic_write_json(results / "pairs" / "pairs.json", _jsonable(doc))
