"""`spec init`: turn the accepted reference server into the spec the fleet is held to.

Expectations come from two sources: the manifest (what the machine *is*: GPU
model/count/memory, driver branch, torch/CUDA/NCCL/cuDNN/Python, image digest)
and node reports (what it *measured*: per-GPU GEMM TFLOP/s and copy GB/s,
collective busbw), one or several runs.  Each figure becomes a floor below the
reference's low figure over the runs (spec/floors.py): GEMM/HBM at `tolerance`
(the 80% rule), busbw at a fraction derived from the runs' measured spread and
the backend.  Whatever could not be written is said, with the reason
(`Derived.notes`), on screen and in the written TOML.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from trainready.errors import UsageError
from trainready.spec.floors import EFFICIENCY_MIN_MARGIN, MIN_MARGIN, Floor, comm_floor, compute_floor
from trainready.spec.model import CommSpec, ComputeSpec, GpuSpec, NodeSpec, ResumeSpec, SoftwareSpec

# Metric names written by the checks (checks/throughput.py, checks/comm_sweep.py).
GEMM_METRIC = "gemm_bf16"
COPY_METRIC = "hbm_copy"
BUSBW_METRIC = "comm_busbw_avg"
EFFICIENCY_METRIC = "comm_efficiency"  # busbw / same-run ring send/recv busbw (comm/evaluate.py)

# Training packages whose versions the fleet is held to when the reference has them installed
# (names as probe/software.py's KEY_PACKAGES reports them in the manifest's software.packages).
TRAINING_PACKAGES = ("megatron-core", "transformer-engine", "deepspeed", "flash-attn", "apex")


def _known(v: Any) -> bool:
    return v is not None and not (isinstance(v, str) and v.startswith("unavailable"))


def _prefix_version(v: Any, parts: int) -> str | None:
    """'2.13.0+cu130' → '2.13.0' (parts=3); '13.0' → '13.0'. Unknown → None."""
    if not _known(v):
        return None
    m = re.match(r"^(\d+(?:\.\d+){0,%d})" % (parts - 1), str(v))
    return m.group(1) if m else None


def _metrics(report: Mapping[str, Any] | None, name: str, notes: list[str] | None = None,
             run: str = "") -> list[dict[str, Any]]:
    """Positive finite figures named `name`, from checks that did not fail or error: a floor taken from
    a broken reference would hold the fleet to a broken figure.  What is left out is said in `notes`."""
    if not report:
        return []
    out = []
    for r in report.get("results", []):
        found = [m for m in r.get("metrics", []) if m.get("name") == name]
        if r.get("status") in ("fail", "error"):
            if found and notes is not None:
                notes.append(f"{run}check '{r.get('name')}' {r.get('status')}ed ({str(r.get('message', ''))[:120]}): "
                             f"no {name} floor from it")
            continue
        for m in found:
            v = m.get("value")
            if isinstance(v, (int, float)) and math.isfinite(v) and v > 0:
                out.append(m)
            elif notes is not None:
                lab = dict(m.get("labels", {}))
                why = ("busbw is 0 by definition at 1 rank" if v == 0 and str(lab.get("ranks")) == "1" else
                       "no message size in the averaging window" if not isinstance(v, (int, float)) or not math.isfinite(v)
                       else "not a positive figure")
                notes.append(f"{run}{name} {lab.get('op', '')}@{lab.get('ranks', '?')} = {v}: {why}; no floor")
    return out


def _sig(x: float, digits: int = 4) -> float:
    """Round to significant figures (a 0.004 GB/s CPU figure must not become a 0.0 floor)."""
    return float(f"{x:.{digits}g}")


def _int_label(v: Any) -> int | None:
    """A metric label read back as a positive integer (records store labels as strings), else None."""
    try:
        n = int(str(v))
    except ValueError:
        return None
    return n if n > 0 else None


def _training_packages(found: Any) -> dict[str, str]:
    """{name: whole public version} of the TRAINING_PACKAGES the reference has ('2.8.0+40c69e7' → '2.8.0')."""
    if not isinstance(found, Mapping):
        return {}
    return {p: str(found[p]).split("+")[0] for p in TRAINING_PACKAGES if _known(found.get(p)) and str(found[p]).strip()}


@dataclass(frozen=True)
class Derived:
    """What `spec init` writes, how each floor was derived, and what it could not write (and why)."""

    spec: NodeSpec
    floors: tuple[Floor, ...]
    notes: tuple[str, ...]  # one line per expectation not written, with the reason
    said: tuple[str, ...] = ()  # where other derived values came from

    def comment(self) -> str:
        """TOML comment lines for the head of the written spec."""
        lines = [f"# floor {f.describe()}" for f in self.floors] + [f"# {x}" for x in self.said]
        lines += [f"# NOT WRITTEN: {n}" for n in self.notes]
        return "".join(" ".join(ln.split()) + "\n" for ln in lines)  # one line each: a message may hold newlines


def spec_from_machine(
    manifest: Mapping[str, Any],
    report: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    tolerance: float = 0.8,
    name: str | None = None,
) -> NodeSpec:
    return derive(manifest, report, tolerance, name).spec


def _reports(report: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None) -> list[Mapping[str, Any]]:
    if report is None:
        return []
    return [report] if isinstance(report, Mapping) else list(report)


def derive(
    manifest: Mapping[str, Any],
    report: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    tolerance: float = 0.8,
    name: str | None = None,
) -> Derived:
    """The spec the reference machine (`manifest`) sets, with floors from one or more of its records
    (`report`: several runs give a robust low figure and the spread; spec/floors.py)."""
    reports = _reports(report)
    notes: list[str] = []
    host = _section(manifest, "host")
    nvml = _section(_section(manifest, "gpu"), "nvml")
    gpus = nvml.get("gpus", []) or []
    gpu = _gpu_spec(nvml, gpus)
    software = _software_spec(manifest, host, notes)
    floors: list[Floor] = []
    compute = _compute_spec(reports, tolerance, gpu.count, floors, notes)
    comm = _comm_spec(reports, tolerance, floors, notes)
    ranks, why = _resume_ranks(gpu.count, reports)
    hostname = host.get("hostname", "reference")
    runs = f"{len(reports)} run(s)" if reports else "no measurement"
    spec = NodeSpec(
        name=name or f"{hostname}-reference",
        description=(
            f"Written by `trainready spec init` from {hostname} at {manifest.get('collected_at', '?')} "
            f"({runs}); floors at a fraction of the reference's low figure (see the comments above)."
        ),
        gpu=gpu,
        software=software,
        compute=compute,
        comm=comm,
        resume=dataclasses.replace(ResumeSpec(), ranks=ranks),
    )
    return Derived(spec, tuple(floors), tuple(notes), (f"resume.ranks = {ranks}: {why}",))


def _resume_ranks(gpus: int, reports: list[Mapping[str, Any]]) -> tuple[int, str]:
    """The reference's GPU count; on a CPU node, the gloo ranks its resume check ran on (a passed
    `resume` result in a record), else the CPU default."""
    if gpus:
        return gpus, "the reference's GPU count"
    for rep in reports:
        passed = any(r.get("name") == "resume" and r.get("status") == "pass" for r in rep.get("results", []))
        ranks = _section(_section(rep, "spec"), "resume").get("ranks")
        if passed and isinstance(ranks, int) and ranks >= 1:
            return ranks, "the gloo ranks the reference's resume check passed on (CPU node)"
    default = ResumeSpec().ranks
    return default, f"the CPU default ({default}; no passed resume result in the records)"


def _section(d: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    v = d.get(key)
    return v if isinstance(v, Mapping) else {}


def _gpu_spec(nvml: Mapping[str, Any], gpus: list[dict[str, Any]]) -> GpuSpec:
    models = sorted({g.get("name", "") for g in gpus})
    mems = [g.get("memory_total_mib") for g in gpus if isinstance(g.get("memory_total_mib"), int)]
    driver = nvml.get("driver_version")
    return GpuSpec(
        count=len(gpus),
        model=models[0].replace("NVIDIA ", "") if len(models) == 1 and models[0] else None,
        # Floor at 99% of the reference's smallest board: NVML totals differ by a few MiB across VBIOS versions.
        memory_gib_min=round(min(mems) / 1024 * 0.99, 1) if mems else None,
        driver_branch=str(driver).split(".")[0] if _known(driver) else None,
    )


def _software_spec(manifest: Mapping[str, Any], host: Mapping[str, Any], notes: list[str]) -> SoftwareSpec:
    sw = _section(manifest, "software")
    cont = _section(manifest, "container")
    digest = cont.get("image_digest") if _known(cont.get("image_digest")) else None
    if digest is None and cont:
        notes.append(f"software.image_digest: {cont.get('image_digest_source') or 'the image digest is unknown here'}")
    return SoftwareSpec(
        # The whole public version ('2.13.0a0' from '2.13.0a0+8145d630e8'): a pre-release is its own version.
        torch=str(sw["torch"]).split("+")[0] if _known(sw.get("torch")) else None,
        cuda=_prefix_version(sw.get("torch_cuda"), 2),
        nccl=_prefix_version(sw.get("nccl"), 3),
        cudnn=_prefix_version(sw.get("cudnn"), 1),
        python=_prefix_version(sw.get("python"), 2),
        image_digest=digest,
        os=str(host["os_version"]) if _known(host.get("os_version")) else "",  # os-release NAME + VERSION_ID
        packages=_training_packages(sw.get("packages")),
    )


def _compute_spec(reports: list[Mapping[str, Any]], tolerance: float, gpus: int, floors: list[Floor],
                  notes: list[str]) -> ComputeSpec:
    """GEMM/HBM floors: each run's worst GPU, then the low figure over runs x tolerance."""
    out: dict[str, float] = {}
    for metric, key, unit in ((GEMM_METRIC, "gemm_tflops_min", "TFLOP/s"), (COPY_METRIC, "hbm_gbps_min", "GB/s")):
        per_run = [[m["value"] for m in _metrics(r, metric, notes, _run(i, reports))] for i, r in enumerate(reports)]
        worst = [min(v) for v in per_run if v]
        if worst:
            f = compute_floor(f"compute.{key}", worst, tolerance, unit)
            floors.append(f)
            out[key] = _sig(f.floor)
        elif reports and gpus:
            notes.append(f"compute.{key}: no {metric} figure in the record(s) (the throughput check did not run "
                         "or did not pass); not written")
    return ComputeSpec(gemm_tflops_min=out.get("gemm_tflops_min"), hbm_gbps_min=out.get("hbm_gbps_min"))


