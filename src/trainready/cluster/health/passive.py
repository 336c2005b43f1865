"""`trainready node --health-check`: the passive half of node health, for Slurm's HealthCheckProgram.

Slurm runs the program on every node each HealthCheckInterval and kills it after 60 s (slurm.conf(5)); NHC's
checks take about a second.  This mode reads NVML and the kernel log only (`manifest/gpuhealth.py`): no torch,
no CUDA context, no GPU work, so a busy node is read, never disturbed.  It judges

* the GPUs: NVML usable, their count (the spec's `gpu.count` with --spec, else the last reading's), each one
  answering; uncorrectable ECC since the driver loaded, a row remap pending or failed (nvmlDeviceGetRemappedRows);
* counters against the last reading: lifetime uncorrectable ECC, rows remapped, PCIe replays growing (WARN);
* XIDs the driver logged since the last reading (NVIDIA's XID catalogue, docs.nvidia.com/deploy/xid-errors);
* the PCIe link: fewer lanes than the link's maximum (a link that trained down); a lower generation is only
  named (an idle GPU lowers its link speed to save power);
* slowdown now: HW slowdown, HW thermal or HW power brake active (nvml.h clock-event reasons);
* the fabric (`fabric.py`): RDMA ports Active at the node's rate, their and the NVLinks' error counters
  against the last reading, Fabric Manager / nvlsm where the NVLinks reach NVSwitches.

A GPU whose serial changed on the same bus id is named (a part swapped in repair).  FAIL drains the node with a
'trainready:health/hw DATE:' reason, never over an administrator's drain (`health.drain_self`); WARN and a fact
it could not read are printed, exit 0.  The compute checks moved to `trainready cluster sweep`;
`--health-check --active` still runs the old seconds-long ones (`health.py`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from pathlib import Path
from typing import Any, Callable, Mapping

from trainready.manifest.gpu import GpuFacts
from trainready.manifest.gpuhealth import COUNTERS, HealthReading, read_health
from trainready.spec.fabric import FabricSpec

SCHEMA = "trainready.healthstate/1"
STATE_ENV = "TRAINREADY_HEALTH_STATE"
STATE_DEFAULT = "/var/lib/trainready/health-state.json"
# XIDs that mean the GPU needs service or a reset (NVIDIA XID catalogue): 48 double-bit ECC, 64 row-remap
# failure, 74 NVLink error, 79 fallen off the bus, 94/95 contained/uncontained ECC, 119/120 GSP errors.
XID_FAIL = {48: "double-bit ECC", 64: "row remap failure", 74: "NVLink error", 79: "GPU fallen off the bus",
            94: "contained ECC error", 95: "uncontained ECC error", 119: "GSP RPC timeout", 120: "GSP error"}
# Application faults (13 graphics engine exception, 31 MMU fault, 43 channel stopped, 45 preemptive cleanup):
# a program's own error, not the node's: named, never a finding.
XID_APP = {13, 31, 43, 45}
SLOWDOWN = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")


def state_path(given: str | None) -> Path:
    return Path(given or os.environ.get(STATE_ENV) or STATE_DEFAULT)


def load_state(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("schema") == SCHEMA else None


def save_state(path: Path, node: str, reading: HealthReading, fabric: dict[str, Any] | None = None) -> str | None:
    """Write this reading (and the fabric's counters) for the next run; why not (a str) when the folder is not
    writable."""
    from trainready.util.atomic import atomic_write_text

    doc = {"schema": SCHEMA, "node": node, "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "reading": reading.to_json(), **({"fabric": fabric} if fabric is not None else {})}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(doc, indent=1) + "\n")
    except OSError as exc:
        return f"state not saved ({path}: {exc.strerror}): counters and XIDs are judged from scratch next time"
    return None


def _num(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _gpu_now(g: GpuFacts) -> tuple[list[str], list[str], list[str]]:
    """(fail, warn, unread) of one GPU on its own."""
    fail, warn, unread = [], [], []
    tag = f"GPU {g.index} ({g.pci_bus_id or g.uuid})"
    if str(g.name).startswith("unavailable"):
        return [f"{tag}: does not answer NVML ({g.name.removeprefix('unavailable: ')})"], [], []
    if (_num(g.ecc_uncorrected_volatile) or 0) > 0:
        fail.append(f"{tag}: {g.ecc_uncorrected_volatile} uncorrectable ECC error(s) since the driver loaded")
    if g.remap_pending is True:
        fail.append(f"{tag}: a row remap is pending (needs a GPU reset)")
    if g.remap_failed is True:
        fail.append(f"{tag}: a row remap failed (the board needs service)")
    cw, mw = _num(g.pcie_width_current), _num(g.pcie_width_max)
    if cw is not None and mw is not None and cw < mw:
        fail.append(f"{tag}: PCIe link x{cw}, the link's maximum is x{mw}")
    if isinstance(g.throttle_reasons, list):
        slow = [r for r in g.throttle_reasons if r in SLOWDOWN]
        if slow:
            fail.append(f"{tag}: clocks held down now: {', '.join(slow)}")
    for name in ("ecc_uncorrected_volatile", "remap_pending", "pcie_width_current", "throttle_reasons"):
        if isinstance(getattr(g, name), str):
            unread.append(f"{tag} {name}")
    return fail, warn, unread


def _gpu_vs_last(g: GpuFacts, old: dict[str, Any], since: str) -> list[str]:
    """Counters grown and a serial changed, against the last reading of the same bus id."""
    tag = f"GPU {g.index} ({g.pci_bus_id})"
    said = []
    for name in COUNTERS:
        now, before = _num(getattr(g, name)), _num(old.get(name))
        if now is not None and before is not None and now > before:
            said.append(f"{tag}: {name} grew {before} -> {now} since {since}")
    serial = old.get("serial")
    if serial and g.serial != serial and not str(g.serial).startswith("unavailable"):
        said.append(f"{tag}: serial {serial} -> {g.serial} since {since} (a part swapped)")
    return said


def judge(now: HealthReading, last: dict[str, Any] | None, want: int | None) -> dict[str, list[str]]:
    """fail / warn / note / unread findings of a reading, against the last state and the expected GPU count."""
    out: dict[str, list[str]] = {"fail": [], "warn": [], "note": [], "unread": []}
    old = HealthReading.from_json(last["reading"]) if last else None
    since = str(last.get("when", "?"))[:16] if last else ""
    expect = want if want is not None else (len(old.gpus) if old and old.nvml_error is None else None)
    if now.nvml_error is not None:
        (out["fail"] if expect else out["note"]).append(f"NVML unusable: {now.nvml_error}")
    elif expect is not None and len(now.gpus) != expect:
        out["fail"].append(f"{len(now.gpus)} GPU(s) seen, {expect} expected")
    before = {g.pci_bus_id: dataclasses.asdict(g) for g in (old.gpus if old else ())}
    for g in now.gpus:
        f, w, u = _gpu_now(g)
        out["fail"] += f
        out["warn"] += w
        out["unread"] += u
        grown = _gpu_vs_last(g, before[g.pci_bus_id], since) if g.pci_bus_id in before else []
        out["warn"] += [s for s in grown if "serial" not in s]
        out["note"] += [s for s in grown if "serial" in s]
    _xids(now, out)
    return out


def _xids(now: HealthReading, out: dict[str, list[str]]) -> None:
    if now.kmsg_error:
        out["unread"].append(f"XIDs ({now.kmsg_error})")
    for x in now.xids:
        line = f"Xid {x.code} on {x.pci}: {XID_FAIL.get(x.code, x.text)}"
        (out["fail"] if x.code in XID_FAIL else out["note"] if x.code in XID_APP else out["warn"]).append(line)


def reading_for(faults: Mapping[str, str], last: dict[str, Any] | None) -> HealthReading:
    """This node's reading, or the replayed one of `--plant health.reading=PATH`."""
    planted = faults.get("health.reading")
    if planted:
        return HealthReading.from_json(json.loads(Path(planted).read_text(encoding="utf-8")))
    old = last["reading"] if last else {}
    return read_health(int(old.get("kmsg_seq", -1)), str(old.get("boot_id", "")))


def run_passive(want: int | None, state: str | None, plants: Mapping[str, str], say: Callable[[str], None],
                json_path: str | None = None, fabric_spec: FabricSpec | None = None) -> int:
    """Read, judge, save the reading, drain on a failure: the exit code (0 healthy, 1 not, 3 planted).  A planted
    reading is a test: it is judged and recorded, and never drains the node it runs on.  `want`: the spec's GPU
    count; `fabric_spec`: its [fabric] (None: the spec-free rules, each port against the node's others)."""
    import time

    from trainready.cluster.health.active import drain_self
    from trainready.cluster.tasks.layout import node_name
    from trainready.records import PLANTED_EXIT

    t0 = time.perf_counter()
    path = state_path(state)
    last = load_state(path)
    now = reading_for(plants, last)
    found = judge(now, last, want)
    fabric = None
    if "health.reading" not in plants:  # a replayed reading is judged alone: this machine's fabric is not it
        from trainready.cluster.health import fabric as passive_fabric

        facts = passive_fabric.read()
        passive_fabric.judge(facts, (last or {}).get("fabric"), fabric_spec or FabricSpec(), found)
        fabric = passive_fabric.to_state(facts)
    node = node_name()
    unsaved = save_state(path, node, now, fabric)
    for key, head in (("warn", "WARN"), ("note", "note"), ("unread", "could not judge")):
        for line in found[key]:
            say(f"trainready health check: {node}: {head}: {line}")
    if unsaved:
        say(f"trainready health check: {node}: note: {unsaved}")
    took = time.perf_counter() - t0
    if json_path:
        write_record(json_path, node, now, found, took, plants)
    if not found["fail"]:
        say(f"trainready health check: {node}: OK ({len(now.gpus)} GPU(s), passive, {took:.2f} s)")
        return PLANTED_EXIT if plants else 0
    if plants:
        say(f"trainready health check: {node}: FAIL: {'; '.join(found['fail'])} (planted: not drained)")
        return PLANTED_EXIT
    return drain_self(node, found["fail"], "health", plants, say, "hardware")  # counters, XIDs, GPUs missing


def write_record(path: str, node: str, now: HealthReading, found: dict[str, list[str]], took: float,
                 plants: Mapping[str, str]) -> None:
    """A `trainready.report/1` with one result, `health`: fail / warn / pass and the findings."""
    import socket

    from trainready import __version__
    from trainready.records import CheckResult, Level, Report, Status
    from trainready.util.atomic import atomic_write_text

    status = Status.FAIL if found["fail"] else Status.WARN if found["warn"] else Status.PASS
    lines = found["fail"] or found["warn"] or [f"{len(now.gpus)} GPU(s) healthy"]
    result = CheckResult("health", "passive node health (NVML, kernel log)", Level.QUICK, status,
                         "; ".join(lines), "", (), took, {**found, "reading": now.to_json()})
    ctx: dict[str, Any] = {"node": node, **({"planted": dict(plants)} if plants else {})}
    report = Report("node --health-check", socket.gethostname(),
                    dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), took, __version__, {}, (result,),
                    ctx)
    atomic_write_text(Path(path), json.dumps(report.to_json(), indent=1) + "\n")
