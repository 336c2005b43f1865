"""From the gathered sweep data to verdicts: per-op tables, averages, expectations, stragglers.

Time per op at one size = mean of the ranks' times (nccl-tests' default `-a 1`);
the slowest rank's time is kept in the JSON.  The judged figure is the mean busbw
over sizes >= the floor (default: max size / 8, i.e. the top four sizes at -f 2):
nccl-tests' footer averages every size, which tiny, latency-bound sizes drag down.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Mapping

from trainready.hardware.collectives import (DTYPES, EXPECTATION_KEY_GRAMMAR, OPS, bandwidths, human, valid_expectation_key)
from trainready.comm.confirm import cleared as _cleared, named as _named, results, subject as _subject, too_noisy as _too_noisy
from trainready.comm.straggler import analyse, ratio_floor
from trainready.comm.table import Meas, Row, format_table
from trainready.errors import ConfigError
from trainready.records import Metric, Outcome, Status, Threshold

INPLACE_OPS = ("all_reduce", "broadcast")  # torch runs these in place; the rest out of place


def placement(op: str) -> str:
    return "in-place" if op in INPLACE_OPS else "out-of-place"


def expectation(expected: Mapping[str, float], op: str, n: int, source: str) -> tuple[float, str] | None:
    """(GB/s, spec key) for `op` at world size n: key 'op@n' wins over 'op'. Unknown ops → ConfigError.
    The key is as written in the spec ('comm.expected_busbw_gbps.' + key)."""
    for key in expected:
        if not valid_expectation_key(key):
            raise ConfigError(source, f"comm.expected_busbw_gbps.{key}", f"expected {EXPECTATION_KEY_GRAMMAR}")
    for key in (f"{op}@{n}", op):
        if key in expected:
            return float(expected[key]), f"comm.expected_busbw_gbps.{key}"
    return None


@dataclass(frozen=True)
class OpTable:
    op: str
    dtype: str
    rows: list[dict[str, Any]]
    avg_busbw: float  # over floor <= sizes <= ceil, GB/s (nan: no size there)
    floor: int
    wrong: int
    ceil: int | None = None  # None: no upper bound (every size >= floor)
    efficiency: float = math.nan  # busbw / same-run ring send/recv busbw, mean over the window (nan: not measured)

    def nccl_rows(self) -> list[Row]:
        o = OPS[self.op]
        return [Row(r["bytes"], r["count"], DTYPES[self.dtype][1], o.redop, o.root,
                    {placement(self.op): Meas(r["time_us"], r["algbw_gbps"], r["busbw_gbps"], r["wrong"])})
                for r in self.rows]

    @property
    def span(self) -> str:
        """The sizes avg_busbw is taken over, for people."""
        return f"S >= {human(self.floor)}" if self.ceil is None else f"{human(self.floor)} <= S <= {human(self.ceil)}"

    def text(self) -> str:
        rows = self.nccl_rows()
        foot = [f"# Avg bus bandwidth ({self.span}) : {self.avg_busbw:g} GB/s"]
        return format_table(rows, (placement(self.op),), extra_footer=foot)


def op_table(op: str, dtype: str, entries: list[dict[str, Any]], n: int, floor: int,
             ceil: int | None = None) -> OpTable:
    rows = []
    for e in entries:
        if e["op"] != op or e["dtype"] != dtype:
            continue
        t_mean = sum(e["time_s"]) / len(e["time_s"])
        alg, bus = bandwidths(op, e["bytes"], t_mean, n)
        rows.append({"size": e["size"], "bytes": e["bytes"], "count": e["count"], "iters": e.get("iters"), "time_us": t_mean * 1e6,
                     "time_us_max": max(e["time_s"]) * 1e6, "time_us_by_rank": [t * 1e6 for t in e["time_s"]],
                     "wall_s": e.get("wall_s"),
                     "algbw_gbps": alg, "busbw_gbps": bus, "wrong": sum(e["wrong"]), "wrong_by_rank": e["wrong"],
                     **row_efficiency(op, e, n)})
    inside = [r for r in rows if floor <= r["size"] <= (ceil if ceil is not None else r["size"])]
    big = [r["busbw_gbps"] for r in inside if not math.isnan(r["busbw_gbps"])]
    avg = sum(big) / len(big) if big else float("nan")
    effs = [r["efficiency"] for r in inside if "efficiency" in r]
    eff = sum(effs) / len(effs) if effs else math.nan
    return OpTable(op, dtype, rows, avg, floor, sum(r["wrong"] for r in rows), ceil, eff)


def row_efficiency(op: str, entry: Mapping[str, Any], n: int) -> dict[str, float]:
    """One size's efficiency: the median over the alternating loops of busbw(op) / busbw(ring send/recv),
    each pair timed back to back (sweep.alternate), so a host that is slower this minute slows both.
    {} where the sweep measured no reference (sendrecv, 1 rank, sizes outside the window, eff_loops 0)."""
    ref = entry.get("ref")
    if not ref:
        return {}
    ring = ref["ring_bytes"]
    ratios = [bandwidths(op, entry["bytes"], t_op, n)[1] / bandwidths("sendrecv", ring, t_ring, n)[1]
              for t_op, t_ring in zip(ref["op_s"], ref["ring_s"]) if t_op > 0 and t_ring > 0]
    if not ratios:
        return {}
    return {"efficiency": statistics.median(ratios),
            "ring_busbw_gbps": bandwidths("sendrecv", ring, min(ref["ring_s"]), n)[1]}


def judge_op(t: OpTable, n: int, backend: str, expected: Mapping[str, float], min_fraction: float,
             source: str, fraction_by_key: Mapping[str, float] | None = None) -> Outcome:
    """The verdict on one op: wrong elements fail; busbw below the fraction (comm.min_fraction_by_op's for
    the expectation's key, else min_fraction) of the expectation fails; no expectation warns."""
    lab = {"op": t.op, "backend": backend, "dtype": t.dtype, "ranks": n}
    details = {"op": t.op, "dtype": t.dtype, "ranks": n, "backend": backend, "placement": placement(t.op),
               "buffer_S": OPS[t.op].buffer, "busbw_factor": OPS[t.op].busbw_factor(n),
               "avg_floor_bytes": t.floor, "avg_busbw_gbps": t.avg_busbw, "rows": t.rows}
    if not t.rows:
        return Outcome(Status.SKIP, f"{t.op}: nothing to run at {n} rank(s) in this size range", details=details)
    metrics = [Metric.of("comm_wrong_elements", r["wrong"], "1", Threshold("==", 0, "1", "exact expected output"),
                         size_bytes=r["bytes"], **lab) for r in t.rows]
    metrics += [Metric.of("comm_busbw", r["busbw_gbps"], "GB/s", None, size_bytes=r["bytes"], **lab) for r in t.rows]
    metrics.append(Metric.of("comm_time", t.rows[-1]["time_us"], "us", None, size_bytes=t.rows[-1]["bytes"], **lab))
    exp = expectation(expected, t.op, n, source)
    thr = None
    if exp:
        key = exp[1].removeprefix("comm.expected_busbw_gbps.")
        frac = (fraction_by_key or {}).get(key, min_fraction)
        where = f"comm.min_fraction_by_op.{key}" if key in (fraction_by_key or {}) else "comm.min_fraction"
        thr = Threshold(">=", frac * exp[0], "GB/s", f"{frac:g} ({where}) x {exp[1]} = {exp[0]:g}")
    top = t.ceil if t.ceil is not None else max(r["size"] for r in t.rows)
    metrics.append(Metric.of("comm_busbw_avg", t.avg_busbw, "GB/s", thr, from_bytes=t.floor, to_bytes=top, **lab))
    if not math.isnan(t.efficiency):  # judged over all ops together (judge_efficiency); recorded per op
        details["efficiency"] = t.efficiency
        metrics.append(Metric.of("comm_efficiency", t.efficiency, "1", None, from_bytes=t.floor, to_bytes=top, **lab))
    head = f"{t.op}: busbw {t.avg_busbw:.3g} GB/s avg over {t.span}"
    if t.wrong:
        bad = [r for r in t.rows if r["wrong"]]
        ranks = sorted({k for r in bad for k, w in enumerate(r["wrong_by_rank"]) if w})
        return Outcome(Status.FAIL, f"{t.op}: {t.wrong} wrong element(s) at {len(bad)} size(s) "
                       f"(first at {bad[0]['bytes']} B), seen on rank(s) {ranks}", tuple(metrics),
                       remedy="Silent data corruption: suspect the GPU/link of the named ranks; rerun with "
                       "NCCL_DEBUG=INFO and check dmesg for Xid errors.", details=details)
    if thr is not None and OPS[t.op].busbw_factor(n) == 0:
        return Outcome(Status.WARN, f"{head}; at 1 rank busbw is 0 by definition (factor 2(n-1)/n or (n-1)/n), "
                       f"{exp[1] if exp else ''} not applied", tuple(metrics), details=details)
    if thr is None:
        return Outcome(Status.WARN, f"{head}; no expectation in the spec", tuple(metrics),
                       remedy=f"set comm.expected_busbw_gbps.{t.op} (reference node)",
                       details=details)
    if math.isnan(t.avg_busbw):
        # The expectation was averaged over other sizes (comm.expected_sizes_bytes): never compare unlike figures.
        where = "comm.expected_sizes_bytes, where the reference measured it" if t.ceil is not None else "the averaging window"
        return Outcome(Status.WARN, f"{t.op}: no message size of this run lies in [{human(t.floor)}, {human(top)}] "
                       f"({where}); {exp[1] if exp else ''} not judged", tuple(metrics),
                       remedy=f"run `trainready comm -b {human(t.floor)} -e {human(top)}` to judge busbw", details=details)
    if not thr.holds(t.avg_busbw):
        remedy = ("Check NVLink/NVSwitch health (nvidia-smi nvlink -s, Fabric Manager), NCCL_* env "
                  "(NVLS, P2P level) and the straggler matrix." if backend == "nccl" else
                  "gloo runs on the CPU: check for other load on the host (top), CPU frequency scaling, and "
                  "that the expectation came from this kind of machine.")
        return Outcome(Status.FAIL, f"{head} < {thr.bound:.3g} ({thr.source})", tuple(metrics),
                       remedy=remedy, details=details)
    return Outcome(Status.PASS, f"{head} >= {thr.bound:.3g} ({thr.source})", tuple(metrics), details=details)


def judge_all_ops(ts: list[OpTable], n: int, backend: str, expected: Mapping[str, float], fraction: float | None,
                  source: str) -> Outcome | None:
    """All ops together (comm.min_fraction_all_ops): the geometric mean over the ops with an expectation of
    avg_busbw / expectation.  A uniformly slow fabric or host lowers every term; per-op noise partly cancels
    (spec/floors.py).  None when the spec sets no such fraction."""
    if fraction is None:
        return None
    ratios: dict[str, float] = {}
    for t in ts:
        exp = expectation(expected, t.op, n, source)
        if exp and t.rows and OPS[t.op].busbw_factor(n) > 0 and t.avg_busbw > 0:  # nan > 0 is False
            ratios[t.op] = t.avg_busbw / exp[0]
    return _geomean_verdict(ratios, fraction, "comm.min_fraction_all_ops", "busbw", "comm_busbw_ratio_geomean",
                            backend, n, "Every collective is slower than on the reference: a fabric, host or "
                            "configuration difference (NCCL_* env, CPU load on gloo), not one op; compare with the "
                            "reference record.")


def judge_efficiency(ts: list[OpTable], n: int, backend: str, expected: Mapping[str, float],
                     fraction: float | None, source: str) -> Outcome | None:
    """Collective efficiency (comm.min_fraction_efficiency): the geometric mean over the ops with an expected
    efficiency (comm.expected_efficiency) of efficiency / expectation, where an op's efficiency is its busbw
    over the busbw of a ring send/recv of the same buffer timed alternately in the same run (row_efficiency).
    busbw is defined to compare with the links' peak rate whatever the rank count (nccl-tests
    doc/PERFORMANCE.md, "Bus bandwidth"), so a collective that falls behind point-to-point traffic on the
    same links in the same minute is slow in itself (algorithm, protocol, NCCL_* setting, library), whatever
    the host's load; the absolute floors judge the links.  None when the spec sets no such fraction."""
    if fraction is None:
        return None
    ratios: dict[str, float] = {}
    for t in ts:
        exp = expectation(expected, t.op, n, source)
        if exp and t.efficiency > 0:  # nan > 0 is False
            ratios[t.op] = t.efficiency / exp[0]
    return _geomean_verdict(ratios, fraction, "comm.min_fraction_efficiency", "efficiency",
                            "comm_efficiency_ratio_geomean", backend, n,
                            "The collectives are slow against point-to-point traffic measured in the same minute: "
                            "an algorithm/protocol or library difference (NCCL_ALGO/NCCL_PROTO/NVLS settings, NCCL or "
                            "gloo version), not the links; compare the versions and NCCL_* env with the reference "
                            "record.")


def _geomean_verdict(ratios: Mapping[str, float], fraction: float, key: str, figure: str, metric_name: str,
                     backend: str, n: int, remedy: str) -> Outcome:
    """PASS/FAIL on the geometric mean of `ratios` (op -> figure / its expectation) against `fraction`;
    SKIP with fewer than 2 ops."""
    thr = Threshold(">=", fraction, "1", f"{key} = {fraction:g} (geometric mean of {figure} / expectation over "
                    "the ops)")
    details = {"ratio_by_op": dict(ratios), key.removeprefix("comm."): fraction}
    if len(ratios) < 2:
        return Outcome(Status.SKIP, f"all ops together: {len(ratios)} op(s) with a judged {figure} and an "
                       "expectation; a mean over ops needs at least 2", details=details)
    g = math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))
    metric = Metric.of(metric_name, g, "1", thr, backend=backend, ranks=n, ops=len(ratios))
    worst = min(ratios, key=ratios.__getitem__)
    head = (f"all {len(ratios)} ops together: {figure} at {g:.3g} x expectation (geometric mean; lowest "
            f"{worst} {ratios[worst]:.3g})")
    if thr.holds(g):
        return Outcome(Status.PASS, f"{head} >= {fraction:g} ({key})", (metric,), details=details)
    return Outcome(Status.FAIL, f"{head} < {fraction:g} ({key})", (metric,), remedy=remedy, details=details)


