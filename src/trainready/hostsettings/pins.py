"""The [host] section's rules: which host settings (manifest/hostset.py) must match the reference node, and pins
that hold a setting to a comparison ("ulimit.memlock" = "unlimited", "shm.size_gib" = ">= 1").

A key may be a pattern (fnmatch: "ib.*" is every InfiniBand port's state, rate and MTU).  Keys outside the
`match` set are shown where they differ, never judged.  Pins: "OP VALUE" with OP one of >=, <=, >, <, ==, !=
("==" when none is written); VALUE a number, "unlimited" (above every number) or text (== and != only).
A setting that could not be read ("unavailable: ...") misses every pin.
"""

from __future__ import annotations

import difflib
import fnmatch
import math
import operator
import re
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol

from trainready.errors import ConfigError


class HostSection(Protocol):
    """The spec's [host] section (spec/model.py HostSpec) as this package reads it: host settings sit below the
    spec in the layers (the spec's defaults come from here), so they name its fields, never its class."""

    @property
    def match(self) -> tuple[str, ...]: ...
    @property
    def pins(self) -> Mapping[str, str | int | float]: ...
    @property
    def pcie_min_fraction(self) -> float | None: ...
    @property
    def pcie_spread_max(self) -> float | None: ...


class WithHost(Protocol):
    """A node spec, as far as host settings go: its [host] section."""

    @property
    def host(self) -> HostSection: ...

# The default set of keys that must match the reference, each with why a difference matters.
MATCH_REASONS: dict[str, str] = {
    "net.core.rmem_max": "caps every socket's receive buffer: NCCL's socket transport, gloo and storage clients get less",
    "net.core.wmem_max": "caps every socket's send buffer (as rmem_max, sending)",
    "net.ipv4.tcp_rmem": "TCP's receive autotuning range (tcp(7)): a smaller max moves less per round trip",
    "net.ipv4.tcp_wmem": "TCP's send autotuning range (tcp(7))",
    "ulimit.memlock": "RDMA registers (pins) memory within this limit; NCCL's docs ask for memlock unlimited",
    "kernel.numa_balancing": "page migration under a running job: a node with it on stalls where the others do not",
    "thp.enabled": "transparent hugepages: page faults and memory use differ from the other nodes'",
    "thp.defrag": "hugepage compaction stalls allocations on a node that defragments synchronously",
    "cpu.governor": "host-side work (data loading, kernel launches) runs at another CPU clock",
    "gpu.persistence_mode": "without it the driver tears the GPUs down between jobs and each job pays their start-up",
    "gpu.ecc_mode": "ECC off changes the memory's capacity and leaves its errors undetected",
    "gpu.mig_mode": "MIG on splits every GPU: a job sees other devices than on the other nodes",
    "gpu.compute_mode": "exclusive or prohibited compute modes refuse a second process or any context",
    "gpu.power_limit_w": "a lower power cap clocks the GPUs down under load",
    "gpu.app_clock_sm_mhz": "lower application clocks run every kernel slower",
    "gpu.app_clock_mem_mhz": "lower memory application clocks slow every memory-bound kernel",
    "ib.*": "a port down, at a lower rate or with another MTU slows or breaks the fabric's collectives",
}
DEFAULT_MATCH: tuple[str, ...] = tuple(MATCH_REASONS)
# Read but not in the default set: /dev/shm's default size is half the RAM, which differs by MiB between boards
# of one model (firmware reservations), and the cross-node step judges ulimit -n against fleet.nofile_min.
SHOWN_ONLY = ("shm.size_gib", "ulimit.nofile")
IB_KEY = re.compile(r"ib\.[^./]+/[^.]+\.(state|rate|mtu)")

OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq, "!=": operator.ne}
_PIN = re.compile(r"\s*(>=|<=|==|!=|>|<)?\s*(.*?)\s*")


