"""Each node's figures over its sweeps: RESULTS/sweep/trend/NODE.json (`trainready.sweeptrend/1`).

Per sweep with a record: when, the verdict, the figures the fleet compares (GEMM TFLOP/s, HBM GB/s, train-step
tokens/s, PCIe copies, the burn-in's sustained figures, a busbw) per device, keyed by the GPU's board serial
(nvmlDeviceGetSerial), else its UUID; per GPU its error counters (lifetime uncorrectable ECC, rows remapped, PCIe
replays, XIDs since boot) and fingerprint mismatches (entries outside its identical peers' majority, in the node or
the sweep's fleet, or its own repeats).  Judged against the node's own past, not the fleet's:

* a figure more than `fleet.trend_fraction` below the median of the node's last `fleet.trend_runs` sweeps, and
  more than TREND_MADS median absolute deviations of those sweeps below it, is a WARN naming the figure, the
  value, the median, the runs and their dates; judged only once the node has `fleet.trend_min_runs` earlier
  sweeps of that figure (a median of one or two sweeps is no baseline);
* a figure whose own spread (MAD / median over those sweeps) is wider than `fleet.trend_fraction` cannot show a
  fall of that fraction: "not judged: noisy", said at every sweep with the count of sweeps in a row;
* a figure measured on a busy machine (its check's `details.machine.busy`) is recorded, marked (`busy`), never
  part of a baseline nor judged: other processes' load is not the node's;
* a counter that grew since the last sweep is a WARN naming both readings and dates;
* a GPU serial that changed on the node is said (a part swapped in repair): its history starts again.
An entry keeps each key's UUID too, so a history keyed by UUID alone reads on under serial keys.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from trainready.cluster.tasks.node import THROUGHPUT

SCHEMA = "trainready.sweeptrend/1"
KEEP = 100  # sweeps kept per node
MIN_RUNS = 3  # earlier sweeps of a figure before it is judged (fleet.trend_min_runs' default)
# A fall must also exceed this many median absolute deviations of the node's own sweeps: a steady 5%-a-sweep
# decline is 2.4 MADs below its 4 earlier sweeps' median at the fifth (12% below it), so it is still named there.
TREND_MADS = 2.0
NOISY = "not judged: noisy:"
COUNTERS = ("ecc_uncorrected_aggregate", "remapped_rows_uncorrectable", "pcie_replays", "xids_this_boot")


def path(results: Path, node: str) -> Path:
    return results / "sweep" / "trend" / f"{node}.json"


def load(results: Path, node: str) -> list[dict[str, Any]]:
    p = path(results, node)
    if not p.exists():
        return []
    doc = json.loads(p.read_text(encoding="utf-8"))
    return list(doc.get("runs", [])) if doc.get("schema") == SCHEMA else []


def save(results: Path, node: str, runs: list[dict[str, Any]]) -> None:
    from trainready.util.atomic import atomic_write_text

    p = path(results, node)
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(p, json.dumps({"schema": SCHEMA, "node": node, "runs": runs[-KEEP:]}, indent=1) + "\n")


def _gpus(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    nvml = (record.get("manifest") or {}).get("gpu", {})
    nvml = nvml.get("nvml", nvml) if isinstance(nvml, dict) else {}
    return [g for g in nvml.get("gpus", []) if isinstance(g, dict)] if isinstance(nvml, dict) else []


def gpu_key(g: Mapping[str, Any]) -> str:
    """A GPU's name in the history: its board serial, else (NVML reads none, e.g. on a GeForce) its UUID."""
    serial = str(g.get("serial", ""))
    return serial if serial and not serial.startswith("unavailable") else str(g.get("uuid"))


