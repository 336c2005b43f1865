"""GPU memory and peak dense BF16 throughput for the planner.

Uses the project's hardware table (`trainready.hardware.gpus`); this minimal
table is only the fallback for a name that table does not know.  Memory is what NVML reports
as total (GiB = 2^30 bytes); peaks are NVIDIA datasheet dense (no sparsity) BF16.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainready.errors import UsageError

GIB = 2**30


@dataclass(frozen=True)
class GpuInfo:
    name: str
    memory_gib: float  # NVML total memory, GiB
    bf16_tflops: float  # dense BF16 peak, TFLOP/s (datasheet)
    source: str


_TABLE: dict[str, GpuInfo] = {
    # NVML totals: A100 81920 MiB, H100 SXM 81559 MiB, H200 143771 MiB, B200 183359 MiB (nvidia-smi on the part).
    "A100": GpuInfo("A100-SXM4-80GB", 81920 / 1024, 312.0, "NVIDIA A100 datasheet: 312 TFLOPS BF16 dense"),
    "H100": GpuInfo("H100-SXM5-80GB", 81559 / 1024, 989.0, "NVIDIA H100 datasheet: 1,979 TFLOPS BF16 with sparsity / 2"),
    "H200": GpuInfo("H200-SXM-141GB", 143771 / 1024, 989.0, "NVIDIA H200 datasheet: 1,979 TFLOPS BF16 with sparsity / 2"),
    "B200": GpuInfo("B200-180GB", 183359 / 1024, 2250.0, "NVIDIA HGX B200 datasheet: 4.5 PFLOPS BF16 with sparsity / 2"),
}


def known() -> list[str]:
    try:
        from trainready.hardware.gpus import GPUS

        return sorted({row.key for row in GPUS})
    except ImportError:  # pragma: no cover - the shared table ships with the package
        return sorted(_TABLE)


def lookup(name: str) -> GpuInfo:
    """Find a GPU by its name ('h200', 'NVIDIA H200', 'H100 80GB HBM3'); unknown → one-line UsageError."""
    try:  # the project's shared table: NVML totals where known, datasheet dense BF16 peaks
        from trainready.hardware import gpus as hw
    except ImportError:  # pragma: no cover
        hw = None  # type: ignore[assignment]
    if hw is not None:
        row = hw.lookup(name)
        mem = hw.memory_gib_per_gpu(name)
        if row is not None and mem:
            return GpuInfo(row.key, float(mem), float(row.bf16_tflops), row.source)
    up = name.upper()
    for key, info in _TABLE.items():
        if key in up:
            return info
    raise UsageError(f"--gpu '{name}': unknown GPU (known: {', '.join(known())}); give --gpu-mem-gib and --peak-tflops instead")


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