def known_keys() -> tuple[str, ...]:
    """Every fixed key the probe writes (ib.* keys depend on the node's devices)."""
    from trainready.manifest.gpumodes import READERS
    from trainready.manifest.hostset import SYSCTLS, THP

    return (*SYSCTLS, "ulimit.memlock", "ulimit.nofile", "shm.size_gib", *(f"thp.{t}" for t in THP),
            "cpu.governor", *READERS)


def number(text: str) -> float | None:
    """'212992' → 212992.0; 'unlimited' → inf; anything else (text, a triple, unavailable) → None."""
    if text.strip() == "unlimited":
        return math.inf
    try:
        return float(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class Pin:
    """One pinned comparison: a node's value `op` `value`."""

    key: str  # the setting's key or pattern, as the spec writes it
    op: str  # one of OPS
    value: str  # as written ("unlimited", "16777216", "performance")

    def holds(self, node_value: str) -> bool:
        want, have = number(self.value), number(node_value)
        if want is not None and have is not None:
            return OPS[self.op](have, want)
        if self.op in ("==", "!="):
            return (node_value.strip() == self.value) == (self.op == "==")
        return False  # an ordering against text, or an unreadable setting: missed

    def describe(self) -> str:
        return f"{self.key} {self.op} {self.value}"


def parse(key: str, text: str | int | float) -> Pin:
    """'>= 16777216' → Pin(key, '>=', '16777216'); a bare value → '=='; ValueError naming what is wrong."""
    m = _PIN.fullmatch(str(text))
    op, value = (m.group(1) or "==", m.group(2)) if m else ("==", "")
    if not value:
        raise ValueError(f"expected 'OP VALUE' (OP one of {', '.join(OPS)}), got {text!r}")
    if op not in ("==", "!=") and number(value) is None:
        raise ValueError(f"{op} needs a number or 'unlimited', got {value!r}")
    return Pin(key, op, value)


def pins(spec: WithHost) -> list[Pin]:
    return [parse(k, v) for k, v in spec.host.pins.items()]


def matches(key: str, patterns: tuple[str, ...] | list[str]) -> bool:
    return any(fnmatch.fnmatchcase(key, p) for p in patterns)


def applies(pin: Pin, settings: Mapping[str, str]) -> list[str]:
    """The node's keys a pin covers (a pattern may cover several; a missing key is its own key)."""
    keys = [k for k in settings if fnmatch.fnmatchcase(k, pin.key)]
    return keys or ([] if any(c in pin.key for c in "*?[") else [pin.key])


def _check_key(path: str, where: str, key: str) -> None:
    known = known_keys()
    if IB_KEY.fullmatch(key) or (key.startswith("ib.") and any(c in key for c in "*?[")) or \
            any(fnmatch.fnmatchcase(k, key) for k in known):
        return
    near = difflib.get_close_matches(key, known, n=1)
    raise ConfigError(path, where, f"unknown host setting '{key}'" + (f" (did you mean '{near[0]}'?)" if near else "")
                      + f"; known: {', '.join(known)}, ib.DEVICE/PORT.state|rate|mtu")


def validate(spec: WithHost, path: str) -> None:
    """[host]: every key known (or a pattern that covers one), every pin parses, fractions in range."""
    h = spec.host
    for i, key in enumerate(h.match):
        _check_key(path, f"host.match[{i}]", key)
    for key, text in h.pins.items():
        _check_key(path, f"host.pins.{key}", key)
        try:
            parse(key, text)
        except ValueError as exc:
            raise ConfigError(path, f"host.pins.{key}", str(exc)) from None
    if h.pcie_min_fraction is not None and not 0 < h.pcie_min_fraction <= 1:
        raise ConfigError(path, "host.pcie_min_fraction", "expected a fraction 0 < x <= 1")
    if h.pcie_spread_max is not None and not 0 <= h.pcie_spread_max < 1:
        raise ConfigError(path, "host.pcie_spread_max", "expected a fraction 0 <= x < 1")
