"""The burn-in's verdict, from what was measured (pure: tests feed it made-up series)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from trainready.burnin import clock, counters, overtime, series, when
from trainready.records import BEYOND_NOISE, Metric, Outcome, Status, TIMING_ONLY, Threshold
from trainready.spec.burnin import BurnInSpec
from trainready.util.listing import first_of

REMEDY = ("A GPU that slows, heats or counts errors under sustained load: read its clock-event reasons and "
          "violation times (nvidia-smi -q -d PERFORMANCE), dmesg for Xid, its airflow and power; run "
          "`dcgmi diag -r 3` on it; drain it and have it serviced if it repeats.")
FIGURES = (("gemm_tflops", "burnin_gemm", "TFLOP/s"), ("copy_gbps", "burnin_hbm", "GB/s"))


@dataclass(frozen=True)
class Inputs:
    """What one burn-in measured, read back (series.read) with the counters around it."""

    names: list[str]
    """Each device as messages call it: 'GPU 3', or 'rank 1 (CPU)'."""
    measured: series.Measured
    """The ranks' intervals and the sampler's rows."""
    duration_s: float
    """Seconds asked for."""
    before: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Counters per device before the load ({} where NVML is not available)."""
    after: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Counters per device after it."""
    xids: list[tuple[int, int, float]] = field(default_factory=list)
    """(device, XID, seconds into the load) of every critical-XID event."""
    watch: dict[int, str] = field(default_factory=dict)
    """Each device's XID watch: 'registered', or 'not available: why'."""
    limits: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Each GPU's own limits (slowdown temperature, power limit), recorded."""
    nvml: str = ""
    """'' when NVML was read, else 'not available: why' (every GPU counter and reading skips with it)."""
    partial: str = ""
    """'' for a whole run; else what ended it early ('interrupted by SIGINT')."""


@dataclass
class _Found:
    fails: list[str] = field(default_factory=list)
    warns: list[str] = field(default_factory=list)
    metrics: list[Metric] = field(default_factory=list)
    gpus: dict[int, dict[str, Any]] = field(default_factory=dict)
    timing: list[str] = field(default_factory=list)  # the fails that rest on a figure over time alone
    clear: list[str] = field(default_factory=list)  # those beyond twice their bound: no host noise explains them


def judge(inp: Inputs, spec: BurnInSpec) -> Outcome:
    m, f = inp.measured, _Found()
    w = overtime.window_s(spec.first_s, m.seconds)
    for i, name in enumerate(inp.names):
        f.gpus[i] = {"name": name, "series": series.compact(m, i), "limits": inp.limits.get(i, {})}
        _over_time(f, i, name, m, w, spec)
        _temps_and_slowdown(f, i, name, series.gpu_samples(m, i), m.seconds, spec)
    _against_median(f, inp.names, spec)
    _allreduce(f, m)
    cv = counters.compare(inp.names, inp.before, inp.after, (inp.xids, inp.watch), m.seconds)
    f.fails += cv.fails
    f.warns += cv.warns
    for row in cv.rows:
        if "delta" in row:
            f.metrics.append(Metric.of("burnin_counter_delta", row["delta"], "errors", gpu=row["gpu"],
                                       counter=row["counter"]))
    from trainready.burnin.prints import judge_prints

    fp_fails, fp_metrics, fp_detail = judge_prints(m.prints, inp.names, m.start)
    f.fails += fp_fails
    f.metrics += fp_metrics
    sampling = _sampling(f, m, spec)
    f.metrics.append(Metric.of("burnin_measured", m.seconds, "s"))
    details = {"duration_s": inp.duration_s, "measured_s": round(m.seconds, 1), "window_s": round(w, 2),
               "partial": inp.partial, "nvml": inp.nvml or "read", "gpus": f.gpus, "counters": cv.rows,
               "xids": inp.xids, "sampling": sampling, "findings": f.fails + f.warns,
               "fingerprint_mismatches_per_window": fp_detail}
    return _outcome(inp, f, details)


def _spans(m: series.Measured, i: int, key: str) -> list[overtime.Span]:
    return [(x["t0"] - m.start, x["t"] - m.start, float(x[key])) for x in m.ranks.get(i, [])]


