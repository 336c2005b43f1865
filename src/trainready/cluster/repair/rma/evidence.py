"""What a drained node's RMA folder says, read from the records under RESULTS (and, on the node, its kernel log).

* identity: per GPU its board serial (nvmlDeviceGetSerial), PCI bus id, slot (nvmlDeviceGetModuleId: the position
  on an HGX baseboard), VBIOS, and the node's driver, as the node's own record holds them (manifest/gpu.py);
* the failure: each failed check's record line, its class (cluster/repair/reasons.py) and the exact command that runs it
  again on that node;
* the drain: the ledger's entries for the node and Slurm's reason, parsed;
* the XID timeline: the kernel log's XIDs (manifest/kmsg.py) with NVIDIA's meaning (hardware/xids.py), read only
  on the node itself; elsewhere each GPU's count since boot from its record;
* the history: per sweep the counters (ECC, remapped rows, PCIe replays, XIDs) and the trend WARNs
  (cluster/sweep/trend.py), the last pass, and the jobs that ran since (cluster/repair/jobs.py: the fleet
  record's own answer where a run drained it);
* which record it read: the draining run's own, named with its run and time; where that run left none, why, and
  the newest earlier one only for the GPUs' identity, said to be older and from another run.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from trainready.cluster.repair import jobs as accounting

from trainready.cluster.repair import reasons

from trainready.cluster.repair import jobs as sacct
from trainready.cluster.tasks.layout import LEDGER, NODE_SCHEMA, read_json
from trainready.hardware.xids import CATALOGUE, explain
from trainready.manifest.kmsg import Xid

IDENTITY = ("index", "name", "serial", "pci_bus_id", "module_id", "vbios", "uuid")
TREND_SCHEMA = "trainready.sweeptrend/1"
COUNTERS = ("ecc_uncorrected_aggregate", "remapped_rows_uncorrectable", "remap_pending", "remap_failed",
            "pcie_replays", "xids_this_boot")


@dataclass(frozen=True)
class Evidence:
    node: str
    results: str
    record_path: str  # "" when the node has no record under RESULTS
    record: Mapping[str, Any] | None
    record_note: str  # which run's record and when, or why there is none (said beside the drain)
    record_own: bool  # the record is the draining run's (or, with no drain, the newest): its failures are listed
    driver: str
    gpus: tuple[dict[str, Any], ...]  # IDENTITY + COUNTERS of each GPU, as recorded
    failures: tuple[dict[str, Any], ...]  # check, status, message, remedy, class
    reproduce: str  # the command that runs the failed checks again on the node
    drains: tuple[dict[str, Any], ...]  # the ledger's entries for the node, oldest first
    reason: dict[str, Any]  # the latest drain's reason, parsed (reasons.parse)
    xids: tuple[dict[str, Any], ...] | str  # the timeline, or why it was not read
    history: tuple[dict[str, Any], ...]  # per sweep: when, verdict, counters, trend WARNs
    last_pass: str
    jobs: sacct.JobImpact
    planted: Mapping[str, str] = field(default_factory=dict)


def latest_record(results: Path, node: str) -> Path | None:
    """The node's newest record under RESULTS: RESULTS/nodes/NODE.json or any run's (runs/ID/nodes/NODE.json)."""
    found = [p for p in [results / "nodes" / f"{node}.json", *results.glob(f"runs/*/nodes/{node}.json")] if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def _gpus(record: Mapping[str, Any] | None) -> tuple[str, list[dict[str, Any]]]:
    nvml = (((record or {}).get("manifest") or {}).get("gpu") or {}).get("nvml") or {}
    if not isinstance(nvml, Mapping):
        return "not recorded", []
    gpus = [{k: g.get(k, "not recorded") for k in (*IDENTITY, *COUNTERS)} for g in nvml.get("gpus") or []
            if isinstance(g, Mapping)]
    why = nvml.get("error")
    return str(nvml.get("driver_version") or (f"unavailable: {why}" if why else "not recorded")), gpus


def failures(record: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    out = []
    for r in ((record or {}).get("report") or {}).get("results") or []:
        if r.get("status") in ("fail", "error"):
            name = str(r.get("name"))
            out.append({"check": name, "status": r.get("status"), "message": r.get("message", ""),
                        "remedy": r.get("remedy", ""), "class": reasons.CHECK_CLASS.get(name, reasons.SOFTWARE),
                        "metrics": r.get("metrics", [])})
    return out


def reproduce(node: str, record: Mapping[str, Any] | None, failed: Sequence[dict[str, Any]]) -> str:
    """`srun -w NODE ... trainready node --only CHECKS --spec SPEC`: the failed checks again, on that node alone."""
    ctx = ((record or {}).get("report") or {}).get("context") or {}
    spec = str(ctx.get("spec_source") or "")
    only = ",".join(f["check"] for f in failed) or "gpus,matmul"
    argv = ["srun", "-w", node, "-N", "1", "--exclusive", "--time=30:00", "trainready", "node", "--only", only]
    if spec and (spec.startswith("example:") or Path(spec).is_file()):
        argv += ["--spec", spec]
    return shlex.join(argv)


def xid_timeline(xids: Sequence[Xid], boot_epoch: float | None = None) -> list[dict[str, Any]]:
    """Each XID with its meaning and NVIDIA's suggested action; wall time where the boot time is known."""
    import datetime as dt

    out = []
    for x in sorted(xids, key=lambda x: x.seq):
        info = explain(x.code)
        when = ""
        if boot_epoch is not None and x.usec >= 0:
            when = dt.datetime.fromtimestamp(boot_epoch + x.usec / 1e6, dt.timezone.utc).isoformat(timespec="seconds")
        out.append({"seq": x.seq, "when": when, "since_boot_s": round(x.usec / 1e6, 3) if x.usec >= 0 else None,
                    "pci": x.pci, "xid": x.code, "meaning": info.meaning, "action": info.action,
                    "hardware": info.hardware, "line": x.text, "source": CATALOGUE})
    return out


