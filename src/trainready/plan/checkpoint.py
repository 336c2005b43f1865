"""Checkpoint size (whole and per rank), write time, and training time lost.

Contents of a full mixed-precision checkpoint, per parameter: bf16 weights 2 +
FP32 master weights 4 + Adam m 4 + Adam v 4 = 14 bytes (the ZeRO paper's K = 12
optimizer bytes + the 2-byte working copy; Rajbhandari et al. 2020 §3.1).
500 B parameters × 14 B = 7.0 TB for a complete checkpoint.
fp32/amp training has no separate master copy: 4 + 4 + 4 = 12 bytes.
"""

from __future__ import annotations

from trainready.plan.inputs import PlanInput
from trainready.plan.memory import params_per_gpu
from trainready.plan.quantity import Quantity

SRC = "Rajbhandari et al. 2020 §3.1 (K = 12) + working weights"


def checkpoint_quantities(inp: PlanInput) -> list[Quantity]:
    pr, par, hw = inp.precision, inp.parallel, inp.hardware
    n = inp.model.total_params
    full_b, w_b = pr.ckpt_full, pr.weight
    whole = n * full_b
    psi, st, d = params_per_gpu(inp), par.stage, par.shard
    # Largest writer: its model-parallel shard of the weights (one DP replica writes them unless ZeRO-3
    # shards them) plus its share of the optimizer states (sharded over N_d from stage 1 on).
    per_rank = w_b * psi / (d if st >= 3 else 1) + (full_b - w_b) * psi / (d if st >= 1 else 1)
    bw = hw.storage_gbps * 1e9  # B/s
    t_write = whole / bw
    interval = hw.ckpt_interval_min * 60.0
    lost = t_write / (interval + t_write)
    return [
        Quantity("checkpoint.weights_only", f"weights only ({w_b} B/param)", n * w_b, "B", f"N · {w_b}",
                 "working-precision weights"),
        Quantity("checkpoint.full", f"full: weights + master + Adam ({full_b} B/param)", whole, "B",
                 f"N · {full_b}" + (" = N · (2 + 4 + 4 + 4)" if full_b == 14 else " = N · (4 + 4 + 4)"), SRC),
        Quantity("checkpoint.per_rank", "largest per-rank file set", per_rank, "B",
                 f"{w_b}·Ψ{'/N_d' if st >= 3 else ''} + {full_b - w_b}·Ψ{'/N_d' if st >= 1 else ''}, "
                 f"Ψ per model-parallel rank, N_d = {d}",
                 "sharded writers (torch.distributed.checkpoint / Megatron dist-ckpt / DeepSpeed ZeRO files)"),
        Quantity("checkpoint.write_time", f"write time at {hw.storage_gbps:g} GB/s", t_write, "s",
                 "full / aggregate write bandwidth", "assumption: all writers together reach the given bandwidth"),
        Quantity("checkpoint.lost_share", f"training time lost (save every {hw.ckpt_interval_min:g} min)", lost, "1",
                 "write / (interval + write)", "synchronous save: training waits; async saves block only for the copy to host"),
    ]
