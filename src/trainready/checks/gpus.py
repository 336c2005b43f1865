"""Question 1: can the GPUs be used?  Count and model match the spec, every GPU
is healthy, and the GPUs torch sees are the GPUs NVML sees (checked on
the host, then inside the container: the two views must correspond).

`judge_gpus` is pure over `NodeFacts` so facts captured on real nodes
(tests/data/*.json) can be replayed; `GpusCheck.run` only gathers and calls it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainready.suite.base import Check, CheckContext, register
from trainready.manifest import is_unavailable, why
from trainready.manifest import facts as facts_mod
from trainready.manifest.facts import NodeFacts
from trainready.manifest.torch_gpus import norm_uuid
from trainready.records import Level, Metric, Outcome, Status, Threshold
from trainready.spec.model import GpuSpec
from trainready.util.listing import first_of

R_COUNT = ("Compare `nvidia-smi -L` on the host with the container's GPU request (docker --gpus all, "
           "NVIDIA_VISIBLE_DEVICES, Slurm --gpus) and look in dmesg for Xid 79 ('GPU has fallen off the bus').")
R_ECC = ("Drain the node and reset the GPU (nvidia-smi -r -i N) or reboot; if uncorrectable errors return, "
         "open an RMA (NVIDIA 'GPU Memory Error Management' guide).")
R_REMAP_PENDING = "A row remap waits for a GPU reset: reset the GPU (nvidia-smi -r -i N) or reboot, then rerun."
R_REMAP_FAILED = "Row remapping failed on this GPU: it needs service (RMA)."
R_UUID = ("torch (the CUDA runtime) sees different GPUs than NVML: check CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES "
          "and the NVIDIA Container Toolkit configuration.")
R_TORCH = ("torch cannot use CUDA although NVML sees GPUs: install a CUDA build of torch matching the driver "
           "(`trainready env` shows torch.version.cuda and the driver's CUDA version).")


@dataclass
class _Verdict:
    fails: list[str] = field(default_factory=list)
    warns: list[str] = field(default_factory=list)
    remedies: list[str] = field(default_factory=list)

    def fail(self, msg: str, remedy: str) -> None:
        self.fails.append(msg)
        if remedy not in self.remedies:
            self.remedies.append(remedy)

    def warn(self, msg: str) -> None:
        self.warns.append(msg)

    unread: bool = False  # some health fact could not be read


def _health(f: NodeFacts, v: _Verdict, metrics: list[Metric]) -> None:
    for g in f.nvml.gpus:
        tag = f"GPU {g.index} ({g.uuid})"
        vol = g.ecc_uncorrected_volatile
        if isinstance(vol, int):
            metrics.append(Metric.of("ecc_uncorrected_volatile", vol, "errors", Threshold("<=", 0, "errors", "no uncorrected ECC"), gpu=g.index))
            if vol > 0:
                v.fail(f"{tag}: {vol} uncorrected ECC error(s) since driver load", R_ECC)
        agg = g.ecc_uncorrected_aggregate
        if isinstance(agg, int) and agg > 0 and not (isinstance(vol, int) and vol > 0):
            v.warn(f"{tag}: {agg} uncorrected ECC error(s) in the board's lifetime (none since driver load)")
        if g.remap_pending is True:
            v.fail(f"{tag}: row remap pending", R_REMAP_PENDING)
        if g.remap_failed is True:
            v.fail(f"{tag}: row remap failed", R_REMAP_FAILED)
        if g.ecc_mode == "disabled":
            v.warn(f"{tag}: ECC disabled")
        # Health that cannot be read is not health: say which fact and why, never "healthy".
        unread = [f"{name} ({val})" for name, val in (
            ("uncorrected ECC count", vol), ("row remap pending", g.remap_pending), ("row remap failed", g.remap_failed),
        ) if isinstance(val, str) and val.startswith("unavailable")]
        if unread:
            v.warn(f"{tag}: cannot read {', '.join(unread)}")
            v.unread = True


def _uuids(f: NodeFacts, v: _Verdict) -> str:
    """Match torch's GPUs to NVML's; returns a phrase for the pass message."""
    t = f.torch
    if not t.available:
        v.fail(f"NVML sees {len(f.nvml.gpus)} GPU(s) but torch cannot use them: {why(t.reason)}", R_TORCH)
        return ""
    if any(is_unavailable(d.uuid) for d in t.devices):
        if len(t.devices) != len(f.nvml.gpus) and t.cuda_visible_devices is None:
            v.fail(f"torch sees {len(t.devices)} GPU(s), NVML {len(f.nvml.gpus)}", R_UUID)
        v.warn(f"UUIDs not compared: {t.devices[0].uuid}")
        return f"torch sees {len(t.devices)} (counts only)"
    nv = {norm_uuid(g.uuid) for g in f.nvml.gpus}
    th = {norm_uuid(d.uuid) for d in t.devices}
    extra = sorted(th - nv)
    if extra:
        v.fail(f"torch sees GPU(s) NVML does not: {', '.join(extra[:4])}", R_UUID)
    if t.cuda_visible_devices is None:
        missing = sorted(nv - th)
        if missing:
            v.fail(f"CUDA_VISIBLE_DEVICES is unset but torch does not see NVML's GPU(s): {', '.join(missing[:4])}", R_UUID)
        return f"torch sees the same {len(th)} UUIDs"
    return f"torch sees {len(th)} of them (CUDA_VISIBLE_DEVICES={t.cuda_visible_devices})"


def judge_gpus(spec: GpuSpec, f: NodeFacts) -> Outcome:
    details = {"facts": f.to_json()}
    if not f.nvml.ok:
        if spec.count == 0:
            return Outcome(Status.SKIP, f"no GPU expected (spec gpu.count = 0) and none readable ({why(str(f.nvml.error))})", details=details)
        return Outcome(
            Status.FAIL,
            f"expected {spec.count} × {spec.model or 'GPU'}, found none: {why(str(f.nvml.error))}",
            (Metric.of("gpu_count", 0, "GPUs", Threshold("==", spec.count, "GPUs", "spec gpu.count")),),
            remedy="Install/load the NVIDIA driver (nvidia-smi must work) and, in a container, run it with GPU access "
            "(NVIDIA Container Toolkit, --gpus all).",
            details=details,
        )
    v = _Verdict()
    gpus = f.nvml.gpus
    metrics = [Metric.of("gpu_count", len(gpus), "GPUs", Threshold("==", spec.count, "GPUs", "spec gpu.count"))]
    if spec.count == 0 and gpus:
        v.warn(f"spec expects no GPU (gpu.count = 0) but NVML sees {len(gpus)}: judge them with a GPU spec, e.g. --spec example:h200-8x")
    elif len(gpus) != spec.count:
        v.fail(f"expected {spec.count} GPU(s), NVML sees {len(gpus)}", R_COUNT)
    if spec.model:
        wrong = [f"GPU {g.index} is '{g.name}'" for g in gpus if spec.model.lower() not in str(g.name).lower()]
        if wrong:
            v.fail(f"expected model '{spec.model}': {'; '.join(wrong[:4])}", "Run this spec on the right node type, or fix gpu.model in the spec.")
    for g in gpus:
        if isinstance(g.memory_total_mib, int):
            gib = g.memory_total_mib / 1024  # MiB → GiB
            thr = Threshold(">=", spec.memory_gib_min, "GiB", "spec gpu.memory_gib_min") if spec.memory_gib_min else None
            metrics.append(Metric.of("gpu_memory_total", round(gib, 2), "GiB", thr, gpu=g.index))
            if thr and not thr.holds(gib):
                v.fail(f"GPU {g.index}: {gib:.1f} GiB < {spec.memory_gib_min} GiB", "A smaller SKU or MIG slice: check the node type.")
    _health(f, v, metrics)
    seen = _uuids(f, v)
    if v.fails:
        msg = first_of(v.fails, 6)
        return Outcome(Status.FAIL, msg, tuple(metrics), " ".join(v.remedies), details)
    names = sorted({str(g.name) for g in gpus})
    mem = sorted({g.memory_total_mib for g in gpus if isinstance(g.memory_total_mib, int)})
    base = f"{len(gpus)} × {', '.join(names)}" + (f" ({', '.join(map(str, mem))} MiB)" if mem else "")
    base += (", health not fully readable" if v.unread else ", healthy (no uncorrected ECC, no pending/failed row remap)")
    base += f"; {seen}"
    if v.warns:
        return Outcome(Status.WARN, base + "; " + "; ".join(v.warns[:4]), tuple(metrics),
                       "Review the warnings; they do not fail acceptance.", details)
    return Outcome(Status.PASS, base, tuple(metrics), details=details)


def node_facts(ctx: CheckContext, fault: str) -> NodeFacts:
    """Gathered facts, or (planted-fault tests) a captured facts file."""
    path = ctx.fault(fault)
    return facts_mod.load(path) if path else facts_mod.gather()


@register
class GpusCheck(Check):
    name = "gpus"
    title = "GPUs visible, healthy, same in torch and NVML"
    level = Level.QUICK
    order = 10
    timeout_s = 120.0

    def run(self, ctx: CheckContext) -> Outcome:
        return judge_gpus(ctx.spec.gpu, node_facts(ctx, "gpus.facts"))
