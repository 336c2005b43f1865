"""Floors from several measurements of the reference: a robust low figure, the spread, a margin.

One measurement cannot tell a floor from noise: a gloo busbw floor taken from one run failed
the very machine that wrote it 1 time in 3.  So `spec init` takes each figure from k runs
(`--measure --repeat k` and/or several `--from-report` records) and writes

    low      = the 10th percentile of the k figures (nearest rank; the minimum for k < 10):
               robust to one lucky run, unlike the mean or the best;
    spread   = sample standard deviation / mean of the k figures (run-to-run, coefficient of variation);
    fraction = 1 - max(MIN_MARGIN[backend], SPREAD_Z x spread), never below MIN_FRACTION;
    floor    = fraction x low.

`low` already sits about one standard deviation below the mean for k = 5 (the expected minimum of
5 normal draws is mean - 1.16 sd), so SPREAD_Z = 2 puts the floor about 3 sd below the mean:
about 1 false alarm in 700 judgements if run-to-run figures are normal.  The minimum margins are
what a node still varies by later (MIN_MARGIN): NCCL is timed with CUDA events on links no other
process shares, so 5% (an assumption until H200 repeats are recorded: `spec init --measure --repeat 5`
prints and writes each figure's spread); gloo shares the CPU with everything else on the host, whose
load drifts over minutes, so 25% for its absolute figures and 8% for its collective efficiency,
which that drift cancels (EFFICIENCY_MIN_MARGIN).

With one figure (`spec init --from-report` on one record) the spread is unknown and that figure is not a low
one: it sits anywhere in its own spread.  So a one-run floor allows the backend's minimum margin twice (once
for the later drift, once for where this run sat), and never more than the caller's `tolerance` (the 80%
rule): fraction = min(tolerance, max(MIN_FRACTION, 1 - ONE_RUN_MARGINS x minimum margin)).  NCCL keeps the
80% rule (0.8 < 0.9); gloo's absolute busbw gets 0.5, which catches a collective at half speed, not 20%
(its collective efficiency, 0.8 from one run, catches 25% and more).  Measured on a 2-core x86 VM: with the
80% rule a spec from one gloo record failed 3 of 7 later runs (a sendrecv at 0.69 of its one-run figure);
floors from `--measure --repeat 5` catch 20%, and spec init says so on every floor that cannot.

A floor that cannot catch a collective 20% slower than the reference's median (floor above
median / 1.2 fails it) is written anyway, with a note saying what it can catch.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

LOW_PERCENTILE = 10  # nearest-rank percentile of the k figures taken as "low"
SPREAD_Z = 2.0  # margin = SPREAD_Z x run-to-run coefficient of variation (see the module doc)
# Fraction below `low` a quiet node of that backend still reaches, later.  NCCL: CUDA-event timing on links no
# other process shares.  gloo: its busbw follows the host's load, which the back-to-back reference runs do not
# sample: on a shared 2-core x86 VM the same sweep ran 20-25% slower ten minutes later (seen twice), so an
# absolute gloo floor allows 25% and a slow gloo collective is left to the efficiency floor below.
MIN_MARGIN = {"nccl": 0.05, "gloo": 0.25}
# The same for collective efficiency (busbw / same-run ring send/recv busbw, comm/evaluate.row_efficiency):
# host load slows both terms alike, so no drift allowance; gloo's ratio varied 2-6% run to run on a 2-core x86 VM.
EFFICIENCY_MIN_MARGIN = {"nccl": 0.05, "gloo": 0.08}
DEFAULT_MARGIN = 0.10  # backends not in MIN_MARGIN (compute figures use the caller's tolerance instead)
MIN_FRACTION = 0.5  # below this the floor judges nothing useful: the spread is the finding
ONE_RUN_MARGINS = 2  # one run: the minimum margin twice, the drift plus the unknown spread (module doc)
SLOW_PROBE = 1.2  # the slowdown a floor is expected to catch (a collective 20% slower)


@dataclass(frozen=True)
class Floor:
    """One figure's floor and how it was derived (all figures in the figure's own unit)."""

    key: str  # e.g. 'all_reduce@8' or 'gemm_tflops_min'
    values: tuple[float, ...]  # one per run, in run order
    low: float
    median: float
    spread: float | None  # sample sd / mean over the runs; None with one run
    fraction: float  # floor = fraction x low
    unit: str
    rule: str = ""  # what set the fraction, for people ('' = the spread or the backend's minimum margin)

    @property
    def floor(self) -> float:
        return self.fraction * self.low

    @property
    def catches_slowdown(self) -> bool:
        """Whether a run SLOW_PROBE x slower than the reference's median falls below this floor."""
        return self.floor > self.median / SLOW_PROBE

    def describe(self) -> str:
        runs = len(self.values)
        span = f"{_g(min(self.values))}..{_g(max(self.values))}" if runs > 1 else _g(self.values[0])
        spread = f"spread {self.spread:.1%}" if self.spread is not None else "spread unknown (1 run)"
        text = (f"{self.key}: {runs} run(s) {span} {self.unit} (median {_g(self.median)}, {spread}); "
                f"floor = {self.fraction:g} x low {_g(self.low)} = {_g(self.floor)} {self.unit}")
        if not self.catches_slowdown:
            text += (f"; cannot catch a {SLOW_PROBE - 1:.0%} slowdown (floor is {self.floor / self.median:.0%} of "
                     f"the median; set by the {self._why()})")
        return text

    def _why(self) -> str:
        """What set the fraction, for people."""
        if self.rule:
            return self.rule
        # the fraction is rounded to 3 decimals (comm_fraction): compare at that precision
        if SPREAD_Z * self.spread >= 1 - self.fraction - 5e-4:
            return "run-to-run spread"
        return f"backend's minimum margin, {1 - self.fraction:.0%} (what a quiet node of that backend still varies by later)"