def judge_pairs(pairs: dict[str, Any] | None, n: int, nbytes: int, backend: str) -> Outcome:
    """The straggler verdict: the matrix nominates (straggler.analyse), the solo re-measurement confirms
    (confirm.py); only a confirmed rank or link fails the check."""
    if not pairs or n < 2:
        return Outcome(Status.SKIP, f"pairwise send/recv: nothing to compare (world of {n}: no pair of ranks)")
    matrix, floor = pairs["matrix"], ratio_floor(backend)
    a = analyse(matrix, floor)
    probes = results(pairs["probes"], pairs["times"], matrix, a["rank_score_s"])
    details = {"bytes": nbytes, "seconds_matrix": matrix, **a, "nominated": {"ranks": a["slow_ranks"],
               "links": a["slow_links"]}, "probes": [p.as_dict() for p in probes], "sharing": core_sharing(n, backend)}
    details["slow_ranks"] = [p.probe.subject[0] for p in probes if p.probe.kind == "rank" and p.beyond_noise(floor)]
    details["slow_links"] = [list(p.probe.subject) for p in probes if p.probe.kind == "link" and p.beyond_noise(floor)]
    metrics = tuple(Metric.of("comm_pair_time", s * 1e6, "us", None, rank=r, backend=backend, stat="median_over_peers")
                    for r, s in enumerate(a["rank_score_s"]))
    if n < 3:
        # One pair: a slow rank or link needs others to be slow against (a straggler is an outlier).
        return Outcome(Status.SKIP, f"pairwise send/recv of {human(nbytes)} B: nothing to compare "
                       "(2 ranks make one pair; naming a straggler needs at least 3 ranks)", metrics, details=details)
    sharing = f"; {details['sharing']}" if details["sharing"] else ""
    confirmed = [p for p in probes if p.beyond_noise(floor)]
    noisy = [p for p in probes if p.confirmed(floor) and not p.beyond_noise(floor)]
    if confirmed:
        return Outcome(Status.FAIL, "straggler: " + "; ".join(_named(p) for p in confirmed) + sharing, metrics,
                       remedy="Inspect the named rank's GPU clocks/throttling (nvidia-smi -q -d PERFORMANCE) and "
                       "its NVLink/PCIe link (nvidia-smi topo -m).", details=details)
    unjudged = [p for p in probes if p.probe.ref is None]
    cleared = "; ".join(_cleared(p) for p in probes if p.probe.ref is not None and not p.confirmed(floor))
    cleared = f"; {cleared}" if cleared else ""
    if noisy:
        return Outcome(Status.WARN, f"pairwise send/recv of {human(nbytes)} B: not judged: "
                       + "; ".join(_too_noisy(p, floor) for p in noisy) + f"{cleared}{sharing}", metrics,
                       remedy="Run `trainready comm` again on a quiet host (no other work on its CPUs and GPUs).",
                       details=details)
    if unjudged:
        what = ", ".join(_subject(p) for p in unjudged)
        return Outcome(Status.WARN, f"pairwise send/recv of {human(nbytes)} B: {what} slow in the matrix, not "
                       f"judged (no pair of unsuspected ranks to measure against){cleared}{sharing}", metrics,
                       remedy="Run `trainready comm` again; with more ranks the suspect can be measured against others.",
                       details=details)
    med = a["median_s"]
    worst = max(range(n), key=lambda r: a["rank_score_s"][r])
    return Outcome(Status.PASS, f"pairwise send/recv of {human(nbytes)} B: no slow rank or link "
                   f"(slowest rank {worst} at {a['rank_score_s'][worst] / med:.2f}x the median){cleared}{sharing}",
                   metrics, details=details)


def core_sharing(n: int, backend: str) -> str:
    """What the matrix cannot judge where ranks outnumber this host's CPU cores (gloo): '' otherwise."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if backend != "gloo" or n <= cores:
        return ""
    return (f"{n} ranks on {cores} CPU cores: the matrix's pairs share cores, so it only nominates; "
            "each suspect is judged by its pair measured alone")