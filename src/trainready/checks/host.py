"""Host settings on this one node: the known-bad values (hostsettings/rules.py, each with its public source)
and the spec's pins (`host.pins`).  Comparing the settings with the other nodes' is the fleet's job
(hostsettings/drift.py); here every setting read is recorded in the result's details, with where it came from.
"""

from __future__ import annotations

from trainready.hostsettings import pins as hostpins
from trainready.hostsettings.rules import known_bad
from trainready.manifest import is_unavailable
from trainready.records import Level, Outcome, Status
from trainready.suite.base import Check, CheckContext, register


def judge(settings: dict[str, dict[str, object]], pins: list[hostpins.Pin]) -> Outcome:
    """Pure: the settings as manifest/hostset.py reads them, and the spec's pins, to one outcome."""
    text = {k: str(v.get("value")) for k, v in settings.items()}
    bad = known_bad(text)
    fails = [f"{b.text} ({b.source})" for b in bad if b.fatal]
    warns = [f"{b.text} ({b.source})" for b in bad if not b.fatal]
    for p in pins:
        for key in hostpins.applies(p, text):
            value = text.get(key, "(not read)")
            if not p.holds(value):
                fails.append(f"{key} {value} misses the spec pin {p.op} {p.value} (host.pins.{p.key})")
    unread = sorted(k for k, v in text.items() if is_unavailable(v))
    summary = f"{len(text) - len(unread)} host setting(s) read, {len(unread)} unavailable"
    details = {"settings": settings, "pins": [p.describe() for p in pins]}
    if fails:
        return Outcome(Status.FAIL, "; ".join(fails), details=details,
                       remedy="Set memlock unlimited for RDMA (limits.conf and slurmd's LimitMEMLOCK), size /dev/shm "
                       "(or the container's --shm-size) as NCCL's docs say, or correct the pin in the spec.")
    if warns:
        return Outcome(Status.WARN, f"{summary}; " + "; ".join(warns), details=details)
    pinned = f"; {len(pins)} pin(s) held" if pins else ""
    return Outcome(Status.PASS, f"{summary}; no known-bad value{pinned}", details=details)


@register
class HostSettingsCheck(Check):
    name = "host"
    title = "Host settings: known-bad values (memlock with RDMA, /dev/shm for NCCL) and the spec's pins"
    level = Level.QUICK
    order = 16
    timeout_s = 30.0

    def run(self, ctx: CheckContext) -> Outcome:
        from trainready.manifest.hostset import collect

        return judge(collect(), hostpins.pins(ctx.spec))
