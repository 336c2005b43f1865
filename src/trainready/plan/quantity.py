"""One planned number with its unit, the formula that produced it and its source.

The table, `--explain` and the JSON are all rendered from these records, so the
explanation can never drift from the arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GB = 1e9  # decimal gigabyte, as the ZeRO paper and storage vendors use
GIB = 2**30  # binary gibibyte, as NVML/nvidia-smi and torch.cuda report memory
TB = 1e12


@dataclass(frozen=True)
class Quantity:
    key: str  # stable machine name, e.g. "memory.optimizer"
    label: str  # what a person reads in the table
    value: float
    unit: str  # "B", "s", "FLOP", "1", "GPU-h", ...
    formula: str = ""  # the expression with the symbols of `source`
    source: str = ""  # paper/doc/section, or "assumption: ..." when it is ours

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "value": self.value, "unit": self.unit,
                "formula": self.formula, "source": self.source}


def percent(fraction: float) -> str:
    """A fraction as a percentage with two decimals, e.g. 0.0754 → '7.54%', -47.9 → '-4,790.00%'."""
    return f"{fraction:,.2%}"


def human(q: Quantity) -> str:
    """Readable value: bytes in GiB (and GB), seconds in s/min/h, big counts with SI prefixes."""
    v = q.value
    if q.unit == "B":
        if abs(v) >= 0.5 * TB:
            return f"{v / TB:,.2f} TB ({v / GIB:,.0f} GiB)"
        if abs(v) >= 2**20:
            return f"{v / GIB:,.2f} GiB ({v / GB:,.2f} GB)"
        return f"{v:,.0f} B"
    if q.unit == "s":
        if v >= 2 * 86400:
            return f"{v / 86400:,.1f} days ({v / 3600:,.0f} h)"
        if v >= 2 * 3600:
            return f"{v / 3600:,.1f} h"
        return f"{v / 60:,.1f} min" if v >= 120 else f"{v:,.1f} s"
    if q.unit == "1":  # fractions (headroom, time lost) always as a percentage: one format, also below -100 %
        return percent(v)
    if q.unit == "params":
        for p, s in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
            if abs(v) >= p:
                return f"{v / p:,.3f} {s} ({v:,.0f})"
        return f"{v:,.0f}"
    if q.unit in ("FLOP", "tokens"):
        for p, s in ((1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
            if abs(v) >= p:
                return f"{v / p:,.3f} {s}{q.unit}"
        return f"{v:,.0f} {q.unit}"
    if q.unit == "GPU-h":
        return f"{v:,.0f} GPU-h"
    return f"{v:,.4g} {q.unit}"
