"""Error counters before against after the load: what fails a GPU, what warns, what is not available and why."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# Growth of any of these fails the GPU: an error the hardware could not correct, or its consequence.
FAILS: dict[str, str] = {
    "ecc_uncorrected": "volatile ECC uncorrectable errors",
    "remapped_rows_uncorrectable": "rows remapped for uncorrectable errors",
    "remap_pending": "row remap pending (needs a GPU reset)",
    "remap_failed": "row remap failed (the board needs service)",
    "retired_pages_double_bit": "pages retired for double-bit ECC errors",
    "retired_pages_pending": "page retirement pending",
}
# Growth of these warns, with its rate: corrected by the hardware (ECC, a link's retry), worth watching.
WARNS: dict[str, str] = {
    "ecc_corrected": "volatile ECC corrected errors",
    "remapped_rows_correctable": "rows remapped for correctable errors",
    "retired_pages_single_bit": "pages retired for repeated single-bit ECC errors",
    "pcie_replay": "PCIe replays",
}
NVLINK = re.compile(r"nvlink(\d+)_(crc_flit|crc_data|replay|recovery)")  # per link, warns (the link retried)
INFO = ("power_violation_s", "thermal_violation_s", "energy_j")  # recorded, judged through the samples


@dataclass(frozen=True)
class Verdict:
    """What the counters say."""

    fails: list[str] = field(default_factory=list)
    """'GPU 3: volatile ECC uncorrectable errors 0 → 2 (+2)', one per counter that grew."""
    warns: list[str] = field(default_factory=list)
    """Corrected growth, with its rate per hour."""
    rows: list[dict[str, Any]] = field(default_factory=list)
    """Every counter of every GPU: before, after, delta; or not_available with the reason."""


def _what(key: str) -> tuple[str, str] | None:
    """(severity, words) of a counter key; None for one that is only recorded."""
    if key in FAILS:
        return "fail", FAILS[key]
    if key in WARNS:
        return "warn", WARNS[key]
    m = NVLINK.fullmatch(key)
    if m:
        return "warn", f"NVLink link {m.group(1)} {m.group(2).replace('_', ' ')} errors"
    return None


def compare(names: list[str], before: dict[int, dict[str, Any]], after: dict[int, dict[str, Any]],
            xids: tuple[list[tuple[int, int, float]], dict[int, str]], seconds: float) -> Verdict:
    """`names[i]` is device i as messages call it ('GPU 3'); `xids` are the events (device, XID, seconds into the
    load) and each device's watch ('registered' or 'not available: why')."""
    v = Verdict()
    events, watch = xids
    for i, name in enumerate(names):
        b, a = before.get(i, {}), after.get(i, {})
        for key in sorted(set(b) | set(a)):
            _one(v, name, i, key, b.get(key), a.get(key), seconds)
        got = [(x, t) for d, x, t in events if d == i]
        status = watch.get(i, "not available: not watched")
        if status != "registered" and not got:
            v.rows.append({"gpu": i, "counter": "xid", "not_available": status})
        else:
            v.rows.append({"gpu": i, "counter": "xid", "before": 0, "after": len(got), "delta": len(got)})
        if got:
            first = ", ".join(f"XID {x} after {t:.0f} s" for x, t in got[:4])
            v.fails.append(f"{name}: {len(got)} critical XID event(s) during the burn-in ({first})")
    return v


def _one(v: Verdict, name: str, i: int, key: str, b: Any, a: Any, seconds: float) -> None:
    if not isinstance(b, (int, float)) or not isinstance(a, (int, float)):
        why = a if isinstance(a, str) else b if isinstance(b, str) else "not read"
        v.rows.append({"gpu": i, "counter": key, "not_available": str(why)})
        return
    d = a - b
    v.rows.append({"gpu": i, "counter": key, "before": b, "after": a, "delta": d})
    what = _what(key)
    if what is None or not d > 0:
        return
    line = f"{name}: {what[1]} {b:g} → {a:g} (+{d:g})"
    if what[0] == "fail":
        v.fails.append(line)
    else:
        v.warns.append(f"{line}, {d / max(seconds, 1e-9) * 3600:.3g}/h")


def planted(after: dict[int, dict[str, Any]], value: str | None) -> tuple[dict[int, dict[str, Any]], list[int]]:
    """Planted `burnin.counter=IDX:COUNTER`: IDX's after-reading of COUNTER is one more than its before-reading
    (a counter NVML does not give here counts from 0).  Returns (after, devices given a planted XID)."""
    if not value:
        return after, []
    idx, _, key = value.partition(":")
    i, key = int(idx), key.strip() or "ecc_uncorrected"
    if key == "xid":
        return after, [i]
    out = {k: dict(x) for k, x in after.items()}
    cur = out.setdefault(i, {}).get(key)
    out[i][key] = (cur if isinstance(cur, (int, float)) else 0) + 1
    return out, []


def planted_before(before: dict[int, dict[str, Any]], value: str | None) -> dict[int, dict[str, Any]]:
    """The before-reading the planted counter is compared against: its own value, 0 where NVML gives none."""
    if not value or value.partition(":")[2].strip() == "xid":
        return before
    idx, _, key = value.partition(":")
    i, key = int(idx), key.strip() or "ecc_uncorrected"
    out = {k: dict(x) for k, x in before.items()}
    if not isinstance(out.setdefault(i, {}).get(key), (int, float)):
        out[i][key] = 0
    return out