def _run(i: int, reports: list[Mapping[str, Any]]) -> str:
    return f"run {i + 1}: " if len(reports) > 1 else ""


def _mean_fraction(per_run: list[dict[str, float]], expected: Mapping[str, float], backends: Mapping[str, str],
                   tolerance: float, floors: list[Floor], notes: list[str], what: str = "busbw") -> float | None:
    """comm.min_fraction_all_ops (what='busbw') or comm.min_fraction_efficiency: each run's geometric mean over
    ops of figure / expectation (the judged quantity, comm/evaluate.judge_all_ops / judge_efficiency), then the
    floor rule of one figure (spec/floors.py) over those means.  Written when every run measured the same >= 2
    ops with a non-zero figure."""
    key = "comm.min_fraction_all_ops" if what == "busbw" else "comm.min_fraction_efficiency"
    keys = sorted(k for k in expected if expected[k] > 0)
    runs = [r for r in per_run if r]
    if len(keys) < 2 or not runs:
        return None
    if any(sorted(k for k in r if r[k] > 0) != keys for r in runs):
        notes.append(f"{key}: the runs measured different ops; not written")
        return None
    means = [math.exp(sum(math.log(r[k] / expected[k]) for k in keys) / len(keys)) for r in runs]
    f = comm_floor(f"all {len(keys)} ops (geometric mean of {what} / expectation)", means, backends[keys[0]],
                   tolerance, unit="x expectation", margins=MIN_MARGIN if what == "busbw" else EFFICIENCY_MIN_MARGIN)
    floors.append(f)
    return round(f.floor, 3)