def _over_time(f: _Found, i: int, name: str, m: series.Measured, w: float, spec: BurnInSpec) -> None:
    for key, metric, unit in FIGURES:
        spans = _spans(m, i, key)
        d = overtime.drift(spans, w, spec.drop_max)
        if d is None:
            continue
        longest = max(b - a for a, b, _ in spans)
        if longest > w:  # one interval outlasts the comparison window: no window can show a fall within it
            f.warns.append(f"{name}: {metric}: one interval lasted {longest:.1f} s, longer than the {w:.1f} s window "
                           f"a fall is judged over ({len(spans)} interval(s) in {m.seconds:.0f} s): a fall cannot be "
                           "judged (a host this loaded stretches every interval); run longer or on a quieter host")
        sustained = overtime.weighted_median(spans, -math.inf, math.inf)
        f.gpus[i][key] = {"first": d.first, "last": d.last, "low": d.low, "sustained": sustained,
                          "fell_at_s": None if not d.fell else round(d.fell_at, 1)}
        thr = Threshold("<=", spec.drop_max, "1", f"spec burnin.drop_max: below its own first {w:.0f} s")
        drop = 1 - d.low / d.first if d.first > 0 else math.nan
        f.metrics += [Metric.of(f"{metric}_sustained", sustained, unit, gpu=i),
                      Metric.of(f"{metric}_first", d.first, unit, gpu=i),
                      Metric.of(f"{metric}_last", d.last, unit, gpu=i),
                      Metric.of(f"{metric}_drop", drop, "1", thr, gpu=i)]
        if d.fell:
            why = overtime.said(overtime.reason_seconds(series.gpu_samples(m, i)))
            said = (f"{name}: {d.first:.4g} → {d.low:.4g} {unit} {when(d.fell_at)} "
                    f"(more than {spec.drop_max:.0%} below its first {w:.0f} s); {why}")
            host = _host_wide(m, i, key, w, d.low / d.first if d.first > 0 else 1.0) if "(CPU)" in name else ""
            (f.warns if host else f.fails).append(said + host)
            f.timing.append(said + host)
            if drop > 2 * spec.drop_max:
                f.clear.append(said)


def _temps_and_slowdown(f: _Found, i: int, name: str, smp: list[tuple[float, dict[str, Any]]], seconds: float,
                        spec: BurnInSpec) -> None:
    for key, metric, limit, lkey in (("temp_c", "burnin_temp_max", spec.gpu_temp_max_c, "gpu_temp_max_c"),
                                     ("mem_temp_c", "burnin_mem_temp_max", spec.mem_temp_max_c, "mem_temp_max_c")):
        vals = [x[key] for _, x in smp if isinstance(x.get(key), (int, float))]
        if not vals:
            continue
        top = max(vals)
        thr = Threshold("<=", limit, "C", f"spec burnin.{lkey}") if limit is not None else None
        f.metrics.append(Metric.of(metric, top, "C", thr, gpu=i))
        if limit is not None and top > limit:
            f.fails.append(f"{name}: {key.replace('_c', '')} reached {top:g} °C > {limit:g} °C (burnin.{lkey})")
    clocks = [x["sm_mhz"] for _, x in smp if isinstance(x.get("sm_mhz"), (int, float))]
    if clocks:
        f.metrics.append(Metric.of("burnin_sm_clock_median", statistics.median(clocks), "MHz", gpu=i))
    if not smp:
        return
    f.gpus[i]["reasons_s"] = overtime.reason_seconds(smp)
    for bits, what, frac, key in ((overtime.THERMAL, "thermal", spec.thermal_slowdown_max_fraction,
                                   "thermal_slowdown_max_fraction"),
                                  (overtime.HARDWARE, "hardware", spec.hw_slowdown_max_fraction,
                                   "hw_slowdown_max_fraction")):
        s = overtime.group_seconds(smp, bits)
        allowed = frac * seconds if frac is not None else None
        thr = Threshold("<=", allowed, "s", f"spec burnin.{key} x {seconds:.0f} s") if allowed is not None else None
        f.metrics.append(Metric.of(f"burnin_{what}_slowdown", s, "s", thr, gpu=i))
        if allowed is not None and s > allowed:
            f.fails.append(f"{name}: {what} slowdown {s:.0f} s > {allowed:.0f} s allowed (burnin.{key}); "
                           f"{overtime.said(f.gpus[i]['reasons_s'])}")


def _against_median(f: _Found, names: list[str], spec: BurnInSpec) -> None:
    for key, metric, unit in FIGURES:
        vals = {i: g[key]["sustained"] for i, g in f.gpus.items() if key in g}
        if len(vals) < 2:
            continue
        med = statistics.median(vals.values())
        for i, v in vals.items():
            if v < spec.median_min_fraction * med:
                said = (f"{names[i]}: sustained {v:.4g} {unit} < {spec.median_min_fraction:g} x the node's "
                        f"median {med:.4g} ({metric}_sustained, burnin.median_min_fraction)")
                f.fails.append(said)
                f.timing.append(said)
                if v < (1 - 2 * (1 - spec.median_min_fraction)) * med:
                    f.clear.append(said)


