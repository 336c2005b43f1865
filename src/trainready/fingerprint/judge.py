"""Judging fingerprints: devices of one group key must agree bit for bit.

Devices are grouped by their compute key (`key.group_of`: what determines the bits); groups whose majorities are
identical entry for entry are merged and judged as one (a torch patch release that changes no bit leaves them
comparable).  Per group and per battery entry (op, pattern) the majority digest; a device outside it deviates,
named with the op, the pattern and the first chunk where it differs from the majority.  A group too small for a
strict majority (fewer than `MIN_GROUP` devices, or a tie) is unknown, said, never a failure.  The majority
itself is held to float64 (its error ratio against `numerics/opbounds.py`, identical on every device of the
majority): above 1, every device shares a wrong answer, a cause no single device explains.  A device whose
repeats differ from its own first result is intermittent.  A key other than the largest group's, and a recorded
fact (VBIOS, driver, ECC mode) other than its group's, is configuration drift.  Used within a node
(`checks/fingerprint.py`) and across a fleet (`fleet.py`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from trainready.fingerprint.key import FACTS, compute_key, facts_of, group_of, key_diff

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
    members: tuple[str, ...] = ()  # who gave the wrong answer (the fleet tells one node's from the fleet's)

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
    unknown: list[str] = field(default_factory=list)  # entries no majority could judge
    small: list[tuple[tuple[str, ...], str]] = field(default_factory=list)  # (who, line): groups below MIN_GROUP
    drift: list[str] = field(default_factory=list)  # devices whose key or recorded facts differ from their peers'
    drifted: list[str] = field(default_factory=list)  # who, for each line of `drift`
    groups: dict[str, int] = field(default_factory=dict)  # compute key id -> devices
    judged: dict[str, tuple[str, ...]] = field(default_factory=dict)  # judged group (its largest key) -> its keys
    judged_in: dict[str, str] = field(default_factory=dict)  # who -> the judged group it was judged in
    mismatches: dict[str, int] = field(default_factory=dict)  # who -> entries deviating or intermittent

    @property
    def named(self) -> set[str]:
        """Devices that failed for their own reason (deviating or intermittent)."""
        return {d.who for d in self.deviations} | {i.who for i in self.intermittent}


Member = tuple[str, dict[str, Any]]  # (who, fingerprint record)
Signature = tuple[tuple[str, ...], tuple[str, ...]]  # (entry ids, digests) of a whole battery


def _first_chunk(mine: str, majority: str, width: int) -> int:
    n = len(majority) // width
    return next((i + 1 for i in range(n) if mine[i * width:(i + 1) * width] != majority[i * width:(i + 1) * width]),
                n)


def _signature(rec: dict[str, Any]) -> Signature:
    ents = rec.get("entries", ())
    return tuple(e["id"] for e in ents), tuple(e["digest"] for e in ents)


def _by_signature(members: list[Member], known: dict[int, Signature] | None = None) -> dict[Signature, list[Member]]:
    """Devices grouped by their whole battery's digests (healthy ones share one): one pass over the records, then
    work per distinct battery, not per device and entry.  `known`: signatures already taken, by record id."""
    sigs: dict[Signature, list[Member]] = {}
    for who, rec in members:
        sig = known.get(id(rec)) if known is not None else None
        sigs.setdefault(sig if sig is not None else _signature(rec), []).append((who, rec))
    return sigs


def _counts(sigs: dict[Signature, list[Member]]) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {}
    for (ids, digs), mem in sigs.items():
        for eid, dig in zip(ids, digs):
            counts.setdefault(eid, Counter())[dig] += len(mem)
    return counts


def majority(members: list[Member], known: dict[int, Signature] | None = None) -> tuple[tuple[str, str], ...] | None:
    """Each entry's strict-majority digest, in entry order; None where any entry has none (a tie)."""
    out = []
    for eid, c in sorted(_counts(_by_signature(members, known)).items()):
        top, n_top = c.most_common(1)[0]
        if 2 * n_top <= sum(c.values()):
            return None
        out.append((eid, top))
    return tuple(out)


def judge_group(kid: str, members: list[Member], out: Judgment, width: int = 8,
                known: dict[int, Signature] | None = None) -> None:
    """One group's devices: majority per entry, deviations, the majority against float64, intermittent repeats."""
    sigs = _by_signature(members, known)
    for who, rec in members:
        for e in [e for e in rec.get("entries", ()) if e.get("repeat_mismatches")]:
            out.intermittent.append(Intermittent(who, e["id"], e["repeat_mismatches"], (e["repeat_chunk"] or 0) + 1))
    counts = _counts(sigs)
    n = len(members)
    for eid in sorted(counts):
        top, n_top = counts[eid].most_common(1)[0]
        have = sum(counts[eid].values())
        holders = tuple(w for (ids, digs), mem in sigs.items() if dict(zip(ids, digs)).get(eid) == top for w, _ in mem)
        maj = next(e for mem in sigs.values() for e in [_entry(mem[0][1], eid)] if e and e["digest"] == top)
        if n < MIN_GROUP or 2 * n_top <= have:
            if n_top < have:
                out.unknown.append(f"{eid}: {have} device(s) of key {kid} disagree and no strict majority of "
                                   f"{MIN_GROUP} or more says which is right")
            elif maj.get("ratio", 0.0) > 1.0:  # too few to compare: float64 still
                out.shared.append(Shared(kid, eid, float(maj["ratio"]), n_top, holders))
            continue
        if maj.get("ratio", 0.0) > 1.0:
            out.shared.append(Shared(kid, eid, float(maj["ratio"]), n_top, holders))
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