def _per_run(reports: list[Mapping[str, Any]], metric: str, notes: list[str]
             ) -> tuple[list[dict[str, float]], dict[str, str], set[tuple[int, int]]]:
    """Each run's figures of `metric` by 'op@ranks', the backend of each key, and the averaging windows seen."""
    backends: dict[str, str] = {}
    windows = set()
    per_run: list[dict[str, float]] = []  # run -> 'op@ranks' -> figure (the comm check writes one per op)
    for i, rep in enumerate(reports):
        per_run.append({})
        for m in _metrics(rep, metric, notes, _run(i, reports)):
            lab = dict(m.get("labels", {}))
            op, ranks = lab.get("op"), _int_label(lab.get("ranks"))
            if not (op and ranks):
                notes.append(f"{_run(i, reports)}{metric} figure without op/ranks labels {lab}: no floor")
                continue
            if lab.get("dtype", "float") != "float":
                notes.append(f"{_run(i, reports)}{op}@{ranks} in {lab.get('dtype')}: expectations are for float "
                             "(comm.expected_busbw_gbps has no dtype); no floor")
                continue
            # The expectation is the reference's figure at its world size ('op@N': a 2-GPU figure says
            # nothing about 8 GPUs).
            per_run[-1][f"{op}@{ranks}"] = float(m["value"])
            backends[f"{op}@{ranks}"] = str(lab.get("backend", ""))
            lo, hi = _int_label(lab.get("from_bytes")), _int_label(lab.get("to_bytes"))
            if lo and hi:
                windows.add((lo, hi))
    return per_run, backends, windows


