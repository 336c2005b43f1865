"""The fabric: do the GPUs reach each other and the other servers at full width? (docs/fabric.md)

Inside the server: each GPU's NVLinks (active, generation, what they reach, error counters), its registration
with the NVSwitch fabric, Fabric Manager and the NVLink Subnet Manager. Towards the others: every compute NIC's
port Active at its rate (sysfs, the kernel's Documentation/ABI/stable/sysfs-class-infiniband), NCCL told to use
them all (NCCL_IB_HCA as NCCL parses it), GPUDirect RDMA's prerequisites, each GPU's rail. It reads files and
NVML only (well under 1 s), so it runs at every level; the error counters are read when the run starts
(`begin`) and compared when the check runs, after the collectives.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from trainready.fabric.facts import FabricFacts, Snapshot, read_counters, read_facts, snapshot
from trainready.fabric.judge.verdict import judge
from trainready.fabric.planted import apply, rise
from trainready.records import Level, Outcome
from trainready.suite.base import Check, CheckContext, register

_START: dict[int, Snapshot] = {}  # id(ctx) → the counters read at the run's start (begin)
_LOCK = threading.Lock()


def _replay(ctx: CheckContext) -> Path | None:
    value = ctx.fault("fabric.replay")
    return Path(value) if value else None


def _facts(ctx: CheckContext) -> FabricFacts:
    from trainready.fabric.services import PROCESSES
    from trainready.manifest.container import hints

    units = tuple(dict.fromkeys((*PROCESSES, *ctx.spec.fabric.services)))
    return read_facts(units=units, in_container=bool(hints()), replay=_replay(ctx))


@register
class FabricCheck(Check):
    name = "fabric"
    title = "Fabric: NVLink and NVSwitch, the RDMA NICs at their rate, NCCL told to use them all, the rails"
    level = Level.LIGHT
    order = 38  # after the collectives (allreduce 30, comm 35): the counters span them
    timeout_s = 30.0

    @classmethod
    def begin(cls, ctx: CheckContext) -> None:
        try:
            replay = _replay(ctx)
            start = (snapshot(*_replayed(replay)) if replay else read_counters())
        except Exception:  # noqa: BLE001 - without a start reading the check says its counters were read once
            return
        with _LOCK:
            _START[id(ctx)] = start

    def run(self, ctx: CheckContext) -> Outcome:
        with _LOCK:
            start = _START.pop(id(ctx), None)
        facts = _facts(ctx)
        if start is None:  # run alone (not through the runner): the window is the check itself
            start = snapshot(facts.ports, facts.gpus)
            facts = _facts(ctx)
        facts = apply(facts, ctx)
        bound = ctx.spec.fabric.counter_rise_max
        return judge(facts, ctx.spec.fabric, start, rise(snapshot(facts.ports, facts.gpus), ctx, bound))


def _replayed(replay: Path) -> tuple[tuple, tuple]:
    facts = read_facts(replay=replay, environ=dict(os.environ))
    return facts.ports, facts.gpus
