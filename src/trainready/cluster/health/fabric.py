"""The fabric's passive half for `node --health-check`: the RDMA ports (Active, at the node's rate), their error
counters and each GPU's NVLink error counters against the last reading, the NVLinks still active, and Fabric
Manager / nvlsm running where the GPUs' NVLinks reach NVSwitches. Files, NVML and /proc only: no torch, well
under a second (docs/fabric.md). NCCL's environment is not judged here: Slurm's health check does not run with
a job's environment; the node check judges it."""

from __future__ import annotations

import dataclasses
from typing import Any

from trainready.fabric.facts import FabricFacts, Snapshot, read_facts, snapshot
from trainready.fabric.judge.findings import FAIL, WARN
from trainready.fabric.judge.verdict import findings
from trainready.fabric.nccl import NcclEnv
from trainready.fabric.services import PROCESSES
from trainready.spec.fabric import FabricSpec


def read(in_container: bool = False) -> FabricFacts:
    """This node's fabric as the health check reads it: NCCL's variables left unset."""
    return read_facts(units=tuple(PROCESSES), environ={}, in_container=in_container)


def to_state(facts: FabricFacts) -> dict[str, Any]:
    """What the next health check compares with: the counters (kept in the health state file)."""
    return dataclasses.asdict(snapshot(facts.ports, facts.gpus))


def _last(state: Any) -> Snapshot | None:
    if not isinstance(state, dict):
        return None
    try:
        return Snapshot(float(state["at"]), dict(state["ports"]), dict(state["links"]))
    except (KeyError, TypeError, ValueError):
        return None


def judge(facts: FabricFacts, state: Any, spec: FabricSpec, out: dict[str, list[str]]) -> None:
    """Add the fabric's FAILs and WARNs to the health check's findings (`out`), counters against `state`."""
    quiet = dataclasses.replace(facts, nccl=NcclEnv(None, None, None, None))
    found, _ = findings(quiet, spec, _last(state))
    out["fail"] += [f"fabric: {f.text}" for f in found.items if f.level == FAIL]
    out["warn"] += [f"fabric: {f.text}" for f in found.items if f.level == WARN]
