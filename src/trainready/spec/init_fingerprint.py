"""spec init's [fingerprint] table: the reference's bits, written only where at least `AGREEING` distinct devices
of one group key and battery size agree on every entry and are a strict majority of that key's devices (one
8-GPU report, or several reports of other devices).  A reference from one device would make any flipped bit it
has the standard that healthy GPUs then fail against; the same GPU in three reports is still one device (a
stuck bit repeats run after run).  Otherwise nothing is written and the notes say why."""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

from trainready.spec.model import FingerprintSpec

AGREEING = 3  # distinct identical devices: fingerprint/judge.py MIN_GROUP, the fewest whose majority names one
PASSED = ("pass", "warn")  # a WARN (drift of one device, a group too small) still holds devices that agree
UNKNOWN_ID = ("", "n/a", "unavailable")


def _device_id(rep: Mapping[str, Any], d: Mapping[str, Any]) -> str:
    """A GPU by its UUID (else board serial); a CPU rank, which has neither, by host and rank."""
    for f in ("uuid", "serial"):
        v = str(d.get(f, ""))
        if v not in UNKNOWN_ID and not v.startswith("unavailable"):
            return v
    return f"{rep.get('host', '?')}:{d.get('device', '?')}:{d.get('rank', d.get('index', '?'))}"


def _devices(reports: Sequence[Mapping[str, Any]], said: list[str]) -> dict[str, Mapping[str, Any]]:
    """Every device of every report whose `fingerprint` check passed (or warned): device id -> its record (the
    last report's where a device is in several)."""
    out: dict[str, Mapping[str, Any]] = {}
    failed = 0
    for rep in reports:
        res = next((r for r in rep.get("results", []) if r.get("name") == "fingerprint"), None)
        details = (res or {}).get("details")
        devices = details.get("devices") if isinstance(details, Mapping) else None
        if res is None or not devices:
            continue
        if res.get("status") not in PASSED:
            failed += 1
            continue
        out.update({_device_id(rep, d): d for d in devices if isinstance(d, Mapping)})
    if failed:
        said.append(f"fingerprint: {failed} record(s) whose fingerprint check failed left out of the reference")
    return out


def _signature(d: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    return tuple(sorted((e["id"], e["digest"], e["chunks"]) for e in d.get("entries", [])))


def fingerprint_spec(reports: Sequence[Mapping[str, Any]], notes: list[str], said: list[str]) -> FingerprintSpec:
    """The reference fingerprint from the largest set of agreeing distinct devices of one key and size (where it
    came from in `said`), or an empty one with the reason in `notes`."""
    if not reports:
        return FingerprintSpec()
    devices = _devices(reports, said)
    if not devices:
        notes.append("fingerprint: not written: no passed fingerprint check in the record(s)")
        return FingerprintSpec()
    groups = Counter((str(d["key_id"]), str(d["size"])) for d in devices.values())
    agree = Counter((str(d["key_id"]), str(d["size"]), _signature(d)) for d in devices.values())
    (kid, size, sig), n = max(agree.items(), key=lambda kv: (kv[1], kv[0][:2]))
    total = groups[(kid, size)]
    if n < AGREEING or 2 * n <= total:
        why = (f"{n} distinct device(s) of group key {kid} agree on every entry ({total} of that key and battery "
               f"size in the record(s)); a reference needs {AGREEING} or more identical devices that are a strict "
               "majority of their key (one 8-GPU record, or records of several machines): a flipped bit in a lone "
               "device would become the standard")
        notes.append(f"fingerprint: not written: {why}")
        return FingerprintSpec()
    d = next(x for x in devices.values() if (str(x["key_id"]), str(x["size"]), _signature(x)) == (kid, size, sig))
    said.append(f"fingerprint: the reference's bits from {n} distinct device(s) of group key {kid} that agree on "
                 f"every entry of the {size} battery")
    return FingerprintSpec(key_id=kid, size=size, key=dict(d["key"]),
                           entries={e["id"]: f"{e['digest']}:{e['chunks']}" for e in d["entries"]})
