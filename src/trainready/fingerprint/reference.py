"""One node against the reference server's fingerprint (kept in the spec by `spec init --from-report`): a device
of the reference's group key must give the reference's bits; a device of another key is drift, not compared."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from trainready.fingerprint.judge import _first_chunk


@dataclass(frozen=True)
class RefResult:
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def reference_of(spec: Any) -> dict[str, Any] | None:
    """The spec's reference fingerprint ({key, key_id, size, entries: {id: "digest:chunks"}}), or None."""
    ref = getattr(spec, "fingerprint", None)
    return None if ref is None or not getattr(ref, "key_id", "") else {
        "key_id": ref.key_id, "key": ref.key, "size": ref.size, "entries": dict(ref.entries)}


def against_reference(spec: Any, recs: list[dict[str, Any]], who: Callable[[dict[str, Any]], str]) -> RefResult:
    """Each device of the reference's key and battery size, entry by entry, against the reference bits."""
    ref = reference_of(spec)
    if ref is None:
        return RefResult(summary={"compared": False, "why": "no reference fingerprint in the spec"})
    bad: list[str] = []
    same = [r for r in recs if r["key_id"] == ref["key_id"] and r["size"] == ref["size"]]
    for r in same:
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
    notes = [f"{len(same)} device(s) bit for bit against the reference fingerprint ({ref['key_id']})"] if same else \
        [f"no device has the reference's key {ref['key_id']} and size {ref['size']}: not compared with it "
         "(a different key is configuration drift, see `trainready compare`)"]
    return RefResult(bad, notes, {"compared": bool(same), "key_id": ref["key_id"], "devices": len(same),
                                  "differing": len(bad)})
