"""One side of a comparison: the versions, check statuses and metrics read from a record.

A node record (`trainready.report/1`) gives its versions from the `versions` check's details and
every metric of every check.  A fleet record (`trainready.fleet/1`) gives each version as the one
value all its nodes share ("mixed: a | b" when they differ) and each metric as its median over the
fleet's nodes (robust to one outlier node, as the fleet verdict itself is).
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from trainready.errors import UsageError
from trainready.records import SCHEMA_VERSION, read_report

FLEET_SCHEMA = "trainready.fleet/1"
EXPECTED = f"a '{SCHEMA_VERSION}' record (trainready node --json) or a '{FLEET_SCHEMA}' record (trainready cluster run)"

# Versions check details key → compare key (the spec's software.* names; driver_cuda = the driver's CUDA ceiling).
VERSION_FIELDS = (("python", "python"), ("torch", "torch"), ("torch_cuda", "cuda"), ("cudnn", "cudnn"), ("nccl", "nccl"))


@dataclass(frozen=True)
class Observed:
    """One metric value as recorded: unit and the threshold it was judged against (op, bound) if any."""

    value: float
    unit: str
    op: str | None = None
    bound: float | None = None


MetricKey = tuple[str, tuple[tuple[str, str], ...]]  # (name, sorted labels)


@dataclass(frozen=True)
class Side:
    path: str
    schema: str
    host: str
    started_at: str
    versions: Mapping[str, str]
    checks: Mapping[str, str]  # check name → status
    metrics: Mapping[MetricKey, Observed] = field(default_factory=dict)
    nodes: int = 1
    spec_compare: Mapping[str, Any] | None = None  # the [compare] table of the spec the record was held to
    fingerprint: Mapping[str, Any] | None = None  # compare/fingerprint.py fingerprint_of (a node record's)

    def header(self) -> dict[str, Any]:
        return {"path": self.path, "schema": self.schema, "host": self.host, "started_at": self.started_at,
                "nodes": self.nodes}


def read_side(path: str, flag: str) -> Side:
    """The record at `path` as a Side; a planted (test) record, or anything not a record → UsageError."""
    where = f"{flag} {path}"
    doc = _read_any(path, where)
    if doc.get("schema") == FLEET_SCHEMA:
        return fleet_side(doc, path, where)
    _refuse_planted(doc, where)
    return node_side(doc, path, where)


def _read_any(path: str, where: str) -> dict[str, Any]:
    p = Path(path)
    if p.is_file():
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            doc = None
        if isinstance(doc, dict) and doc.get("schema") == FLEET_SCHEMA:
            return doc
    return read_report(path, where, EXPECTED)  # the one reader: its one-line errors for everything else


def _refuse_planted(doc: Mapping[str, Any], where: str) -> None:
    ctx = doc.get("context") if isinstance(doc.get("context"), dict) else {}
    planted = doc.get("planted") or ctx.get("planted")  # fleet/fleetnode records: top level; node records: context
    if planted:
        what = ", ".join(f"{k}={v}" for k, v in planted.items()) if isinstance(planted, dict) else str(planted)
        raise UsageError(f"{where}: a test record (planted faults: {what}), not evidence; compare judges real runs only")


def node_side(doc: Mapping[str, Any], path: str, where: str) -> Side:
    results = [r for r in doc.get("results", []) if isinstance(r, dict)]
    checks = {str(r.get("name")): str(r.get("status")) for r in results}
    versions: dict[str, str] = {}
    for r in results:
        if r.get("name") == "versions" and isinstance(r.get("details"), dict):
            versions = versions_of(r["details"])
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    table = spec.get("compare") if isinstance(spec.get("compare"), dict) else None
    from trainready.compare.fingerprint import fingerprint_of

    return Side(path, str(doc.get("schema")), str(doc.get("host", "?")), str(doc.get("started_at", "?")),
                versions, checks, dict(metrics_of(results, where)), spec_compare=table,
                fingerprint=fingerprint_of(results))


def versions_of(details: Mapping[str, Any]) -> dict[str, str]:
    """Flat {key: version} from a versions check's details (missing entries are simply absent)."""
    out: dict[str, str] = {}
    v = details.get("versions") if isinstance(details.get("versions"), dict) else {}
    for src, key in VERSION_FIELDS:
        if v.get(src) is not None:
            out[key] = str(v[src])
    for src, key in (("driver", "driver"), ("cuda_driver_version", "driver_cuda"), ("os", "os"),
                     ("image_digest", "image_digest"), ("package_set_sha256", "packages")):
        if details.get(src) is not None:
            out[key] = str(details[src])
    for group in ("key_packages", "packages"):
        pk = details.get(group)
        if isinstance(pk, dict):
            out.update({f"packages.{n}": str(ver) for n, ver in pk.items()})
    return out


