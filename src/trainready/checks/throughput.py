"""Question 2, third step: is every GPU as fast as its kind should be?

Per GPU, all GPUs at once: dense BF16 GEMM TFLOP/s and device-to-device copy
bandwidth, each as a fraction of the GPU's datasheet peak (`hardware.gpus`),
plus the spread across the node's GPUs, so a slow GPU stands out here and
across the fleet.  Timed with CUDA events after a warm-up; best of a few
repeats (a slow GPU is slow in every repeat; a one-off hiccup is not a finding).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from trainready.devices.parallel import local_devices, on_each_device
from trainready.hardware.gpus import GpuPeak, lookup
from trainready.suite.machine import BEYOND_NOISE, TIMING_ONLY, beyond_noise
from trainready.records import Level, Metric, Outcome, Status, Threshold
from trainready.spec.model import ComputeSpec
from trainready.suite.base import Check, CheckContext, register
from trainready.util.listing import first_of

GEMM_N = 8192  # M = N = K: 2·8192³ = 1.1 TFLOP per product, ~1.5 ms on an H100, large enough to saturate it
GEMM_ITERS = 50  # products per timed repeat (~0.1 s on an H100)
COPY_BYTES = 1 << 30  # 1 GiB per buffer: many times any L2 in the table (H100/H200: 50 MB), so HBM is what is timed
COPY_ITERS = 50
REPEATS = 3  # timed repeats; the best is reported
WARMUP = 5


def _timed(device: str, fn: Callable[[], object], iters: int) -> float:
    """Best-of-REPEATS seconds per call of fn(), timed with CUDA events on the current stream."""
    import torch

    for _ in range(WARMUP):
        fn()
    best = float("inf")
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / iters)  # elapsed_time is in ms
    return best


def measure_gemm(device: str, n: int = GEMM_N, iters: int = GEMM_ITERS) -> float:
    """Dense BF16 GEMM throughput in TFLOP/s (1e12): 2·n³ FLOP per n×n×n product (one multiply-add = 2 FLOP)."""
    import torch

    with torch.cuda.device(torch.device(device)):
        g = torch.Generator(device=device).manual_seed(60)
        a = torch.randn(n, n, device=device, dtype=torch.bfloat16, generator=g)
        b = torch.randn(n, n, device=device, dtype=torch.bfloat16, generator=g)
        c = torch.empty(n, n, device=device, dtype=torch.bfloat16)
        sec = _timed(device, lambda: torch.matmul(a, b, out=c), iters)
        del a, b, c
    return 2.0 * n**3 / sec / 1e12


def measure_copy(device: str, nbytes: int = COPY_BYTES, iters: int = COPY_ITERS) -> float:
    """Device-to-device copy bandwidth in GB/s (1e9): each copy reads nbytes and writes nbytes (2·nbytes moved)."""
    import torch

    with torch.cuda.device(torch.device(device)):
        src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
        dst = torch.empty_like(src)
        sec = _timed(device, lambda: dst.copy_(src), iters)
        del src, dst
    return 2.0 * nbytes / sec / 1e9


@dataclass(frozen=True)
class GpuFigures:
    gpu: int
    name: str  # product name as the driver reports it
    gemm_tflops: float
    copy_gbps: float


def judge(figures: Sequence[GpuFigures], peak: GpuPeak | None, spec: ComputeSpec) -> Outcome:
    """Pure verdict on measured figures: fractions of peak, absolute floors, spread across GPUs."""
    metrics: list[Metric] = []
    bad: list[str] = []
    for f in figures:
        for kind, value, unit, floor, key in (
            ("gemm_bf16", f.gemm_tflops, "TFLOP/s", spec.gemm_tflops_min, "gemm_tflops_min"),
            ("hbm_copy", f.copy_gbps, "GB/s", spec.hbm_gbps_min, "hbm_gbps_min"),
        ):
            thr = Threshold(">=", floor, unit, f"spec compute.{key}") if floor is not None else None
            metrics.append(Metric.of(kind, value, unit, thr, gpu=f.gpu, model=f.name))
            if floor is not None and not value >= floor:
                bad.append(f"GPU {f.gpu} {kind} {value:.0f} {unit} < floor {floor:.0f} (compute.{key})")
        if peak is not None:
            for kind, value, top, frac, key in (
                ("gemm_bf16", f.gemm_tflops, peak.bf16_tflops, spec.gemm_min_fraction, "gemm_min_fraction"),
                ("hbm_copy", f.copy_gbps, peak.hbm_gbps, spec.hbm_min_fraction, "hbm_min_fraction"),
            ):
                if frac is None:  # not judged (e.g. `spec init --measure` records, never judges)
                    metrics.append(Metric.of(f"{kind}_fraction_of_peak", value / top, "1", None, gpu=f.gpu, model=f.name))
                    continue
                ratio = value / top
                thr = Threshold(">=", frac, "1", f"spec compute.{key}; peak from {peak.source}")
                metrics.append(Metric.of(f"{kind}_fraction_of_peak", ratio, "1", thr, gpu=f.gpu, model=f.name))
                if not ratio >= frac:
                    bad.append(f"GPU {f.gpu} {kind} {value:.0f} = {ratio:.0%} of {peak.key} peak {top:.0f} < {frac:.0%}")
    for kind, vals in (("gemm_bf16", [(f.gemm_tflops, f.gpu) for f in figures]), ("hbm_copy", [(f.copy_gbps, f.gpu) for f in figures])):
        if len(vals) < 2:
            continue
        best, worst = max(vals, key=lambda v: (v[0], -v[1])), min(vals)  # ties: lowest GPU index
        spread = (best[0] - worst[0]) / best[0] if best[0] > 0 else float("nan")
        thr = (Threshold("<=", spec.spread_max, "1", "spec compute.spread_max: (best − worst) / best")
               if spec.spread_max is not None else None)
        metrics.append(Metric.of(f"{kind}_spread", spread, "1", thr, worst_gpu=worst[1], best_gpu=best[1]))
        if spec.spread_max is not None and not spread <= spec.spread_max:
            bad.append(f"GPU {worst[1]} {kind} {worst[0]:.0f} is {spread:.0%} below GPU {best[1]} (spread_max {spec.spread_max:.0%})")
    n = len(figures)
    g = min(f.gemm_tflops for f in figures) if figures else 0.0
    h = min(f.copy_gbps for f in figures) if figures else 0.0
    summary = f"{n} GPU(s): BF16 GEMM ≥ {g:.0f} TFLOP/s, HBM copy ≥ {h:.0f} GB/s"
    if bad:
        return Outcome(Status.FAIL, first_of(bad, 4), tuple(metrics),
                       remedy="A slow GPU: check clocks and throttle reasons (nvidia-smi -q -d PERFORMANCE,CLOCK), power cap, "
                       "temperature and PCIe/NVLink errors; compare with its neighbours and drain it if it stays slow.")
    if peak is None:
        name = figures[0].name if figures else "?"
        return Outcome(Status.WARN, f"{summary}; unknown GPU '{name}': no table peak, so no ratio to peak was judged",
                       tuple(metrics), remedy="Add the GPU to trainready.hardware.gpus or set compute.gemm_tflops_min / hbm_gbps_min.")
    return Outcome(Status.PASS, f"{summary} (≥ {g / peak.bf16_tflops:.0%} / {h / peak.hbm_gbps:.0%} of {peak.key} peak)", tuple(metrics))


def beyond_floors(first: Sequence[GpuFigures], again: Sequence[GpuFigures], peak: GpuPeak | None,
                  spec: ComputeSpec) -> bool:
    """Some GPU below its floor (the spec's absolute one or its fraction of the peak, the higher) in both runs, by
    more than 3x the two runs' difference (suite/machine.py beyond_noise): a GPU at half speed, not a busy host."""
    for f, g in zip(first, again):
        for a, b, floor, frac, top in ((f.gemm_tflops, g.gemm_tflops, spec.gemm_tflops_min, spec.gemm_min_fraction,
                                        peak.bf16_tflops if peak else None),
                                       (f.copy_gbps, g.copy_gbps, spec.hbm_gbps_min, spec.hbm_min_fraction,
                                        peak.hbm_gbps if peak else None)):
            floors = [x for x in (floor, frac * top if frac is not None and top else None) if x is not None]
            if floors and beyond_noise([a, b], max(floors)):
                return True
    return False


def apply_planted(figures: list[GpuFigures], value: str | None) -> list[GpuFigures]:
    """Planted fault `throughput.slow_gpu=I`: GPU I reports half its GEMM and copy figures."""
    if value is None:
        return figures
    return [replace(f, gemm_tflops=f.gemm_tflops / 2, copy_gbps=f.copy_gbps / 2) if str(f.gpu) == value.strip() else f for f in figures]


@register
class ThroughputCheck(Check):
    name = "throughput"
    title = "Per-GPU BF16 GEMM TFLOP/s and HBM copy GB/s vs datasheet peak"
    level = Level.STANDARD
    order = 60
    timeout_s = 300.0
    timing = True

    def skip_reason(self, ctx: CheckContext) -> str | None:
        """Skips only on a CPU spec: under a GPU spec a machine without usable GPUs fails (GpuUnusable)."""
        from trainready.devices.world import gpu_only_skip

        return gpu_only_skip(ctx.spec.gpu.count, "throughput probes are GPU-only")

    def run(self, ctx: CheckContext) -> Outcome:
        first = self._measure(ctx)
        if isinstance(first, Outcome):
            return first
        verdict = judge(first, lookup(first[0].name), ctx.spec.compute)
        if verdict.status != Status.FAIL:
            return verdict
        # A figure below its floor is measured again before it fails (every GPU, so the spread compares like with
        # like): a GPU slowed for seconds by other work on the host is not a fault; a slow GPU is slow again.
        again = self._measure(ctx)
        if isinstance(again, Outcome):
            return again
        best = [replace(f, gemm_tflops=max(f.gemm_tflops, g.gemm_tflops), copy_gbps=max(f.copy_gbps, g.copy_gbps))
                for f, g in zip(first, again)]  # each figure's best of the two runs, as REPEATS keeps the best
        second = judge(best, lookup(best[0].name), ctx.spec.compute)
        note = (f"measured again: the first run failed it too ({verdict.message})" if second.status == Status.FAIL
                else f"measured again: the first run's figures were below ({verdict.message}): not a fault")
        noise = {TIMING_ONLY: True, BEYOND_NOISE: beyond_floors(first, again, lookup(best[0].name), ctx.spec.compute)}
        return replace(second, message=f"{second.message}; {note}", details={**dict(second.details), **noise})

    def _measure(self, ctx: CheckContext) -> list[GpuFigures] | Outcome:
        """Every local GPU's figures (planted faults applied), or a FAIL naming the GPU whose probe failed."""
        import torch

        runs = on_each_device(lambda d: (measure_gemm(d), measure_copy(d)), local_devices(ctx.spec))
        errors = [f"{r.where}: {r.error}" for r in runs if r.error]
        if errors:
            return Outcome(Status.FAIL, "probe failed on " + "; ".join(errors), remedy="See the named GPU's error.")
        figures = [
            GpuFigures(int(r.device.split(":")[1]), torch.cuda.get_device_name(r.device), r.value[0], r.value[1])
            for r in runs if r.value is not None
        ]
        return apply_planted(figures, ctx.fault("throughput.slow_gpu"))
