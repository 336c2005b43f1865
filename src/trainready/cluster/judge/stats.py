"""Robust statistics over nodes: median, MAD, and the slow-outlier rule of the fleet verdict.

A GPU (or node, for a per-node figure) is slow when its throughput is below BOTH
  * the fleet floor  slow_fraction x median  (spec fleet.slow_fraction), and
  * the robust bound  median - k x 1.4826 x MAD  (spec fleet.outlier_k).
1.4826 = 1 / Φ⁻¹(0.75) makes the MAD a consistent estimator of σ for normal data (Rousseeuw & Croux 1993);
k = 3 is the "very conservative" cut-off of Leys et al. 2013 (J. Exp. Soc. Psychol. 49:764-766).
Requiring both means a tight fleet (MAD near 0) never flags a GPU 1% off the median, and a noisy fleet
never flags one that is within its own spread.  Fewer than MIN_VALUES figures: no robust bound, so nothing
is called slow (a median of two says nothing about which one is off).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

MAD_TO_SIGMA = 1.4826
MIN_VALUES = 3


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    if n == 0:
        return float("nan")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


@dataclass(frozen=True)
class RobustBound:
    metric: str
    unit: str
    n: int
    median: float
    mad: float
    floor: float  # slow_fraction x median
    bound: float  # median - k x 1.4826 x MAD
    slow_fraction: float
    k: float

    @property
    def judged(self) -> bool:
        return self.n >= MIN_VALUES

    @property
    def flags_nothing(self) -> str:
        """Why no figure can be called slow although the rule is judged, else '': a throughput figure is > 0, so a
        bound at or below 0 is one no figure crosses (a large fleet.outlier_k, or a MAD as wide as the median)."""
        if not self.judged or self.bound > 0:
            return ""
        return (f"robust bound {self.bound:.4g} <= 0 (median - {self.k:g} x 1.4826 x MAD {self.mad:.3g}): no "
                f"{self.metric} figure is below it, so none is called slow")

    def slow(self, value: float) -> bool:
        return self.judged and value < self.floor and value < self.bound

    def why(self, value: float) -> str:
        return (f"{self.metric} {value:.4g} {self.unit} < {self.slow_fraction:g} x fleet median {self.median:.4g} "
                f"and < median - {self.k:g} x 1.4826 x MAD = {self.bound:.4g}")

    def to_json(self) -> dict[str, object]:
        return {"metric": self.metric, "unit": self.unit, "n": self.n, "median": self.median, "mad": self.mad,
                "floor": self.floor, "robust_bound": self.bound, "slow_fraction": self.slow_fraction, "k": self.k,
                "judged": self.judged, "flags_nothing": self.flags_nothing,
                "rule": "slow if below both slow_fraction x median and median - k x 1.4826 x MAD (Leys et al. 2013)"}


def robust_bound(metric: str, unit: str, values: Sequence[float], slow_fraction: float, k: float) -> RobustBound:
    med = median(values)
    mad = median([abs(v - med) for v in values])
    return RobustBound(metric, unit, len(values), med, mad, slow_fraction * med, med - k * MAD_TO_SIGMA * mad,
                       slow_fraction, k)
