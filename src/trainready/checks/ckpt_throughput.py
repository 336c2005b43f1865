"""Checkpoint save/load GB/s against a raw write+fsync of the same bytes on the same directory.

Run by `trainready resume --throughput` (not part of `trainready node`, so not registered);
the measurement and its verdict are ckpt/throughput.py's.
"""

from __future__ import annotations

from trainready.records import Level, Outcome
from trainready.suite.base import Check, CheckContext

# Bytes of state saved when the command does not say (ThroughputOptions.nbytes): 2 GiB on a GPU,
# 256 MiB on the CPU (a CPU run measures the disk path, not a GPU's staging copy).
GPU_BYTES = 2 << 30
CPU_BYTES = 256 << 20


class CkptThroughputCheck(Check):
    """Used by `trainready resume --throughput` (not part of `trainready node`)."""

    name = "ckpt_throughput"
    title = "Checkpoint save/load GB/s vs raw write+fsync on the same directory"
    level = Level.STANDARD
    order = 41
    timeout_s = 600.0

    def run(self, ctx: CheckContext) -> Outcome:
        import torch

        from trainready.ckpt.throughput import judge, measure
        from trainready.devices.world import require_gpus

        require_gpus(ctx.spec)  # under a GPU spec: GpuUnusable (FAIL) rather than a CPU-staged figure
        opts = ctx.options.throughput
        directory = opts.directory or ctx.workdir
        nbytes = opts.nbytes or (GPU_BYTES if torch.cuda.is_available() else CPU_BYTES)
        return judge(measure(directory, nbytes, opts.rounds), directory)
