"""`spec init`: turn the accepted reference server into the spec the fleet is held to.

Expectations come from two sources: the manifest (what the machine *is*: GPU
model/count/memory, driver branch, torch/CUDA/NCCL/cuDNN/Python, image digest)
and a node report (what it *measured*: per-GPU GEMM TFLOP/s and copy GB/s,
collective busbw).  Measured figures become floors at `tolerance` × the
reference's worst figure, so a node matching the reference passes and one
20% slower (seed 003's 80% rule, the default tolerance) fails.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Mapping

from trainready.errors import UsageError
from trainready.spec.model import CommSpec, ComputeSpec, GpuSpec, NodeSpec, ResumeSpec, SoftwareSpec

# Metric names written by the checks (checks/throughput.py, checks/comm_sweep.py).
GEMM_METRIC = "gemm_bf16"
COPY_METRIC = "hbm_copy"
BUSBW_METRIC = "comm_busbw_avg"

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


def _metrics(report: Mapping[str, Any] | None, name: str) -> list[dict[str, Any]]:
    """Positive finite figures named `name`, from checks that did not fail or error:
    a floor taken from a broken reference would hold the fleet to a broken figure."""
    if not report:
        return []
    out = []
    for r in report.get("results", []):
        if r.get("status") in ("fail", "error"):
            continue
        for m in r.get("metrics", []):
            v = m.get("value")
            if m.get("name") == name and isinstance(v, (int, float)) and math.isfinite(v) and v > 0:
                out.append(m)
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


def spec_from_machine(
    manifest: Mapping[str, Any],
    report: Mapping[str, Any] | None = None,
    tolerance: float = 0.8,
    name: str | None = None,
) -> NodeSpec:
    ctx = report.get("context") if report is not None else None
    # "planted_faults": what comm records written before "planted" existed called it.
    planted = (ctx.get("planted") or ctx.get("planted_faults")) if isinstance(ctx, Mapping) else None
    if planted:  # faults or replayed facts files (`--plant`): a test record, not a measurement of a machine
        raise UsageError(f"--from-report: the record was made with --plant {', '.join(map(str, planted))}; "
                         "a test record cannot be a reference (rerun `trainready node --json` without --plant)")
    host = manifest.get("host", {}) if isinstance(manifest.get("host"), Mapping) else {}
    gpu_sec = manifest.get("gpu", {}) if isinstance(manifest.get("gpu"), Mapping) else {}
    nvml = gpu_sec.get("nvml", {}) if isinstance(gpu_sec.get("nvml"), Mapping) else {}
    gpus = nvml.get("gpus", []) or []
    models = sorted({g.get("name", "") for g in gpus})
    mems = [g.get("memory_total_mib") for g in gpus if isinstance(g.get("memory_total_mib"), int)]
    driver = nvml.get("driver_version")
    gpu = GpuSpec(
        count=len(gpus),
        model=models[0].replace("NVIDIA ", "") if len(models) == 1 and models[0] else None,
        # Floor at 99% of the reference's smallest board: NVML totals differ by a few MiB across VBIOS versions.
        memory_gib_min=round(min(mems) / 1024 * 0.99, 1) if mems else None,
        driver_branch=str(driver).split(".")[0] if _known(driver) else None,
    )
    sw = manifest.get("software", {}) if isinstance(manifest.get("software"), Mapping) else {}
    cont = manifest.get("container", {}) if isinstance(manifest.get("container"), Mapping) else {}
    software = SoftwareSpec(
        # The whole public version ('2.13.0a0' from '2.13.0a0+8145d630e8'): a pre-release is its own version.
        torch=str(sw["torch"]).split("+")[0] if _known(sw.get("torch")) else None,
        cuda=_prefix_version(sw.get("torch_cuda"), 2),
        nccl=_prefix_version(sw.get("nccl"), 3),
        cudnn=_prefix_version(sw.get("cudnn"), 1),
        python=_prefix_version(sw.get("python"), 2),
        image_digest=cont.get("image_digest") if _known(cont.get("image_digest")) else None,
        os=str(host["os_version"]) if _known(host.get("os_version")) else "",  # os-release NAME + VERSION_ID
        packages=_training_packages(sw.get("packages")),
    )
    gemm = [m["value"] for m in _metrics(report, GEMM_METRIC)]
    copy = [m["value"] for m in _metrics(report, COPY_METRIC)]
    compute = ComputeSpec(
        gemm_tflops_min=_sig(min(gemm) * tolerance) if gemm else None,
        hbm_gbps_min=_sig(min(copy) * tolerance) if copy else None,
    )
    busbw: dict[str, float] = {}
    windows = set()
    for m in _metrics(report, BUSBW_METRIC):
        lab = dict(m.get("labels", {}))
        op, ranks = lab.get("op"), _int_label(lab.get("ranks"))
        if op and ranks and lab.get("dtype", "float") == "float":
            # The expectation is the reference's figure at its world size ('op@N': a 2-GPU figure says
            # nothing about 8 GPUs); the check applies comm.min_fraction.
            busbw[f"{op}@{ranks}"] = _sig(float(m["value"]))
            lo, hi = _int_label(lab.get("from_bytes")), _int_label(lab.get("to_bytes"))
            if lo and hi:
                windows.add((lo, hi))
    if len(windows) > 1:
        raise UsageError(f"--from-report: busbw figures averaged over different sizes {sorted(windows)}; "
                         "expected one sweep's figures (one record of `trainready node` or `trainready comm`)")
    comm = CommSpec(min_fraction=tolerance, expected_busbw_gbps=busbw,
                    expected_sizes_bytes=tuple(windows.pop()) if windows else ())
    hostname = host.get("hostname", "reference")
    return NodeSpec(
        name=name or f"{hostname}-reference",
        description=(
            f"Written by `trainready spec init` from {hostname} at {manifest.get('collected_at', '?')}; "
            f"measured floors at {tolerance:g} x the reference's worst figure."
        ),
        gpu=gpu,
        software=software,
        compute=compute,
        comm=comm,
        resume=dataclasses.replace(ResumeSpec(), ranks=1),
    )
