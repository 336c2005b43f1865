"""What runs in each rank of the fingerprint check: the battery on this rank's GPU (or on the CPU, one
intra-op thread), then its group key and identity.  One rank per GPU, so every GPU runs in its own process with
its own cuBLAS handle and the workspace setting of the launch's environment."""

from __future__ import annotations

import time
from typing import Any

from trainready.fingerprint.battery import Plants, run_battery, settings_record
from trainready.fingerprint.key import cpu_key, gpu_key, key_id
from trainready.ranks.outcome import RankContext

SCHEMA = "trainready.fingerprint/1"
DRIFT_PLANT = "+planted-drift"  # appended to the torch version of a rank whose key drift is planted


def fingerprint_rank(ctx: RankContext, size: str, repeats: int, gpus: bool, plants: dict[str, Any],
                     left_out: dict[str, str], hash_threads: int = 1) -> dict[str, Any]:
    """The battery on this rank's device; `plants`: flip_rank, flip_at, intermittent_rank, shared, drift_rank."""
    import torch

    if gpus:
        torch.cuda.set_device(ctx.rank)
        device = f"cuda:{ctx.rank}"
        threads = torch.get_num_threads()
    else:
        device, threads = "cpu", 1
        torch.set_num_threads(1)  # one thread: the BLAS splits no reduction, so every rank adds in one order
    mine = Plants(flip=plants.get("flip_at", "gemm-bf16/random-7") if plants.get("flip_rank") == ctx.rank else "",
                  intermittent=plants.get("intermittent_rank") == ctx.rank, shared=bool(plants.get("shared")))
    ctx.stage("battery")
    res = run_battery(device, size, repeats, mine, hash_threads, left_out)
    ctx.stage("key")
    t_key = time.perf_counter()
    rec = settings_record(gpus, threads)
    key, ident = gpu_key(ctx.rank, rec) if gpus else cpu_key(ctx.rank, rec)
    if plants.get("drift_rank") in (ctx.rank, -2):  # -2: every rank of the node
        key["torch"] = f"{key['torch']}{DRIFT_PLANT}"
    return {"rank": ctx.rank, "device": device, **ident, "key": key, "key_id": key_id(key), "size": size,
            "repeats": repeats, **res, "key_s": round(time.perf_counter() - t_key, 4)}
