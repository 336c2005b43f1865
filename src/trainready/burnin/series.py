"""Reading what the ranks (rank<R>.jsonl) and the sampler (samples.jsonl) wrote, and the compact per-GPU time
series the record keeps.  Only whole lines are read: a rank stopped mid-write (Ctrl-C) leaves at most one
half line, which is left out."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SAMPLES = "samples.jsonl"
BEFORE = "before.json"  # counters before the load, per GPU (for a partial record after Ctrl-C)
MAX_POINTS = 180  # points per GPU and series in the record (15 min → one per 5 s)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """Every whole JSON line of `path` ([] when it does not exist)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    return read_lines_text(text)


def read_lines_text(text: str) -> list[dict[str, Any]]:
    """Every whole JSON line of `text` (a line cut at the front by a seek fails to parse and is left out)."""
    out = []
    for line in text.split("\n")[:-1]:  # the text after the last newline is a line still being written
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


@dataclass(frozen=True)
class Measured:
    """Everything one burn-in wrote, read back."""

    start: float
    """Epoch seconds at which the load started (the earliest rank's start line); nan when none started."""
    ranks: dict[int, list[dict[str, Any]]]
    """Each rank's interval lines (t0, t, gemm_tflops, copy_gbps, busbw_gbps, sum_ok)."""
    header: dict[str, Any] = field(default_factory=dict)
    """The sampler's first line (start, hz, block_s, amplify)."""
    samples: list[dict[str, Any]] = field(default_factory=list)
    """The sampler's rows (t, fast, gpus, cost_s, xid)."""
    prints: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    """Each rank's fingerprint battery per window (t, window, fp: entry -> digest), in order."""

    @property
    def seconds(self) -> float:
        """Seconds of load measured (to the last interval of any rank)."""
        ends = [r[-1]["t"] for r in self.ranks.values() if r]
        return max(ends) - self.start if ends and math.isfinite(self.start) else 0.0


def read(out_dir: Path, world: int) -> Measured:
    ranks, starts, prints = {}, [], {}
    for r in range(world):
        lines = read_lines(out_dir / f"rank{r}.jsonl")
        starts += [x["start"] for x in lines if "start" in x]
        ranks[r] = [x for x in lines if "gemm_tflops" in x]
        prints[r] = [x for x in lines if "fp" in x]
    lines = read_lines(out_dir / SAMPLES)
    header = lines[0] if lines and "start" in lines[0] else {}
    return Measured(min(starts) if starts else math.nan, ranks, header, [x for x in lines if "gpus" in x], prints)


def gpu_samples(m: Measured, gpu: int) -> list[tuple[float, dict[str, Any]]]:
    """(seconds since the load's start, reading) of one GPU, in time order."""
    return [(row["t"] - m.start, row["gpus"][gpu]) for row in m.samples if gpu < len(row.get("gpus", []))]


def _bucket(points: list[tuple[float, float]], width: float) -> list[tuple[float, float]]:
    """Median per bucket of `width` seconds (the record's compact series)."""
    groups: dict[int, list[float]] = {}
    for t, v in points:
        if isinstance(v, (int, float)) and math.isfinite(v):
            groups.setdefault(int(t // width), []).append(float(v))
    return [(round((k + 0.5) * width, 1), float(f"{statistics.median(vs):.4g}")) for k, vs in sorted(groups.items())]


def compact(m: Measured, gpu: int) -> dict[str, list[list[float]]]:
    """One GPU's series for the record: [[seconds, value], ...] per quantity, at most MAX_POINTS each."""
    width = max(1.0, m.seconds / MAX_POINTS)
    rank = [(x["t"] - m.start, x) for x in m.ranks.get(gpu, [])]
    smp = gpu_samples(m, gpu)
    out = {k: _bucket([(t, x[k]) for t, x in rank], width) for k in ("gemm_tflops", "copy_gbps")}
    for k in ("temp_c", "mem_temp_c", "sm_mhz", "power_w"):
        out[k] = _bucket([(t, x.get(k)) for t, x in smp], width)
    return {k: [list(p) for p in v] for k, v in out.items() if v}