def _figures(record: Mapping[str, Any]) -> list[tuple[str, float, str]]:
    """('gemm_bf16@SERIAL' (or '@GPU-uuid', '@cpu'), value, why its check's machine was busy or "") for each
    figure the fleet compares and each busbw."""
    key = {str(g.get("index")): gpu_key(g) for g in _gpus(record)}
    out = []
    for res in (record.get("report") or {}).get("results", []):
        busy = str(((res.get("details") or {}).get("machine") or {}).get("busy") or "")
        for m in res.get("metrics", []):
            name, value = m.get("name", ""), m.get("value")
            if not isinstance(value, (int, float)) or not (name in THROUGHPUT or "busbw" in name):
                continue
            labels = m.get("labels") or {}
            dev = str(labels.get("gpu", labels.get("device", labels.get("op", ""))))
            out.append((f"{name}@{key.get(dev, dev)}", float(value), busy))
    return out


def figures(record: Mapping[str, Any]) -> dict[str, float]:
    """figure key -> value (_figures)."""
    return {k: v for k, v, _ in _figures(record)}


def busy_figures(record: Mapping[str, Any]) -> dict[str, str]:
    """The figures whose check measured them on a busy machine (suite/machine.py) -> why it was busy."""
    return {k: why for k, _, why in _figures(record) if why}


