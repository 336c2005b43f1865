"""How long the self-test will take here: each case's seconds from this machine's last self-test, laid on its lanes.

After every self-test the seconds each case took are kept in $XDG_CACHE_HOME/trainready/selftest-seconds.json
(~/.cache without it; written atomically; a cache, never evidence).  Before the next one starts, the expected time
is the schedule of schedule.py replayed on those figures: the local cases spread over their lanes, the Slurm runs
(cases sharing a run counted once) over theirs beside them, the exclusive ones one after another at the end.  A case never run here has no figure:
the estimate then says how many cases it leaves out, never a number made up for them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from trainready.selftest.cases import Case, share_key


@dataclass(frozen=True)
class Expected:
    seconds: float  # the cases with a figure, laid on the lanes
    known: int  # cases with a figure from this machine
    total: int

    def text(self) -> str:
        if not self.known:
            return f"expected time: unknown ({self.total} case(s), none run on this machine before)"
        missing = self.total - self.known
        more = f" plus {missing} case(s) never run here" if missing else ""
        return f"expected time: ~{self.seconds:.0f} s{more} (this machine's last self-test)"


def cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trainready" / "selftest-seconds.json"


def load() -> dict[str, float]:
    try:
        doc = json.loads(cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in doc.items() if isinstance(v, (int, float))} if isinstance(doc, dict) else {}


def remember(seconds: Mapping[str, float]) -> None:
    """Keep each case's seconds (skipped cases, which took none, are left as they were)."""
    from trainready.util.atomic import atomic_write_text

    kept = {**load(), **{k: round(v, 1) for k, v in seconds.items() if v > 0}}
    try:
        cache_path().parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(cache_path(), json.dumps(kept, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass  # a read-only home: the next self-test has no estimate, nothing else changes


def _spread(seconds: Sequence[float], lanes: int) -> float:
    """Longest-first onto the least loaded lane (the pool takes the next case as a lane frees)."""
    load_ = [0.0] * max(1, lanes)
    for s in sorted(seconds, reverse=True):
        load_[load_.index(min(load_))] += s
    return max(load_)


def expected(cases: Sequence[Case], lanes: int, slurm_lanes: int, seconds: Mapping[str, float]) -> Expected:
    known = [c for c in cases if c.name in seconds]
    local = [seconds[c.name] for c in known if c.needs != "slurm" and not c.exclusive]
    runs: dict[str, float] = {}  # a fleet run's seconds: its cases share one run (each reports the run's seconds)
    for c in known:
        if c.needs == "slurm" and not c.exclusive:
            runs[share_key(c)] = max(runs.get(share_key(c), 0.0), seconds[c.name])
    slurm = list(runs.values())
    alone = sum(seconds[c.name] for c in known if c.exclusive)
    return Expected(max(_spread(local, lanes), _spread(slurm, slurm_lanes)) + alone, len(known), len(cases))