def metrics_of(results: Iterable[Mapping[str, Any]], where: str) -> Iterable[tuple[MetricKey, Observed]]:
    for r in results:
        for m in r.get("metrics") or []:
            try:
                labels = tuple(sorted((str(k), str(v)) for k, v in (m.get("labels") or {}).items()))
                thr = m.get("threshold") or {}
                value = float(m["value"])  # "nan"/"inf" strings parse too
                yield (str(m["name"]), labels), Observed(value, str(m.get("unit", "")), thr.get("op"),
                                                         float(thr["bound"]) if "bound" in thr else None)
            except (KeyError, TypeError, ValueError, AttributeError):
                raise UsageError(f"{where}: check '{r.get('name')}' has a malformed metric {str(m)[:80]} "
                                 "(expected name, value, unit)") from None


def fleet_side(doc: Mapping[str, Any], path: str, where: str) -> Side:
    """A fleet record: each node's record (RESULTS/nodes/NODE.json, trainready.fleetnode/1, as the fleet record
    names it) folded into one side; a node without a record is left out and counted in the host line."""
    _refuse_planted(doc, where)
    nodes = doc.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise UsageError(f"{where}: '{FLEET_SCHEMA}' record without a 'nodes' list ({EXPECTED})")
    sides = []
    for n in nodes:
        rec = _node_record(n, Path(path).parent) if isinstance(n, dict) else None
        if rec is None:
            continue
        label = f"{where} node {n.get('node', '?')}"
        _refuse_planted(rec, label)
        if isinstance(rec.get("report"), dict):
            side = node_side(rec["report"], path, label)
            extra = {("packages" if k == "packages_sha256" else k): str(v) for k, v in (rec.get("versions") or {}).items()
                     if v not in (None, "")}  # the fleet's drift fields (kernel too); the versions check's win
            sides.append(Side(side.path, side.schema, side.host, side.started_at, {**extra, **side.versions},
                              side.checks, side.metrics, spec_compare=side.spec_compare, fingerprint=side.fingerprint))
    if not sides:
        raise UsageError(f"{where}: none of its {len(nodes)} node(s) has a readable node record")
    return fold(sides, path, str(doc.get("schema")), str((doc.get("context") or {}).get("started_at", "?")),
                f"fleet of {len(sides)}/{len(nodes)} node records")


def _node_record(entry: Mapping[str, Any], base: Path) -> dict[str, Any] | None:
    """The node's trainready.fleetnode/1 record, from the path the fleet record gives (absolute, or beside it)."""
    rec = entry.get("record")
    if isinstance(rec, dict):
        return rec
    if not isinstance(rec, str) or not rec:
        return None
    for p in (Path(rec), base / rec, base / "nodes" / Path(rec).name):
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(doc, dict) and doc.get("schema") == "trainready.fleetnode/1":
            return doc
    return None


def fold(sides: list[Side], path: str, schema: str, started_at: str, host: str) -> Side:
    """Versions shared by all nodes (else 'mixed: …'), worst status per check, median of each metric."""
    versions: dict[str, str] = {}
    for key in sorted({k for s in sides for k in s.versions}):
        vals = sorted({s.versions.get(key, "absent") for s in sides})
        versions[key] = vals[0] if len(vals) == 1 else "mixed: " + " | ".join(vals)
    checks: dict[str, str] = {}
    for s in sides:
        for name, st in s.checks.items():
            if name not in checks or severity(st) > severity(checks[name]):
                checks[name] = st
    metrics: dict[MetricKey, Observed] = {}
    for key in {k for s in sides for k in s.metrics}:
        obs = [s.metrics[key] for s in sides if key in s.metrics]
        metrics[key] = Observed(statistics.median(o.value for o in obs), obs[0].unit, obs[0].op, obs[0].bound)
    # the fingerprint most nodes share (its key and bits): the fleet's, as its majority judges it
    prints = [s.fingerprint for s in sides if s.fingerprint]
    shared = Counter(json.dumps(p, sort_keys=True) for p in prints).most_common(1)
    return Side(path, schema, host, started_at, versions, checks, metrics, nodes=len(sides),
                spec_compare=sides[0].spec_compare, fingerprint=json.loads(shared[0][0]) if shared else None)


def severity(status: str) -> int:
    """records.SEVERITY of a status string; an unknown status counts as an error."""
    from trainready.records import SEVERITY, Status

    try:
        return SEVERITY[Status(status)]
    except ValueError:
        return SEVERITY[Status.ERROR]
