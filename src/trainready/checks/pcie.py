"""The GPU's path to the host: pinned host→device and device→host copy bandwidth per GPU, each direction, judged
against its PCIe link's rate (hardware/pcie.py) and against the node's other GPUs, with the link's generation
and width read through NVML while the copies run (an idle link drops its generation to save power).

A link trained down (Gen5 x16 → Gen4 x8) halves data loading and checkpoint staging while every compute check
passes; GPU clouds' acceptance lists measure it (nvbandwidth's host_to_device / device_to_host copies).  One GPU
at a time, so a GPU is measured alone on its link (not against its neighbours for the host's memory).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Callable, Iterator

from trainready.hardware.pcie import GpuCopy, Link, judge, link_rate_gbps, read_link
from trainready.records import BEYOND_NOISE, TIMING_ONLY, Level, Outcome, Status
from trainready.suite.base import Check, CheckContext, register

COPY_BYTES = 256 * 2**20  # bytes per copy (256 MiB): ~4 ms at Gen5 x16's 63 GB/s, far above any staging buffer
ITERS = 20  # copies per timed repeat: ~85 ms of traffic at Gen5 x16, long enough to read the link under it
REPEATS = 3  # timed repeats; the best is kept (a slow link is slow in every repeat)
WARMUP = 2
SETTLE_S = 0.01  # seconds after the copies are queued before NVML is asked for the link (they are in flight)


@contextmanager
def nvml_handles() -> Iterator[Callable[[int], tuple[Any, Any] | str]]:
    """A function torch device index → (pynvml, handle), matched by UUID (CUDA_VISIBLE_DEVICES and CUDA's
    device order can differ from NVML's), or the reason there is none."""
    import torch

    try:
        import pynvml as nv

        nv.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - the copies are still measured; the link is 'not read'
        reason = f"NVML: {exc}"  # the lambda keeps this, not `exc` (unbound once the except block ends)
        yield lambda i: reason
        return

    def handle(i: int) -> tuple[Any, Any] | str:
        uuid = getattr(torch.cuda.get_device_properties(i), "uuid", None)
        try:
            h = nv.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}".encode()) if uuid is not None else nv.nvmlDeviceGetHandleByIndex(i)
            return nv, h
        except Exception as exc:  # noqa: BLE001
            return f"NVML handle of cuda:{i}: {exc}"

    try:
        yield handle
    finally:
        nv.nvmlShutdown()


def _timed(copy: Callable[[], object], under_load: Callable[[], Link]) -> tuple[float, Link]:
    """Best seconds per copy over REPEATS, and the link as read while the last repeat's copies ran."""
    import torch

    for _ in range(WARMUP):
        copy()
    torch.cuda.synchronize()
    best, link = float("inf"), Link(error="not read")
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(ITERS):
            copy()  # non_blocking from pinned memory: queued, the host returns at once
        end.record()
        time.sleep(SETTLE_S)
        link = under_load()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / ITERS)  # elapsed_time is in ms
    return best, link


def measure(index: int, nvml: Callable[[int], tuple[Any, Any] | str], nbytes: int = COPY_BYTES) -> GpuCopy:
    """Pinned H2D and D2H GB/s (1e9 B/s) of cuda:index, and its link under the H2D load."""
    import torch

    found = nvml(index)
    under_load = (lambda: Link(error=found)) if isinstance(found, str) else (lambda: read_link(*found))
    with torch.cuda.device(index):
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        dev = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{index}")
        h2d_s, link = _timed(lambda: dev.copy_(host, non_blocking=True), under_load)
        d2h_s, _ = _timed(lambda: host.copy_(dev, non_blocking=True), under_load)
        del host, dev
    return GpuCopy(index, nbytes / h2d_s / 1e9, nbytes / d2h_s / 1e9, link)


def measure_all(indices: list[int]) -> list[GpuCopy]:
    with nvml_handles() as nvml:
        return [measure(i, nvml) for i in indices]


@register
class PcieCheck(Check):
    name = "pcie"
    title = "Per-GPU pinned host↔device copy GB/s vs the PCIe link's rate; the link under load"
    level = Level.QUICK
    order = 55
    timeout_s = 120.0
    timing = True  # the machine's state kept; a copy below its floor on a busy machine is not judged (base.py)

    def skip_reason(self, ctx: CheckContext) -> str | None:
        """Skips only on a CPU spec: under a GPU spec a machine without usable GPUs fails (GpuUnusable)."""
        from trainready.devices.world import gpu_only_skip

        return gpu_only_skip(ctx.spec.gpu.count, "the host↔device copy over PCIe is GPU-only")

    def run(self, ctx: CheckContext) -> Outcome:
        from trainready.devices.parallel import local_devices

        devices = local_devices(ctx.spec)
        figures = measure_all([int(d.split(":")[1]) for d in devices])
        if not figures:
            return Outcome(Status.ERROR, "no GPU measured")
        h = ctx.spec.host
        out = judge(figures, h.pcie_min_fraction, h.pcie_spread_max)
        return replace(out, details={**dict(out.details), **noise_marks(figures, h.pcie_min_fraction)})


def noise_marks(figures: list[GpuCopy], min_fraction: float | None) -> dict[str, bool]:
    """What a FAIL rests on (suite/machine.py): copies alone, unless a link read trained down (an NVML fact); beyond
    noise where a copy is below half its floor (what a link at half its width gives: no busy host halves a DMA
    copy's bandwidth)."""
    low = False
    for f in figures:
        rate = link_rate_gbps(f.link.gen_max, f.link.width_max)
        if rate is not None and min_fraction is not None:
            low = low or min(f.h2d_gbps, f.d2h_gbps) < 0.5 * min_fraction * rate
    return {TIMING_ONLY: not any(f.link.trained_down for f in figures), BEYOND_NOISE: low}