def _g(x: float) -> str:
    return f"{x:.4g}"


def low_percentile(values: list[float], pct: float = LOW_PERCENTILE) -> float:
    """Nearest-rank percentile: the ceil(pct/100 x k)-th smallest (the minimum for k < 100/pct)."""
    xs = sorted(values)
    return xs[max(0, math.ceil(pct / 100 * len(xs)) - 1)]


def spread(values: list[float]) -> float | None:
    """Run-to-run coefficient of variation (sample sd / mean); None for fewer than 2 runs."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else None


def comm_fraction(cv: float | None, backend: str, tolerance: float,
                  margins: dict[str, float] = MIN_MARGIN) -> float:
    """1 - max(minimum margin of the backend, SPREAD_Z x cv), clamped to [MIN_FRACTION, 1 - margin];
    with an unknown spread (one run) min(tolerance, 1 - ONE_RUN_MARGINS x minimum margin), at least
    MIN_FRACTION unless the tolerance asks for less."""
    least = margins.get(backend, DEFAULT_MARGIN)
    if cv is None:
        return round(min(tolerance, max(MIN_FRACTION, 1.0 - ONE_RUN_MARGINS * least)), 3)
    return round(max(MIN_FRACTION, 1.0 - max(least, SPREAD_Z * cv)), 3)


def comm_floor(key: str, values: list[float], backend: str, tolerance: float, unit: str = "GB/s",
               margins: dict[str, float] = MIN_MARGIN) -> Floor:
    cv = spread(values)
    fraction = comm_fraction(cv, backend, tolerance, margins)
    rule = ""
    if cv is None:  # one run: say which bound set it and how to get a floor that catches more
        rule = ("tolerance (one run: the spread is unknown)" if fraction >= tolerance else
                f"backend's minimum margin twice (one run of {backend}: the spread is unknown; "
                "`spec init --measure --repeat 5` measures it)")
    return Floor(key, tuple(values), low_percentile(values), statistics.median(values), cv, fraction, unit, rule)


def compute_floor(key: str, values: list[float], tolerance: float, unit: str) -> Floor:
    """GEMM/HBM: the 80% rule (tolerance) below the low figure; the spread is recorded, not applied
    (a GPU's own run-to-run spread is ~1%, far inside the 20% the rule leaves)."""
    return Floor(key, tuple(values), low_percentile(values), statistics.median(values), spread(values),
                 tolerance, unit, rule="tolerance (--tolerance, the 80% rule)")
