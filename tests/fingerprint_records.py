"""Fingerprint records changed as a GPU computing other bits would change them, for the judge's tests."""

from __future__ import annotations

import copy


def flip_chunk(rec: dict, eid: str, chunk: int) -> dict:
    """The record with entry `eid`'s chunk `chunk` (1-based) and so its digest other bits."""
    out = copy.deepcopy(rec)
    e = next(x for x in out["entries"] if x["id"] == eid)
    e["digest"] = "f" * 64
    e["chunks"] = e["chunks"][:8 * (chunk - 1)] + "00000000" + e["chunks"][8 * chunk:]
    return out
