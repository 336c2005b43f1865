"""One node against the reference server's fingerprint (kept in the spec by `spec init --from-report`): a device
of the reference's compute key (`key.group_of`: its VBIOS, driver and ECC mode are recorded facts, not in it)
and battery size must give the reference's bits.  A reference of another battery version is not compared, said
as a warning ("not compared: battery 1 vs 2": run `spec init` again with this battery); a device of another
compute key is drift, not compared, said as a warning; one of another battery size (another `--level`) is not
compared, said in the notes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from trainready.fingerprint.judge import _first_chunk
from trainready.fingerprint.key import battery_of, compute_key, group_of, key_diff, key_id


@dataclass(frozen=True)
class RefResult:
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # devices of the node the reference could not be compared with
    notes: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def reference_of(spec: Any) -> dict[str, Any] | None:
    """The spec's reference fingerprint ({key, key_id, size, entries: {id: "digest:chunks"}}), or None."""
    ref = getattr(spec, "fingerprint", None)
    return None if ref is None or not getattr(ref, "key_id", "") else {
        "key_id": ref.key_id, "key": ref.key, "size": ref.size, "entries": dict(ref.entries)}


def _differs(r: dict[str, Any], ref: dict[str, Any], who: Callable[[dict[str, Any]], str]) -> list[str]:
    bad = []
    for e in r["entries"]:
        want = ref["entries"].get(e["id"])
        if want is None:
            continue
        digest, _, chunks = want.partition(":")
        if e["digest"] != digest:
            where = (f"chunk {_first_chunk(e['chunks'], chunks, 8)} of {len(chunks) // 8}" if e["chunks"] != chunks
                     else "its digest (the reference's chunks alike)")
            bad.append(f"{who(r)}: {e['op']} {e['shape']}, pattern {e['pattern']}, {where} differs from the "
                       "reference server's")
    return bad


def _not_compared(ref: dict[str, Any], recs: list[dict[str, Any]], group: str) -> tuple[list[str], list[str]]:
    """(warnings, notes) for the devices not compared with the reference: another battery, key or size."""
    warnings, notes = [], []
    versions = sorted({battery_of(r["key"]) for r in recs} - {battery_of(ref["key"])})
    if versions:
        warnings.append(f"reference fingerprint not compared: battery {battery_of(ref['key'])} vs "
                        f"{', '.join(versions)} (the spec's reference was written by another version of the battery: "
                        "run `spec init --from-report` again on the reference server)")
    other = [r for r in recs if battery_of(r["key"]) == battery_of(ref["key"]) and group_of(r) != group]
    if other:
        diff = "; ".join(key_diff(compute_key(ref["key"]), compute_key(other[0]["key"]))[:3])
        warnings.append(f"reference fingerprint not compared on {len(other)} device(s): group key {group_of(other[0])} "
                        f"differs from the reference's {group} ({diff}): configuration drift")
    sized = [r for r in recs if group_of(r) == group and r["size"] != ref["size"]]
    if sized:
        notes.append(f"{len(sized)} device(s) ran the {sized[0]['size']} battery, the reference the {ref['size']}: "
                     "not compared with it")
    return warnings, notes


def against_reference(spec: Any, recs: list[dict[str, Any]], who: Callable[[dict[str, Any]], str]) -> RefResult:
    """Each device of the reference's compute key and battery size, entry by entry, against the reference bits."""
    ref = reference_of(spec)
    if ref is None:
        return RefResult(summary={"compared": False, "why": "no reference fingerprint in the spec"})
    group = key_id(compute_key(ref["key"]))
    same = [r for r in recs if group_of(r) == group and r["size"] == ref["size"]]
    bad = [line for r in same for line in _differs(r, ref, who)]
    warnings, notes = _not_compared(ref, recs, group)
    if same:
        notes.insert(0, f"{len(same)} device(s) bit for bit against the reference fingerprint ({group})")
    return RefResult(bad, warnings, notes, {"compared": bool(same), "key_id": group, "devices": len(same),
                                            "differing": len(bad)})