def counters(record: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    return {gpu_key(g): {c: g[c] for c in COUNTERS if isinstance(g.get(c), int)} for g in _gpus(record)}


def mismatches(record: Mapping[str, Any], fleet: Mapping[str, int] | None = None) -> dict[str, int]:
    """Per GPU (its history key; 'rank R' on a CPU node): fingerprint entries off this sweep, the larger of the
    node's own judgment (its `fingerprint_mismatches` metric) and the fleet's (`fleet`: GPU index or rank ->
    entries): the same entry off against both counts once."""
    key = {str(g.get("index")): gpu_key(g) for g in _gpus(record)}
    out: dict[str, int] = {}
    for res in (record.get("report") or {}).get("results", []):
        for m in res.get("metrics", []) if res.get("name") == "fingerprint" else []:
            lab = m.get("labels") or {}
            if m.get("name") == "fingerprint_mismatches":
                dev = str(lab.get("gpu", lab.get("rank", "")))
                out[key.get(dev, f"rank {dev}")] = int(m.get("value") or 0)
    for dev, n in (fleet or {}).items():
        k = key.get(dev, f"rank {dev}")
        out[k] = max(out.get(k, 0), int(n))
    return out


def cumulative(past: list[dict[str, Any]], mismatches: Mapping[str, int]) -> dict[str, int]:
    """Per GPU, its fingerprint mismatches over every sweep of the node so far (Prometheus's counter): the last
    entry's running total plus this sweep's, so dropping sweeps past KEEP never makes it fall; an older history
    with no running total starts from the sum of its kept sweeps."""
    last = past[-1].get("mismatches_total") if past else None
    if not isinstance(last, dict):
        last = {}
        for e in past:
            for dev, n in e.get("mismatches", {}).items():
                last[dev] = last.get(dev, 0) + int(n)
    return {d: int(last.get(d, 0)) + int(mismatches.get(d, 0)) for d in sorted(set(last) | set(mismatches))}


def entry(when: str, verdict: str, record: Mapping[str, Any], run: str,
          fleet_mismatches: Mapping[str, int] | None = None) -> dict[str, Any]:
    uuids = {gpu_key(g): str(g.get("uuid")) for g in _gpus(record)}  # in the NVML order
    return {"when": when, "verdict": verdict, "run": run, "figures": figures(record), "counters": counters(record),
            "gpus": list(uuids), "uuids": uuids, "mismatches": mismatches(record, fleet_mismatches),
            "busy": busy_figures(record)}


def _as_now(e: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """An earlier entry in this entry's keys: one written before serials were read names its GPUs by UUID."""
    by_uuid = {u: k for k, u in now.get("uuids", {}).items() if u != k}
    if not by_uuid or e.get("uuids"):
        return e

    def key(name: str) -> str:  # 'gemm_bf16@GPU-uuid' -> 'gemm_bf16@SERIAL'
        figure, at, dev = name.partition("@")
        return f"{figure}{at}{by_uuid.get(dev, dev)}"
    return {**e, "figures": {key(n): v for n, v in e.get("figures", {}).items()},
            "counters": {by_uuid.get(u, u): c for u, c in e.get("counters", {}).items()},
            "gpus": [by_uuid.get(u, u) for u in e.get("gpus", [])]}


def plant_decline(now: dict[str, Any], past: list[dict[str, Any]], pct: float) -> dict[str, Any]:
    """`--plant cluster.decline=NODE:PCT`: each figure recorded as the node's first recorded one x (1 - PCT/100)^k,
    k its earlier sweeps (a steady slow decline; planted after measuring: it proves the trend judge)."""
    first = next((e["figures"] for e in past if e.get("figures")), now["figures"])
    k = len(past)
    return {**now, "figures": {n: first.get(n, v) * (1 - pct / 100.0) ** k for n, v in now["figures"].items()}}


def _figure(name: str, value: float, prior: list[dict[str, Any]], fraction: float,
            noisy_before: int) -> tuple[str, bool]:
    """(the line for one figure against its earlier sweeps: a fall, a 'not judged: noisy' note with the count of
    sweeps in a row (`noisy_before` + 1), or ''; whether it was judged, i.e. not noisy)."""
    values = [float(e["figures"][name]) for e in prior]
    med = statistics.median(values)
    if med <= 0:
        return "", False
    mad = statistics.median(abs(v - med) for v in values)
    if mad / med > fraction:  # the figure's own sweep-to-sweep spread is wider than the fall it would be judged by
        return (f"{name}: {NOISY} its own spread over the last {len(prior)} sweep(s) (median absolute deviation "
                f"{mad:.4g}, {100 * mad / med:.0f}% of the median {med:.4g}; from {min(values):.4g} to "
                f"{max(values):.4g}) is wider than fleet.trend_fraction {100 * fraction:g}%: a fall of that size "
                f"could be noise (not judged for {noisy_before + 1} sweep(s) in a row)"), False
    if value >= med * (1 - fraction) or med - value <= TREND_MADS * mad:
        return "", True
    unit = THROUGHPUT.get(name.split("@")[0], "")
    return (f"{name}: {value:.4g} {unit} is {100 * (1 - value / med):.0f}% below this node's median "
            f"{med:.4g} of its last {len(prior)} sweep(s) ({prior[0]['when'][:10]} .. "
            f"{prior[-1]['when'][:10]}; runs {', '.join(e.get('run', '?') for e in prior[-3:])})"), True


def _noisy_run(past: list[dict[str, Any]], name: str) -> int:
    """How many of the node's latest entries in a row found `name` noisy (not judged for its spread)."""
    seen = [e["judged"][name] for e in past if name in e.get("judged", {})]  # a busy figure was never judged
    return len(seen) - 1 - max((i for i, ok in enumerate(seen) if ok), default=-1)


def judge(now: dict[str, Any], past: list[dict[str, Any]], fraction: float, runs: int,
          min_runs: int = MIN_RUNS) -> list[str]:
    """The trend WARNs of this sweep's entry against the node's earlier ones (at least `min_runs` of them per
    figure; a figure noisier than `fraction` is said, not judged; busy figures are neither judged nor part of
    any baseline).  Sets now['judged'][figure]."""
    out = []
    past = [_as_now(e, now) for e in past]
    judged = now.setdefault("judged", {})
    for name, value in sorted(now["figures"].items()):
        if name in now.get("busy", {}):
            continue  # measured on a busy machine: recorded and marked, not judged
        prior = [e for e in past if name in e.get("figures", {}) and name not in e.get("busy", {})][-runs:]
        if len(prior) < min_runs:
            continue
        said, judged[name] = _figure(name, float(value), prior, fraction, _noisy_run(past, name))
        if said:
            out.append(said)
    last = past[-1] if past else None
    if last is None:
        return out
    for gpu, cs in now["counters"].items():
        for c, v in cs.items():
            before = last.get("counters", {}).get(gpu, {}).get(c)
            if isinstance(before, int) and v > before:
                out.append(f"{gpu} {c} grew {before} -> {v} between the sweeps of {last['when'][:16]} and "
                           f"{now['when'][:16]}")
    gone = [u for u in last.get("gpus", []) if u not in now["gpus"]]
    new = [u for u in now["gpus"] if u not in last.get("gpus", [])]
    if gone or new:
        out.append(f"GPU(s) changed since {last['when'][:16]}: {', '.join(gone) or '-'} -> {', '.join(new) or '-'} "
                   "(a part swapped in repair?)")
    return out


@dataclass(frozen=True)
class Sweep:
    """This sweep's word on one node, kept in its history entry."""

    verdict: str  # pass / fail / unknown (sweep/judge.py)
    when: str  # the sweep's start, ISO 8601 UTC
    run: str  # the fleet run's folder name
    why: str = ""  # a failing sweep: the failing check and its one-line reason
    strikes: int = 0  # consecutive failing sweeps, this one included
    of: int = 0  # the strikes that drain (--strikes); 0 not said
    unjudged: int = 0  # an unknown sweep: the sweeps in a row that could not judge the node, this one included


@dataclass(frozen=True)
class Rule:
    """The spec's trend rule ([fleet] trend_fraction, trend_runs, trend_min_runs)."""

    fraction: float
    runs: int
    min_runs: int = MIN_RUNS


def follow(results: Path, node: str, record_path: str, sweep: Sweep, plants: Mapping[str, str],
           rule: Rule, fleet_mismatches: Mapping[str, int] | None = None) -> list[str]:
    """Add this sweep's entry to the node's history and judge it: the trend WARNs ([] without a record)."""
    from trainready.cluster.plants.faults import decline
    from trainready.util.nodetext import clean_tree

    try:
        record = clean_tree(json.loads(Path(record_path).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return []
    past = load(results, node)
    now = entry(sweep.when, sweep.verdict, record, sweep.run, fleet_mismatches)
    if sweep.verdict == "fail":
        now.update(why=sweep.why, strikes=sweep.strikes, **({"strikes_of": sweep.of} if sweep.of else {}))
    elif sweep.verdict == "unknown":
        now.update(why=sweep.why, unjudged=sweep.unjudged)
    now["mismatches_total"] = cumulative(past, now["mismatches"])
    pct = decline(plants, node)
    if pct is not None:
        now = plant_decline(now, past, pct)
    said = judge(now, past, rule.fraction, rule.runs, rule.min_runs)
    save(results, node, past + [{**now, "trend": said}])
    return said


def mark_drained(results: Path, node: str, when: str, reason: str) -> None:
    """The sweep drained the node after its latest entry: said there (the node's page marks it on its chart)."""
    runs = load(results, node)
    if runs:
        runs[-1]["drained"] = {"when": when, "reason": reason}
        save(results, node, runs)


def table(runs: list[dict[str, Any]]) -> list[str]:
    """A node's sweeps as text rows: when, verdict, each figure's value, the trend WARNs under their row."""
    names = sorted({n for e in runs for n in e.get("figures", {})})
    devs = sorted({d for e in runs for d in e.get("mismatches", {})})
    head = ["when (UTC)", "verdict", *names, *(f"fingerprint_mismatches@{d}" for d in devs)]
    rows = [[e["when"][:16].replace("T", " "), e.get("verdict", "?"),
             *(f"{e['figures'][n]:.4g}" if n in e.get("figures", {}) else "-" for n in names),
             *(str(e["mismatches"][d]) if d in e.get("mismatches", {}) else "-" for d in devs)] for e in runs]
    width = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(head, width))]
    for e, r in zip(runs, rows):
        out.append("  ".join(str(c).ljust(w) for c, w in zip(r, width)))
        if e.get("verdict") == "fail":
            out.append(f"    FAIL (strike {e.get('strikes', '?')}): {e.get('why') or 'no reason recorded'}")
        out += [f"    WARN: {w}" for w in e.get("trend", [])]
    return out
