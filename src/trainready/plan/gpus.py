"""GPU memory and peak dense BF16 throughput for the planner, read from the one GPU table
(`trainready.hardware.gpus`): NVML totals where known (GiB = 2^30 bytes), else the datasheet capacity
converted conservatively; peaks are NVIDIA's dense (no sparsity) BF16 figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainready.errors import UsageError


@dataclass(frozen=True)
class GpuInfo:
    name: str
    memory_gib: float  # per GPU, GiB: NVML's total where known (hardware/gpus.memory_gib_per_gpu)
    bf16_tflops: float  # dense BF16 peak, TFLOP/s (hardware/gpus.py)
    source: str


def known() -> list[str]:
    """The GPU names the table knows, for messages."""
    from trainready.hardware.gpus import GPUS

    return sorted({row.key for row in GPUS})


def lookup(name: str) -> GpuInfo:
    """Find a GPU by its name ('h200', 'NVIDIA H200', 'H100 80GB HBM3'); unknown → one-line UsageError."""
    from trainready.hardware import gpus as hw

    row = hw.lookup(name)
    mem = hw.memory_gib_per_gpu(name)
    if row is None or not mem:
        raise UsageError(f"--gpu '{name}': unknown GPU (known: {', '.join(known())}); give --gpu-mem-gib and "
                         "--peak-tflops instead")
    return GpuInfo(row.key, float(mem), float(row.bf16_tflops), row.source)


def from_spec(where: str) -> tuple[str, int, str]:
    """(GPU model, count, spec path) from a node spec's [gpu] section (`--spec PATH|example:NAME`).

    A spec without a GPU model (the CPU default) → one-line UsageError; so is a spec that does not load.
    """
    from trainready.spec.load import load_spec

    spec, path = load_spec(where)
    if not spec.gpu.model or spec.gpu.count == 0:
        raise UsageError(f"--spec {where}: the spec names no GPU (gpu.model = {spec.gpu.model!r}, gpu.count = "
                         f"{spec.gpu.count}); expected a GPU node spec such as example:h200-8x, or use --gpu")
    return spec.gpu.model, spec.gpu.count, path
