"""The fingerprint battery over the burn-in's windows: faults that appear only when a GPU is hot.

Each window every rank runs the battery once (load.py); per window and entry, the strict majority of the ranks
(3 or more: fingerprint/judge.py's rule) is the expected digest, and each device's mismatch count for that window
is the entries it differs in.  With fewer than 3 ranks a device is held to its own first window instead (hot
against cold).  One device's count above zero fails the burn-in, naming the device, the window and an entry."""

from __future__ import annotations

from collections import Counter
from typing import Any

from trainready.fingerprint.judge import MIN_GROUP
from trainready.records import Metric, Threshold

ZERO = Threshold("==", 0.0, "entries", "identical devices compute identical bits, hot or cold (cuBLAS "
                 "reproducibility)")


def mismatches(prints: dict[int, list[dict[str, Any]]]) -> dict[int, list[tuple[int, list[str]]]]:
    """rank -> [(window, entries it differs in)] for every window it ran the battery in."""
    out: dict[int, list[tuple[int, list[str]]]] = {r: [] for r in prints}
    windows = sorted({x["window"] for lines in prints.values() for x in lines})
    first = {r: lines[0]["fp"] for r, lines in prints.items() if lines}
    for w in windows:
        here = {r: x["fp"] for r, lines in prints.items() for x in lines if x["window"] == w}
        peers = len(here) >= MIN_GROUP
        for r, fp in here.items():
            if peers:
                want = {e: Counter(p.get(e) for p in here.values()).most_common(1)[0] for e in fp}
                off = [e for e, (d, n) in want.items() if 2 * n > len(here) and fp[e] != d]
            else:
                off = [e for e in fp if first.get(r, {}).get(e, fp[e]) != fp[e]]
            out[r].append((w, sorted(off)))
    return out


def judge_prints(prints: dict[int, list[dict[str, Any]]], names: list[str], start: float
                 ) -> tuple[list[str], list[Metric], dict[str, Any]]:
    """(fail lines, per device and window `burnin_fingerprint_mismatches`, the record's detail)."""
    per = mismatches(prints)
    when = {(r, x["window"]): x["t"] - start for r, lines in prints.items() for x in lines}
    against = "its peers' majority" if len([r for r in prints if prints[r]]) >= MIN_GROUP else "its own first window"
    fails, metrics = [], []
    for r, rows in sorted(per.items()):
        for w, off in rows:
            metrics.append(Metric.of("burnin_fingerprint_mismatches", len(off), "entries", ZERO, device=names[r],
                                     window=w))
        bad = [(w, off) for w, off in rows if off]
        if bad:
            w, off = bad[0]
            fails.append(f"{names[r]}: fingerprint differs from {against} in {len(bad)} of {len(rows)} window(s), "
                         f"first window {w} ({when.get((r, w), 0):.0f} s in): {len(off)} entr(ies), e.g. {off[0]}")
    detail = {names[r]: [len(off) for _, off in rows] for r, rows in sorted(per.items())}
    return fails, metrics, detail
