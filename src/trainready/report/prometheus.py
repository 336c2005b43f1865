"""node_exporter textfile-collector output: the fleet's health in existing monitoring.

Format: Prometheus text exposition format 0.0.4 (HELP/TYPE lines, then samples), written
atomically (temp file + rename in the same directory, as node_exporter's textfile collector
docs require: it must never read half a file).  Naming follows prometheus.io/docs/practices/
naming: one `trainready_` prefix, base units in the name (seconds, bytes, bytes_per_second,
ratio), `_info` gauges (value 1) carry versions as labels, and labels are low-cardinality
(node, gpu, check, op, ...; never message sizes, paths or free text).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from trainready.report.kinds import Record
from trainready.util.nodetext import clean

PREFIX = "trainready_"
STATUSES = ("pass", "warn", "skip", "fail", "error")
# Record unit → (name suffix, factor to the base unit).  Sources: Prometheus naming practices
# (base units: seconds, bytes, ratios, celsius; hertz the SI unit of a clock); GB = 1e9 B (nccl-tests' and
# trainready's convention).
UNITS: dict[str, tuple[str, float]] = {
    "s": ("seconds", 1.0), "ms": ("seconds", 1e-3), "us": ("seconds", 1e-6), "ns": ("seconds", 1e-9),
    "B": ("bytes", 1.0), "GB": ("bytes", 1e9), "GiB": ("bytes", 2.0**30), "MiB": ("bytes", 2.0**20),
    "GB/s": ("bytes_per_second", 1e9), "MB/s": ("bytes_per_second", 1e6),
    "TFLOP/s": ("flops_per_second", 1e12), "tokens/s": ("tokens_per_second", 1.0),
    "1": ("", 1.0), "%": ("ratio", 0.01), "nats": ("nats", 1.0), "elements": ("", 1.0), "errors": ("", 1.0),
    "GPUs": ("", 1.0), "params": ("", 1.0), "C": ("celsius", 1.0), "MHz": ("hertz", 1e6),
    "Gb/s": ("bits_per_second", 1e9), "links": ("", 1.0),
}
# Labels kept from a metric's own labels: each takes a handful of values per node.  Others (message
# sizes, byte ranges, model names, peak figures) are dropped; a metric whose series would then
# collide keeps its first value (per-size busbw rows collapse onto the judged average, below).
KEEP_LABELS = ("gpu", "op", "dtype", "backend", "run", "component", "stat", "rank", "ratio", "device", "tensor",
               "kind", "counter", "nic", "port")
# Metrics that exist once per message size: the per-op judged average (comm_busbw_avg) carries them.
PER_SIZE = ("size_bytes",)
_NAME_OK = re.compile(r"[^a-zA-Z0-9_]")
# Abbreviations a recorded name may already end in, per base-unit suffix (train_tokens_per_s, ckpt_gbps).
_SAID = {"seconds": ("_time_s", "_ms", "_us", "_s"), "bytes_per_second": ("_gbps", "_per_s"),
         "tokens_per_second": ("_tokens_per_s", "_per_s"), "flops_per_second": ("_tflops",), "bytes": ("_gib", "_b")}


@dataclass(frozen=True)
class Sample:
    name: str  # full metric name
    help: str
    labels: tuple[tuple[str, str], ...]
    value: float


def metric_name(name: str, unit: str) -> str:
    """trainready_<name>_<base unit>; one prefix, the unit suffix once, [a-zA-Z0-9_] only."""
    base = _NAME_OK.sub("_", name).strip("_").lower()
    if base.startswith(PREFIX):
        base = base[len(PREFIX):]
    suffix = UNITS.get(unit, ("", 1.0))[0]  # an unknown unit is a count: no suffix, never a made-up one
    for tail in _SAID.get(suffix, ()):  # the record's own unit abbreviation in the name: replaced, not doubled
        if base.endswith(tail):
            base = base[: -len(tail)]
            break
    if not suffix and unit == "1" and ("fraction" in base or base.endswith("_ratio")):
        suffix = "ratio"
    if suffix and not base.endswith("_" + suffix):
        base = f"{base}_{suffix}"
    return PREFIX + re.sub(r"_+", "_", base)


def _labels(**kv: object) -> tuple[tuple[str, str], ...]:
    return tuple((k, str(v)) for k, v in kv.items() if v is not None and str(v) != "")


def _report_samples(rec: Record) -> Iterable[Sample]:
    d = rec.doc
    node, cmd = str(d.get("host", "")), str(d.get("command", rec.kind))
    yield Sample(PREFIX + "info", "trainready version that wrote the record (value 1)",
                 _labels(node=node, command=cmd, version=d.get("tool_version")), 1.0)
    yield from _software_info(d, node)
    for s in STATUSES:
        yield Sample(PREFIX + "verdict", "overall verdict of the last run, one series per status (1 = current)",
                     _labels(node=node, command=cmd, status=s), 1.0 if rec.status == s else 0.0)
    yield Sample(PREFIX + "planted", "1 when the record is a test with planted faults, not evidence",
                 _labels(node=node, command=cmd), 1.0 if rec.planted else 0.0)
    yield Sample(PREFIX + "run_duration_seconds", "wall time of the run", _labels(node=node, command=cmd),
                 _num(d.get("duration_s")))
    for r in d.get("results", []):
        check = str(r.get("name", "?"))
        for s in STATUSES:
            yield Sample(PREFIX + "check_status", "verdict of one check, one series per status (1 = current)",
                         _labels(node=node, check=check, status=s), 1.0 if r.get("status") == s else 0.0)
        yield Sample(PREFIX + "check_duration_seconds", "wall time of one check", _labels(node=node, check=check),
                     _num(r.get("duration_s")))
        for m in r.get("metrics", []):
            labels = m.get("labels") or {}
            if any(k in labels for k in PER_SIZE):
                continue
            unit = str(m.get("unit", "1"))
            factor = UNITS.get(unit, ("", 1.0))[1]
            kept = {k: labels[k] for k in KEEP_LABELS if k in labels}
            yield Sample(metric_name(str(m.get("name", "?")), unit), f"{m.get('name')} (recorded in {unit})",
                         _labels(node=node, check=check, **kept), _num(m.get("value")) * factor)
        if check == "fabric":
            yield from _fabric_samples((r.get("details") or {}).get("facts") or {}, node)


def _fabric_samples(facts: Mapping[str, Any], node: str) -> Iterable[Sample]:
    """Per RDMA port (nic, port) its state and error counters; per GPU its active NVLinks and their error counters
    summed over its links (labels stay low-cardinality: 8 NICs x 7 counters, not 18 links x 8 GPUs x 4)."""
    for p in facts.get("ports") or []:
        nic = _labels(node=node, nic=p.get("device"), port=p.get("port"))
        yield Sample(PREFIX + "fabric_port_active", "1 when the RDMA port is ACTIVE and LinkUp (sysfs state, phys_state)",
                     nic, 1.0 if p.get("state") == "ACTIVE" and p.get("phys_state") == "LinkUp" else 0.0)
        for c, v in sorted((p.get("counters") or {}).items()):
            yield Sample(PREFIX + "fabric_port_errors", "an RDMA port's IBA error counter (sysfs ports/N/counters)",
                         nic + (("counter", str(c)),), _num(v))
    for g in facts.get("gpus") or []:
        if g.get("not_applicable"):
            continue
        gpu = _labels(node=node, gpu=g.get("index"))
        links = [lk for lk in g.get("links") or [] if isinstance(lk, Mapping)]
        yield Sample(PREFIX + "fabric_nvlink_active_links", "active NVLinks of the GPU (NVML)", gpu,
                     float(sum(1 for lk in links if lk.get("active"))))
        total: dict[str, float] = {}
        for lk in links:
            for c, v in (lk.get("counters") or {}).items():
                total[str(c)] = total.get(str(c), 0.0) + _num(v)
        for c, v in sorted(total.items()):
            yield Sample(PREFIX + "fabric_nvlink_errors", "an NVLink error counter summed over the GPU's links (NVML)",
                         gpu + (("counter", c),), v)


def _software_info(d: Mapping[str, Any], node: str) -> Iterable[Sample]:
    """Versions the `versions` check / comm record saw, as one _info series (driver, CUDA, torch, NCCL)."""
    found: dict[str, str] = {}
    for r in d.get("results", []):
        if r.get("name") == "versions":
            det = r.get("details") or {}
            flat = {**(det.get("versions") if isinstance(det.get("versions"), Mapping) else {}), **det}
            for k in ("driver", "cuda_driver_version", "torch", "torch_cuda", "cudnn", "nccl", "python", "os"):
                v = flat.get(k)
                if isinstance(v, (str, int, float)) and str(v) and not str(v).startswith("unavailable"):
                    found[k] = str(flat[k])
    ctx_versions = (d.get("context") or {}).get("versions") or {}
    for k in ("torch", "cuda", "nccl"):
        if isinstance(ctx_versions.get(k), str):
            found.setdefault(k, ctx_versions[k])
    if found:
        yield Sample(PREFIX + "software_info", "software versions seen by the run (value 1)",
                     _labels(node=node, **found), 1.0)


def _selftest_samples(rec: Record) -> Iterable[Sample]:
    node = str(rec.doc.get("host", ""))
    yield Sample(PREFIX + "info", "trainready version that wrote the record (value 1)",
                 _labels(node=node, command="selftest", version=rec.doc.get("tool_version")), 1.0)
    for c in rec.doc.get("cases", []):
        yield Sample(PREFIX + "selftest_detected", "1 when the planted fault was detected, 0 when missed",
                     _labels(node=node, plant=c.get("name")), 1.0 if c.get("outcome") == "detected" else 0.0)


def _fleet_samples(rec: Record) -> Iterable[Sample]:
    """Each node's verdict and its node record's samples (node = the Slurm node name); the fleet's robust
    statistics per throughput metric as one family each, `stat` = median | robust_bound | floor."""
    from trainready.report.fleet import fleet_nodes

    for n in fleet_nodes(rec):
        yield Sample(PREFIX + "fleet_node_accepted", "1 when the fleet verdict accepted the node, 0 when rejected",
                     _labels(node=n.node), 1.0 if n.accepted else 0.0)
        if n.report:
            yield from _report_samples(Record(rec.path, str(n.report.get("command", "node")), {**n.report, "host": n.node}))
    for st in rec.doc.get("stats", []) or []:
        if not isinstance(st, Mapping) or not st.get("judged", True):
            continue
        unit = str(st.get("unit", "1"))
        for key in ("median", "robust_bound", "floor"):
            yield Sample(metric_name(f"fleet_{st.get('metric')}", unit), f"fleet statistics of {st.get('metric')}",
                         _labels(stat=key), _num(st.get(key)) * UNITS.get(unit, ("", 1.0))[1])


SAMPLES: dict[str, Callable[[Record], Iterable[Sample]]] = {
    "node": _report_samples, "comm": _report_samples, "resume": _report_samples, "report": _report_samples,
    "selftest": _selftest_samples, "fleet": _fleet_samples,
}


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _escape(v: str) -> str:
    """A label value: backslash, double quote and line feed escaped (the text format's three); control
    characters and invalid code points replaced first (util/nodetext.py), the file being UTF-8."""
    return clean(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(v: str) -> str:
    """A HELP line: backslash and line feed escaped, nothing else (the text format defines no other escape)."""
    return clean(v).replace("\\", "\\\\").replace("\n", "\\n")


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def exposition(records: Sequence[Record]) -> str:
    """The text file of the records' samples."""
    return render(s for rec in records for s in SAMPLES.get(rec.kind, lambda _r: [])(rec))


def render(samples: Iterable[Sample]) -> str:
    """The text file: every family once (HELP + TYPE: counter for a name ending in `_total`, the exposition
    format's counter suffix; gauge otherwise), series deduplicated (first wins)."""
    families: dict[str, tuple[str, dict[tuple[tuple[str, str], ...], float]]] = {}
    for s in samples:
        fam = families.setdefault(s.name, (s.help, {}))
        fam[1].setdefault(s.labels, s.value)
    lines = []
    for name, (help_text, series) in families.items():
        lines.append(f"# HELP {name} {_escape_help(help_text)}")
        lines.append(f"# TYPE {name} {'counter' if name.endswith('_total') else 'gauge'}")
        for labels, value in series.items():
            lab = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
            lines.append(f"{name}{{{lab}}} {_fmt(value)}" if lab else f"{name} {_fmt(value)}")
    return "\n".join(lines) + "\n"


def write_prometheus(path: str, records: Sequence[Record]) -> None:
    """Temp file + rename in the target's directory (node_exporter's textfile collector rule)."""
    from trainready.util.atomic import atomic_write_text

    atomic_write_text(path, exposition(records))