def _by_key(per_run: list[dict[str, float]]) -> dict[str, list[float]]:
    values: dict[str, list[float]] = {}  # 'op@ranks' -> its figures in run order
    for run in per_run:
        for key, v in run.items():
            values.setdefault(key, []).append(v)
    return values


def _comm_spec(reports: list[Mapping[str, Any]], tolerance: float, floors: list[Floor],
               notes: list[str]) -> CommSpec:
    """busbw per 'op@ranks' over the runs; one averaging window for all; collective efficiency the same way."""
    per_run, backends, windows = _per_run(reports, BUSBW_METRIC, notes)
    if len(windows) > 1:
        raise UsageError(f"--from-report: busbw figures averaged over different sizes {sorted(windows)}; "
                         "expected records of the same sweep (`trainready node` runs, or `trainready comm` "
                         "runs with the same -b/-e/-f)")
    values = _by_key(per_run)
    expected: dict[str, float] = {}
    fractions: dict[str, float] = {}
    for key, vals in values.items():
        f = comm_floor(key, vals, backends[key], tolerance)
        floors.append(f)
        expected[key] = _sig(f.low)
        fractions[key] = f.fraction
    if reports and not values and not any("busbw" in n for n in notes):
        notes.append("comm.expected_busbw_gbps: no busbw figure in the record(s) (the comm check did not run); "
                     "not written")
    all_ops = _mean_fraction(per_run, expected, backends, tolerance, floors, notes)
    eff_runs, eff_backends, _ = _per_run(reports, EFFICIENCY_METRIC, [])  # absent from older records: no note
    # The expected efficiency is the reference's median (only the mean over ops is judged, with its own floor).
    eff_expected = {k: _sig(statistics.median(v)) for k, v in _by_key(eff_runs).items()}
    eff_floor = _mean_fraction(eff_runs, eff_expected, eff_backends, tolerance, floors, notes, what="efficiency")
    return CommSpec(min_fraction=tolerance, expected_busbw_gbps=expected, min_fraction_by_op=fractions,
                    min_fraction_all_ops=all_ops, expected_efficiency=eff_expected if eff_floor else {},
                    min_fraction_efficiency=eff_floor,
                    expected_sizes_bytes=tuple(windows.pop()) if windows else ())