def merged(groups: dict[str, list[Member]], known: dict[int, Signature] | None = None) -> dict[str, list[str]]:
    """Groups whose majorities are identical entry for entry, merged: the largest key of each -> its keys."""
    if len(groups) < 2:
        return {k: [k] for k in groups}
    out: dict[str, list[str]] = {}
    by_majority: dict[tuple[tuple[str, str], ...], str] = {}
    for kid in sorted(groups, key=lambda k: (-len(groups[k]), k)):
        maj = majority(groups[kid], known)
        into = by_majority.get(maj) if maj is not None else None
        if into is None:
            out[kid] = [kid]
            if maj is not None:
                by_majority[maj] = kid
        else:
            out[into].append(kid)
    return out


def _small(kid: str, members: list[Member]) -> tuple[tuple[str, ...], str]:
    who = tuple(w for w, _ in members)
    if len(who) == 1:
        return who, (f"{who[0]}: alone in its group key {kid}: no identical device to compare its bits with "
                     "(unknown; its answers held to float64 only)")
    return who, (f"{', '.join(who)}: the only {len(who)} devices of group key {kid}: fewer than {MIN_GROUP}, no strict "
                 "majority says which bits are right (unknown; held to float64 only)")


def _facts_drift(members: list[Member], out: Judgment) -> None:
    """A recorded fact (VBIOS, driver, ECC mode) other than the group's most common: drift, its bits compared."""
    facts = {who: facts_of(rec) for who, rec in members}
    common = {f: Counter(v[f] for v in facts.values() if f in v).most_common(1)[0] for f in FACTS
              if any(f in v for v in facts.values())}
    for who, mine in facts.items():
        off = [f"{FACTS[f]} {mine[f]} vs {v} of {n:,} devices" for f, (v, n) in common.items()
               if f in mine and mine[f] != v]
        if off:
            out.drift.append(f"{who}: {'; '.join(off)} of its group: configuration drift (a recorded fact, not in the "
                             "group key: its bits are compared with theirs)")
            out.drifted.append(who)


def _key_drift(groups: dict[str, list[Member]], main: str, joined: dict[str, str], out: Judgment) -> None:
    """Devices whose compute key is not the largest group's: drift, compared where their majorities merged."""
    for kid, mem in groups.items():
        if kid == main:
            continue
        main_key, this_key = (compute_key(next(rec for _, rec in groups[k])["key"]) for k in (main, kid))
        diff = "; ".join(key_diff(main_key, this_key)[:3])
        how = ("its bits identical to theirs: compared with them" if joined[kid] == joined[main]
               else "not compared with them")
        out.drift += [f"{who}: group key {kid} differs from {len(groups[main]):,} devices' {main} ({diff}): "
                      f"configuration drift, {how}" for who, _ in mem]
        out.drifted += [who for who, _ in mem]


def judge(members: list[Member], width: int = 8) -> Judgment:
    """All devices (label, fingerprint record): grouped by compute key, groups of identical majorities merged,
    each judged; keys other than the largest group's and recorded facts other than the group's are drift."""
    out = Judgment()
    groups: dict[str, list[Member]] = {}
    for who, rec in members:
        groups.setdefault(group_of(rec), []).append((who, rec))
    out.groups = {k: len(v) for k, v in groups.items()}
    main = max(groups, key=lambda k: (len(groups[k]), k)) if groups else ""
    known = {id(rec): _signature(rec) for _, rec in members}  # each battery's signature taken once
    joined: dict[str, str] = {}
    for head, kids in merged(groups, known).items():
        out.judged[head] = tuple(kids)
        mem = [m for k in kids for m in groups[k]]
        joined.update({k: head for k in kids})
        out.judged_in.update({who: head for who, _ in mem})
        judge_group(head, mem, out, width, known)
        if len(mem) < MIN_GROUP:
            out.small.append(_small(head, mem))
        _facts_drift(mem, out)
    _key_drift(groups, main, joined, out)
    counts: Counter[str] = Counter(d.who for d in out.deviations)
    counts.update(i.who for i in out.intermittent)
    out.mismatches = {who: counts.get(who, 0) for who, _ in members}
    return out
