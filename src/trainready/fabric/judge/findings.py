"""What a fabric rule finds: one line each, FAIL, WARN or a fact said (info)."""

from __future__ import annotations

from dataclasses import dataclass, field

FAIL, WARN, INFO = "fail", "warn", "info"


@dataclass(frozen=True)
class Finding:
    level: str
    """fail, warn or info."""
    part: str
    """Which part of the fabric: nic, nccl, nvlink, nvswitch, service, gpudirect, rail, counter."""
    text: str
    """One line naming the NIC / GPU and link, what was found and what was expected (with the spec key)."""


@dataclass
class Findings:
    """The findings of one judgment, in order."""

    items: list[Finding] = field(default_factory=list)

    def fail(self, part: str, text: str) -> None:
        self.items.append(Finding(FAIL, part, text))

    def warn(self, part: str, text: str) -> None:
        self.items.append(Finding(WARN, part, text))

    def info(self, part: str, text: str) -> None:
        self.items.append(Finding(INFO, part, text))

    def of(self, level: str) -> list[Finding]:
        return [f for f in self.items if f.level == level]


def names(items: list[str], most: int = 8) -> str:
    """'mlx5_2, mlx5_3, ...' with at most `most` named."""
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")


def rise(out: Findings, part: str, what: str, start: dict[str, int], end: dict[str, int], bound: int) -> None:
    """Each counter of `what` (a NIC port or a GPU's link) that rose: WARN, past `bound` FAIL."""
    for name in sorted(end):
        if name not in start:
            continue
        d = end[name] - start[name]
        if d <= 0:
            continue
        text = f"{what}: {name} rose {start[name]} → {end[name]} (+{d})"
        if d > bound:
            out.fail(part, f"{text}, past fabric.counter_rise_max {bound}")
        else:
            out.warn(part, f"{text} (fabric.counter_rise_max {bound} not passed)")
