"""The compute fingerprint across an upgrade: the same image on the same hardware must give the same bits.

Under one group key a changed digest is a failure (nothing that should change the bits changed); under another
key (a new driver, cuBLAS, torch, settings) changed bits are expected and shown, with what in the key changed,
never judged: the version gate judges the versions themselves."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from trainready.fingerprint.key import key_diff


@dataclass(frozen=True)
class FingerprintDiff:
    same_key: bool
    key_changes: tuple[str, ...]  # 'cublas: 13.0.0 vs 13.1.0'
    changed: tuple[str, ...]  # entries (op/pattern) whose digest changed
    compared: int  # entries present on both sides
    note: str = ""  # why nothing was compared
    entries: tuple[str, ...] = field(default_factory=tuple)

    @property
    def failing(self) -> str | None:
        """The reason this fails the comparison: bits changed under the same key."""
        if self.same_key and self.changed:
            return (f"fingerprint: {len(self.changed)} of {self.compared} battery entries give other bits under the "
                    f"same group key ({', '.join(self.changed[:3])}{', …' if len(self.changed) > 3 else ''}): the "
                    "same image on the same hardware must give the same bits")
        return None

    def lines(self) -> list[str]:
        if self.note:
            return [f"fingerprint: {self.note}"]
        head = "same group key" if self.same_key else f"group key changed ({'; '.join(self.key_changes[:4])})"
        what = f"{len(self.changed)} of {self.compared} entries give other bits" if self.changed else \
            f"all {self.compared} entries bit for bit identical"
        tail = "" if self.same_key or not self.changed else " (expected with a new library or driver: not judged)"
        return [f"fingerprint: {head}: {what}{tail}"]

    def to_json(self) -> dict[str, Any]:
        return {"same_key": self.same_key, "key_changes": list(self.key_changes), "changed": list(self.changed),
                "compared": self.compared, "note": self.note}


def fingerprint_of(results: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The record's reference device fingerprint: the first device of the `fingerprint` check's largest key."""
    for r in results:
        if r.get("name") != "fingerprint" or not isinstance(r.get("details"), Mapping):
            continue
        devices = [d for d in r["details"].get("devices") or [] if isinstance(d, Mapping)]
        if devices:
            keys = [d.get("key_id") for d in devices]
            top = max(set(keys), key=keys.count)
            d = next(x for x in devices if x.get("key_id") == top)
            return {"key_id": d.get("key_id"), "key": d.get("key", {}), "size": d.get("size"),
                    "entries": {e["id"]: e["digest"] for e in d.get("entries", [])}}
    return None


def fingerprint_changes(base: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> FingerprintDiff:
    if base is None or new is None:
        side = "baseline" if base is None else "new"
        return FingerprintDiff(True, (), (), 0, note=f"the {side} record has no fingerprint: not compared")
    if base.get("size") != new.get("size"):
        return FingerprintDiff(True, (), (), 0, note=f"battery sizes differ ({base.get('size')} vs {new.get('size')})"
                               ": not compared")
    same = base.get("key_id") == new.get("key_id")
    common = sorted(set(base["entries"]) & set(new["entries"]))
    changed = tuple(e for e in common if base["entries"][e] != new["entries"][e])
    return FingerprintDiff(same, tuple(key_diff(base.get("key", {}), new.get("key", {}))), changed, len(common))