def boot_epoch(stat: str = "/proc/stat") -> float | None:
    try:
        for line in Path(stat).read_text(encoding="ascii").splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def read_kernel_xids(here: bool, node: str) -> tuple[dict[str, Any], ...] | str:
    """The timeline from this host's /dev/kmsg when this is the node; else why it is not read here."""
    if not here:
        return (f"not read: the kernel log is {node}'s own and this is not {node}; each GPU's XID count since boot "
                "is in the GPU table (from its record); the timeline is collected on the node (see below)")
    from trainready.manifest.kmsg import read_xids

    got = read_xids(-1)
    if isinstance(got, str):
        return f"not read: {got}"
    return tuple(xid_timeline(got[1], boot_epoch()))


def ledger_entries(results: Path, node: str) -> list[dict[str, Any]]:
    path = results / LEDGER
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict) and e.get("node") == node:
            out.append(e)
    return out


def _trend_runs(results: Path, node: str) -> list[dict[str, Any]]:
    """RESULTS/sweep/trend/NODE.json's runs (`trainready.sweeptrend/1`, cluster/sweep/trend.py, a layer above)."""
    p = results / "sweep" / "trend" / f"{node}.json"
    try:
        doc = json.loads(p.read_text(encoding="utf-8")) if p.is_file() else {}
    except (OSError, ValueError):
        return []
    return [e for e in doc.get("runs") or [] if isinstance(e, dict)] if doc.get("schema") == TREND_SCHEMA else []


def history(results: Path, node: str) -> list[dict[str, Any]]:
    """Per sweep: when, verdict, counters, WARNs, from the node's trend."""
    return [{"when": e.get("when"), "verdict": e.get("verdict"), "counters": e.get("counters", {}),
             "trend": e.get("trend", []), "why": e.get("why", ""), "strikes": e.get("strikes")}
            for e in _trend_runs(results, node)]


def _stamp(path: Path) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc).isoformat(timespec="seconds")


def _run_of(results: Path, path: Path) -> str:
    try:
        rel = path.relative_to(results)
    except ValueError:
        return str(path)
    return f"runs/{rel.parts[1]}" if rel.parts[:1] == ("runs",) and len(rel.parts) > 2 else str(rel)


def pick_record(results: Path, node: str, given: Path | None, drain: Mapping[str, Any]) -> tuple[Path | None, bool, str]:
    """(the record to read, whether its failed checks are the drain's, what to say of it: its run and time).
    A run's drain names its record (`given`, or the ledger entry's `record`); where that run left none, the
    newest earlier record serves for the GPUs' identity only, said to be older and from another run.  A sweep's
    drain reads the newest record (its own last run's); the health check's drain is its own, on the node."""
    own = given or (Path(str(drain["record"])) if drain.get("record") else None)
    if own is not None and own.is_file():
        return own, True, f"the record of the run that drained it: {_run_of(results, own)}, written {_stamp(own)}"
    why = "; ".join(map(str, drain.get("why") or [])) or "no reason recorded"
    none = (f"the run that drained it left no record of the node ({why})" if "record" in drain
            else f"the {drain.get('by')} check drained it ({why})" if drain.get("by") == "health" else "")
    older = latest_record(results, node)
    if older is None:
        return None, False, f"{none or 'no drain of the node in the ledger'}; no record of the node under RESULTS"
    if not none:
        return older, True, f"the node's newest record: {_run_of(results, older)}, written {_stamp(older)}"
    return older, False, (f"{none}; the GPU table is from an EARLIER record, {_run_of(results, older)}, written "
                          f"{_stamp(older)}: not the check that drained it")


def gather(results: Path, node: str, record_path: Path | None = None, here: bool = False,
           now: str = "", jobs: sacct.JobImpact | None = None) -> Evidence:
    """Everything the folder says about `node`; `here`: this process runs on the node (reads its kernel log);
    `jobs`: the job impact the draining run found (its fleet record's), else asked for here."""
    import datetime as dt

    from trainready.cluster.repair import coverage

    drains = ledger_entries(results, node)
    last = next((e for e in reversed(drains) if e.get("action") == "drain"), {})
    path, own, note = pick_record(results, node, record_path, last)
    record, why = read_json(path, NODE_SCHEMA) if path is not None else (None, "")
    if path is not None and record is None:
        note += f"; it cannot be read ({why})"
    driver, gpus = _gpus(record)
    failed = failures(record) if own else []
    parsed = reasons.parse(str(last.get("reason") or last.get("slurm_reason", "")))  # the whole text where kept
    passed = (coverage.last_passes(results).get(node) or {}).get(coverage.ACTIVE)
    until = now or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    planted = dict(((record or {}).get("report") or {}).get("context", {}).get("planted") or last.get("planted") or {})
    return Evidence(node, str(results), str(path or ""), record, note, own, driver, tuple(gpus), tuple(failed),
                    reproduce(node, record, failed), tuple(drains),
                    {"text": last.get("reason") or last.get("slurm_reason", ""), "slurm": last.get("slurm_reason", ""),
                     "source": parsed.source,
                     "class": last.get("class") or parsed.klass, "date": str(parsed.date or ""),
                     "cause": parsed.cause, "why": last.get("why", [])},
                    read_kernel_xids(here, node), tuple(history(results, node)),
                    passed.isoformat(timespec="seconds") if passed else "",
                    jobs or accounting.for_node(results, node, until), planted)
