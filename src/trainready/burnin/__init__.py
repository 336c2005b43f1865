"""Burn-in: every GPU under sustained load for minutes, its own error counters read before and after, its
temperature, clocks and throughput followed over time, and the whole judged against the spec's [burnin]
section (docs/burn-in.md).

load.py runs in each rank (GEMM, HBM copy, all_reduce; one line per interval); nvml.py reads the GPUs;
sampler.py samples them at >= 1 Hz beside the load; counters.py, overtime.py and judge.py decide;
series.py reads what the ranks and the sampler wrote.
"""

from __future__ import annotations

import re

from trainready.errors import UsageError

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """'15m', '90s', '1h', '1h30m', '900' (seconds) → seconds > 0; anything else is a UsageError (exit 2)."""
    t = text.strip().lower()
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*(h|min|m|s|)", t)
    if not t or not parts or "".join(f"{n}{u}" for n, u in parts) != t.replace(" ", ""):
        raise UsageError(f"--duration {text}: expected a time such as 15m, 90s, 1h or 1h30m")
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if not seconds > 0:
        raise UsageError(f"--duration {text}: expected a time > 0")
    return seconds


def clock(seconds: float) -> str:
    """Seconds as 'M:SS' (or 'H:MM:SS'), for progress lines and messages."""
    s = int(round(max(0.0, seconds)))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


def when(seconds: float) -> str:
    """'after 6 min' / 'after 42 s': when something happened, counted from the start of the load."""
    return f"after {seconds / 60:.0f} min" if seconds >= 120 else f"after {seconds:.0f} s"