def _allreduce(f: _Found, m: series.Measured) -> None:
    rows = [x for r in m.ranks.values() for x in r]
    bad = sum(1 for x in rows if not x.get("sum_ok", True))
    if bad:
        f.fails.append(f"all_reduce checksum wrong in {bad} interval(s) (rank r adds r+1: expected N(N+1)/2)")
    busbw = [x["busbw_gbps"] for x in m.ranks.get(0, [])]
    if busbw and len(m.ranks) > 1:
        f.metrics.append(Metric.of("burnin_allreduce_busbw_sustained", statistics.median(busbw), "GB/s"))


def _sampling(f: _Found, m: series.Measured, spec: BurnInSpec) -> dict[str, Any]:
    cost = overtime.sampling_cost(m)
    own = overtime.sampler_self_time(m)
    f.metrics.append(Metric.of("burnin_sampler_self_time", own, "1"))
    out: dict[str, Any] = {"self_time_fraction": own, "hz": m.header.get("hz"), "block_s": m.header.get("block_s"),
                           "amplify": m.header.get("amplify"), "samples": len(m.samples)}
    if cost is None:
        out["cost_fraction"] = "not measured: no pair of whole sampling blocks in the run"
        return out
    out.update(cost_fraction=cost[0], pairs=cost[1])
    thr = Threshold("<=", spec.sampling_cost_max, "1", "spec burnin.sampling_cost_max (base rate, side by side)")
    f.metrics.append(Metric.of("burnin_sampling_cost", cost[0], "1", thr))
    if cost[0] > spec.sampling_cost_max:
        f.warns.append(f"NVML sampling cost the load {cost[0]:.2%} of its throughput (> {spec.sampling_cost_max:.0%})")
    return out


def _outcome(inp: Inputs, f: _Found, details: dict[str, Any]) -> Outcome:
    m = inp.measured
    head = f"partial ({inp.partial} after {clock(m.seconds)} of {clock(inp.duration_s)}): " if inp.partial else ""
    if f.fails:  # what failed first, then what this run could not judge or only warns of (a FAIL hides neither)
        msg = head + first_of(f.fails, 4) + (f"; also: {first_of(f.warns, 2)}" if f.warns else "")
        noise = {TIMING_ONLY: set(f.fails) <= set(f.timing), BEYOND_NOISE: bool(f.clear)}
        return Outcome(Status.FAIL, msg, tuple(f.metrics), REMEDY, {**details, **noise})
    if not any(m.ranks.values()):
        return Outcome(Status.ERROR, head + "no interval measured", tuple(f.metrics), details=details)
    gemm = [g["gemm_tflops"]["sustained"] for g in f.gpus.values() if "gemm_tflops" in g]
    hbm = [g["copy_gbps"]["sustained"] for g in f.gpus.values() if "copy_gbps" in g]
    temps = [x.value for x in f.metrics if x.name == "burnin_temp_max"]
    read = sum(1 for r in details["counters"] if "delta" in r)
    summary = (f"{len(inp.names)} device(s) x {clock(m.seconds)}: GEMM >= {min(gemm, default=0):.4g} TFLOP/s, "
               f"HBM copy >= {min(hbm, default=0):.4g} GB/s sustained, none slowed against its first window; "
               + (f"max {max(temps):g} °C; " if temps else "")
               + (f"{read} counter reading(s), none grew" if not inp.nvml else f"GPU counters {inp.nvml}"))
    status = Status.WARN if (f.warns or inp.partial) else Status.PASS
    msg = head + "; ".join([summary, *f.warns])
    return Outcome(status, msg, tuple(f.metrics), REMEDY if f.warns else "", details)


HOST_SHARE = 5.0  # a CPU rank is named only when it kept less than 1/5 of what the other ranks kept (planted: 1/50)


def _host_wide(m: series.Measured, i: int, key: str, w: float, kept: float) -> str:
    """On a CPU the ranks share the host's cores with everything else on it: a fall that the other ranks share
    (each kept more than HOST_SHARE x this rank's fraction of its first window) is the host's load, not this
    rank's fault; '' when this rank fell alone (or there is no other rank to tell)."""
    others = []
    for j in m.ranks:
        d = overtime.drift(_spans(m, j, key), w, 0.0) if j != i else None
        if d is not None and d.first > 0:
            others.append(d.low / d.first)
    if not others or kept * HOST_SHARE < statistics.median(others):
        return ""
    return (f" (the other ranks kept {statistics.median(others):.0%} of theirs: the host's load, shared by every "
            "rank on its cores, not this rank's fault; judged a warning)")
