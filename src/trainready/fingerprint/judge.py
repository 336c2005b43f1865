"""Judging fingerprints: devices of one group key must agree bit for bit.

Per key and per battery entry (op, pattern) the majority digest; a device outside it deviates, named with the
op, the pattern and the first chunk where it differs from the majority.  A group too small for a strict
majority (fewer than `MIN_GROUP` devices, or a tie) is unknown, never a failure.  The majority itself is held to
float64 (its error ratio against `numerics/opbounds.py`, identical on every device of the majority): above 1,
every device shares a wrong answer, a cause no single device explains.  A device whose repeats differ from its
own first result is intermittent.  Used within a node (`checks/fingerprint.py`) and across a fleet (`fleet.py`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from trainready.fingerprint.key import key_diff

MIN_GROUP = 3  # the fewest devices of one key whose strict majority names a deviating one


@dataclass(frozen=True)
class Deviation:
    who: str  # "GPU 3 (PCI 0000:1B:00.0, serial 1651…)", "node17 GPU 3 (serial 1651…)"
    entry: str  # "gemm-bf16/random-7"
    op: str
    shape: str
    pattern: str
    chunk: int  # 1-based
    chunks: int
    agree: int  # devices of the majority

    def line(self) -> str:
        return (f"{self.who}: {self.op} {self.shape}, pattern {self.pattern}, chunk {self.chunk} of {self.chunks} "
                f"differs from {self.agree:,} identical {'GPUs' if 'GPU' in self.who else 'devices'}")


@dataclass(frozen=True)
class Intermittent:
    who: str
    entry: str
    repeats_differing: int
    chunk: int  # 1-based

    def line(self) -> str:
        return (f"{self.who}: intermittent, {self.entry} gave other bits in {self.repeats_differing} repeat(s) "
                f"than its own first result (first at chunk {self.chunk})")


@dataclass(frozen=True)
class Shared:
    key_id: str
    entry: str
    ratio: float  # the majority's error over the float64 bound
    devices: int

    def line(self) -> str:
        if self.devices == 1:  # a device with no peer to agree with: the float64 check alone
            return (f"the one device of key {self.key_id} answers {self.entry} {self.ratio:.3g}x the float64 "
                    f"rounding bound: a wrong answer (no identical peer to compare with)")
        return (f"all {self.devices:,} devices of key {self.key_id} agree on {self.entry}, but their answer is "
                f"{self.ratio:.3g}x the float64 rounding bound: a wrong answer they share (software, library or "
                f"image: a fleet-wide cause, no single device)")


@dataclass
class Judgment:
    deviations: list[Deviation] = field(default_factory=list)
    intermittent: list[Intermittent] = field(default_factory=list)
    shared: list[Shared] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # groups or entries no majority could judge
    drift: list[str] = field(default_factory=list)  # devices whose key differs from the largest group's
    drifted: list[str] = field(default_factory=list)  # who, for each line of `drift`
    groups: dict[str, int] = field(default_factory=dict)  # key id -> devices
    mismatches: dict[str, int] = field(default_factory=dict)  # who -> entries deviating or intermittent

    @property
    def named(self) -> set[str]:
        """Devices that failed for their own reason (deviating or intermittent)."""
        return {d.who for d in self.deviations} | {i.who for i in self.intermittent}


def _first_chunk(mine: str, majority: str, width: int) -> int:
    n = len(majority) // width
    return next((i + 1 for i in range(n) if mine[i * width:(i + 1) * width] != majority[i * width:(i + 1) * width]),
                n)


def _signature(rec: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    ents = rec.get("entries", ())
    return tuple(e["id"] for e in ents), tuple(e["digest"] for e in ents)


def judge_group(kid: str, members: list[tuple[str, dict[str, Any]]], out: Judgment, width: int = 8) -> None:
    """One key's devices: majority per entry, deviations, the majority against float64, intermittent repeats.
    Devices are first grouped by their whole battery's digests (healthy ones share one), so a fleet costs one pass
    over its records and then work per distinct battery, not per device and entry."""
    sigs: dict[tuple[tuple[str, ...], tuple[str, ...]], list[tuple[str, dict[str, Any]]]] = {}
    for who, rec in members:
        sigs.setdefault(_signature(rec), []).append((who, rec))
        for e in [e for e in rec.get("entries", ()) if e.get("repeat_mismatches")]:
            out.intermittent.append(Intermittent(who, e["id"], e["repeat_mismatches"], (e["repeat_chunk"] or 0) + 1))
    counts: dict[str, Counter[str]] = {}
    for (ids, digs), mem in sigs.items():
        for eid, dig in zip(ids, digs):
            counts.setdefault(eid, Counter())[dig] += len(mem)
    n = len(members)
    for eid in sorted(counts):
        top, n_top = counts[eid].most_common(1)[0]
        have = sum(counts[eid].values())
        if n < MIN_GROUP or 2 * n_top <= have:
            if n_top < have:
                out.unknown.append(f"{eid}: {have} device(s) of key {kid} disagree and no strict majority of "
                                   f"{MIN_GROUP} or more says which is right")
            elif (one := _entry(next(iter(sigs.values()))[0][1], eid)) and one.get("ratio", 0.0) > 1.0:
                out.shared.append(Shared(kid, eid, float(one["ratio"]), n_top))  # too few to compare: float64 still
            continue
        if n_top == have:
            maj = _entry(next(iter(sigs.values()))[0][1], eid)
        else:
            maj = next(e for mem in sigs.values() for e in [_entry(mem[0][1], eid)] if e and e["digest"] == top)
        if maj.get("ratio", 0.0) > 1.0:
            out.shared.append(Shared(kid, eid, float(maj["ratio"]), n_top))
        if n_top == have:
            continue
        for (ids, digs), mem in sigs.items():
            mine = dict(zip(ids, digs)).get(eid)
            if mine is None or mine == top:
                continue
            for who, rec in mem:
                e = _entry(rec, eid)
                out.deviations.append(Deviation(who, eid, e["op"], e["shape"], e["pattern"], _first_chunk(
                    e["chunks"], maj["chunks"], width), len(maj["chunks"]) // width, n_top))


def _entry(rec: dict[str, Any], eid: str) -> dict[str, Any]:
    return next((e for e in rec.get("entries", ()) if e["id"] == eid), {})


def judge(members: list[tuple[str, dict[str, Any]]], width: int = 8) -> Judgment:
    """All devices (label, fingerprint record): grouped by key, each group judged; keys other than the largest
    group's are drift, listed with what differs."""
    out = Judgment()
    groups: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for who, rec in members:
        groups.setdefault(rec["key_id"], []).append((who, rec))
    out.groups = {k: len(v) for k, v in groups.items()}
    main = max(groups, key=lambda k: (len(groups[k]), k)) if groups else ""
    for kid, mem in groups.items():
        judge_group(kid, mem, out, width)
        if kid != main:
            main_key, this_key = (next(rec for _, rec in groups[k])["key"] for k in (main, kid))
            diff = "; ".join(key_diff(main_key, this_key)[:3])
            out.drift += [f"{who}: group key {kid} differs from {len(groups[main]):,} devices' {main} ({diff}): "
                          f"configuration drift, not compared with them" for who, _ in mem]
            out.drifted += [who for who, _ in mem]
    counts: Counter[str] = Counter(d.who for d in out.deviations)
    counts.update(i.who for i in out.intermittent)
    out.mismatches = {who: counts.get(who, 0) for who, _ in members}
    return out
