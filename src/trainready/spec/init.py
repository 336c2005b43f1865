"""`spec init`: turn the accepted reference server into the spec the fleet is held to.

Expectations come from two sources: the manifest (what the machine *is*: GPU
model/count/memory, driver branch, torch/CUDA/NCCL/cuDNN/Python, image digest)
and node reports (what it *measured*: per-GPU GEMM TFLOP/s and copy GB/s,
collective busbw and efficiency: spec/init_comm.py), one or several runs.  Each figure becomes a floor below the
reference's low figure over the runs (spec/floors.py): GEMM/HBM at `tolerance`
(the 80% rule), busbw at a fraction derived from the runs' measured spread and
the backend.  Whatever could not be written is said, with the reason
(`Derived.notes`), on screen and in the written TOML.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from trainready.spec.figures import metrics as _metrics
from trainready.spec.figures import run_label as _run
from trainready.spec.figures import sig as _sig
from trainready.spec.floors import Floor, compute_floor
from trainready.spec.init_comm import comm_spec as _comm_spec
from trainready.spec.init_fabric import fabric_spec
from trainready.spec.init_fingerprint import fingerprint_spec
from trainready.spec.model import ComputeSpec, GpuSpec, HostSpec, NodeSpec, ResumeSpec, SoftwareSpec

# Metric names written by the checks (checks/throughput.py, checks/comm.py).
GEMM_METRIC = "gemm_bf16"
COPY_METRIC = "hbm_copy"

# Training packages whose versions the fleet is held to when the reference has them installed
# (names as manifest/software.py's KEY_PACKAGES reports them in the manifest's software.packages).
TRAINING_PACKAGES = ("megatron-core", "transformer-engine", "deepspeed", "flash-attn", "apex")


def _known(v: Any) -> bool:
    return v is not None and not (isinstance(v, str) and v.startswith("unavailable"))


def _prefix_version(v: Any, parts: int) -> str | None:
    """'2.13.0+cu130' → '2.13.0' (parts=3); '13.0' → '13.0'. Unknown → None."""
    if not _known(v):
        return None
    m = re.match(r"^(\d+(?:\.\d+){0,%d})" % (parts - 1), str(v))
    return m.group(1) if m else None


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
    said: list[str] = []
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
        host=_host_spec(manifest, notes),
        fingerprint=fingerprint_spec(reports, notes, said),
        fabric=fabric_spec(manifest, notes),
    )
    return Derived(spec, tuple(floors), tuple(notes), (f"resume.ranks = {ranks}: {why}", *said))


def _host_spec(manifest: Mapping[str, Any], notes: list[str]) -> HostSpec:
    """host.pins: the reference's value of every host setting that must match (host.match), so every node is
    held to the reference's; a setting the reference could not read is not pinned (said in the notes)."""
    from trainready.hostsettings.pins import DEFAULT_MATCH, matches
    from trainready.manifest.hostset import values

    settings = values(manifest.get("host_settings"))
    pins: dict[str, str | int | float] = {}
    unread = []
    for key, value in settings.items():
        if not matches(key, DEFAULT_MATCH):
            continue
        if _known(value):
            pins[key] = value
        else:
            unread.append(key)
    if unread:
        notes.append(f"host.pins: not pinned, the reference could not read them: {', '.join(unread)}")
    if not settings:
        notes.append("host.pins: the reference's manifest has no host_settings (written by an older trainready)")
    return HostSpec(pins=pins)


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
