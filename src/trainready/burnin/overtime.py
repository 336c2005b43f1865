"""The burn-in judged over time: each GPU against its own first window, the seconds it spent in each slowdown
reason, and what the NVML sampling cost the load."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from trainready.burnin.series import Measured
from trainready.manifest.gpu import THROTTLE_BITS

THERMAL = 0x20 | 0x40  # sw_thermal_slowdown | hw_thermal_slowdown (nvml.h nvmlClocksEventReason*)
HARDWARE = 0x8 | 0x80  # hw_slowdown | hw_power_brake_slowdown
QUIET = 0x1  # gpu_idle: not a slowdown


def window_s(first_s: float, measured_s: float) -> float:
    """The first window: the spec's first_s, or a quarter of a run shorter than four of them."""
    return min(first_s, measured_s / 4) if measured_s > 0 else first_s


@dataclass(frozen=True)
class Drift:
    """One GPU's throughput over time, against its own first window."""

    first: float
    """Median over the first window."""
    last: float
    """Median over the last window."""
    low: float
    """Lowest median of any window (windows of the same length, a quarter window apart)."""
    fell_at: float
    """Seconds into the load at which it fell below the bound (the middle of the first window below it); nan
    when it never did."""

    @property
    def fell(self) -> bool:
        return not math.isnan(self.fell_at)


Span = tuple[float, float, float]  # (start, end) in seconds since the load's start, and the figure over it


def weighted_median(spans: list[Span], lo: float, hi: float) -> float:
    """The figure the load held for half the time in [lo, hi]: each interval weighs its overlap with the window
    (a slow interval lasts longer: counting intervals would under-weigh it)."""
    parts = sorted((v, min(b, hi) - max(a, lo)) for a, b, v in spans if min(b, hi) > max(a, lo))
    total = sum(w for _, w in parts)
    acc = 0.0
    for v, w in parts:
        acc += w
        if acc >= total / 2:
            return v
    return math.nan


def drift(spans: list[Span], w: float, drop_max: float) -> Drift | None:
    """`spans` are one GPU's intervals; None when its first window holds none."""
    if not spans:
        return None
    end = max(b for _, b, _ in spans)
    first = weighted_median(spans, 0.0, w)
    if math.isnan(first):
        return None
    bound, fell_at, low, s = first * (1 - drop_max), math.nan, first, 0.0
    while s + w <= end + 1e-9:
        med = weighted_median(spans, s, s + w)
        if not math.isnan(med):
            low = min(low, med)
            if math.isnan(fell_at) and med < bound:
                fell_at = s + w / 2
        s += w / 4
    return Drift(first, weighted_median(spans, end - w, end), low, fell_at)


def reason_seconds(samples: list[tuple[float, dict[str, Any]]]) -> dict[str, float]:
    """Seconds each clock-event reason was set (each sample's mask held until the next sample)."""
    out: dict[str, float] = {}
    for (t, x), (t_next, _) in zip(samples, samples[1:]):
        mask = x.get("reasons")
        if not isinstance(mask, int):
            continue
        for bit, name in THROTTLE_BITS.items():
            if mask & bit and bit != QUIET:
                out[name] = out.get(name, 0.0) + (t_next - t)
    return {k: round(v, 1) for k, v in out.items()}


def group_seconds(samples: list[tuple[float, dict[str, Any]]], bits: int) -> float:
    """Seconds at least one of `bits` was set."""
    return sum(t_next - t for (t, x), (t_next, _) in zip(samples, samples[1:])
               if isinstance(x.get("reasons"), int) and x["reasons"] & bits)


def said(reasons: dict[str, float]) -> str:
    """'hw_thermal_slowdown 212 s, sw_power_cap 530 s' (largest first), or 'no slowdown reason set'."""
    parts = [f"{k} {v:.0f} s" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1]) if v >= 0.5]
    return ", ".join(parts) if parts else "no slowdown reason set"


def sampling_cost(m: Measured) -> tuple[float, int] | None:
    """(share of GEMM throughput the base sampling rate costs, paired blocks behind it), from the sampler's
    fast and base blocks side by side; None when the run held no pair of whole blocks."""
    h = m.header
    if not h or not m.ranks:
        return None
    start, block, amp = float(h["start"]), float(h["block_s"]), int(h["amplify"])
    diffs = []
    for rows in m.ranks.values():
        per: dict[int, list[float]] = {}
        for x in rows:
            b0, b1 = int((x["t0"] - start) // block), int((x["t"] - start) // block)
            if b0 == b1:
                per.setdefault(b0, []).append(x["gemm_tflops"])
        for b in sorted(per):
            if b % 2 == 0 and b + 1 in per:
                base, fast = statistics.median(per[b]), statistics.median(per[b + 1])
                diffs.append((base - fast) / base)
    if not diffs:
        return None
    return statistics.median(diffs) / (amp - 1), len(diffs)


def sampler_self_time(m: Measured) -> float:
    """Seconds per second the sampler spent in its NVML reads at the base rate (its own duty cycle)."""
    costs = [float(x.get("cost_s", 0.0)) for x in m.samples if not x.get("fast")]
    hz = float(m.header.get("hz", 1.0)) if m.header else 1.0
    return statistics.fmean(costs) * hz if costs else 0.0
