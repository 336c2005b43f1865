"""Hardware facts: the table of known GPUs and their peaks, and a helper to run
the same function on every local device at once."""

from trainready.hardware.gpus import GPUS, GpuPeak, lookup, memory_gib_per_gpu

__all__ = ["GPUS", "GpuPeak", "lookup", "memory_gib_per_gpu"]
