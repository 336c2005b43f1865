"""The rank side of the cross-environment checkpoint test (`trainready resume --save-only / --load-from`).

  save: train 0→K, save a checkpoint at K (the same save as the resume protocol's), then keep
        training K→N and record that continuation (per-step losses, final parameters, optimizer
        state, LR, data position, RNG) as the reference the other environment must reproduce.
  load: a fresh start in this environment loads K, restores LR, data position and RNG, trains
        K→N and compares every component with the saver's reference, within the declared tolerance.

Planted differences (tests; recorded in the checkpoint's compat.json): `dtype=NAME` saves that
parameter as bfloat16, `missing=NAME` leaves it out, `rng=torch_cpu` saves torch's CPU generator
state in another format (the 16-byte Philox layout of a CUDA generator).
"""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch._dynamo  # noqa: F401  paid once in the ranks' forkserver, not per rank: see resume/worker.py
from torch.distributed.checkpoint.state_dict import get_state_dict

from trainready.ckpt.load import load_checkpoint, resolve_latest
from trainready.ckpt.save import save_state
from trainready.data.sampler import SequenceSampler
from trainready.data.source import open_tokens
from trainready.ranks.launch import RankContext
from trainready.errors import CheckpointError, DataError
from trainready.resume import compare
from trainready.resume.worker import _save_atomic, light_state, snapshot
from trainready.workload import rng
from trainready.workload.loop import TrainConfig, Trainer

PHILOX_STATE_BYTES = 16  # a CUDA generator's state: seed (8 bytes) + offset (8 bytes)


def reference_path(directory: Path, rank: int) -> Path:
    return directory / f"reference-rank{rank}.pt"


def _plant_model_state(msd: dict[str, Any], plants: dict[str, str]) -> dict[str, Any]:
    out = dict(msd)
    if plants.get("dtype"):
        name = plants["dtype"] if plants["dtype"] in out else next(iter(out))
        out[name] = out[name].detach().to(torch.bfloat16)
    if plants.get("missing"):
        out.pop(plants["missing"] if plants["missing"] in out else next(iter(out)), None)
    return out


def _plant_rng(state: dict[str, Any], plants: dict[str, str]) -> dict[str, Any]:
    if plants.get("rng"):
        state = {**state, "rng": {**state["rng"], "torch_cpu": base64.b64encode(bytes(PHILOX_STATE_BYTES)).decode()}}
    return state


def compat_rank(ctx: RankContext, role: str, train: dict[str, Any], data: str, dtype: str | None, directory: str,
                checkpoint_step: int, atol: float = 0.0, rtol: float = 0.0, plants: dict[str, str] | None = None
                ) -> dict[str, Any]:
    t0 = time.perf_counter()
    cfg = TrainConfig(**train)
    r, ws, k = ctx.rank, ctx.world_size, checkpoint_step
    root = Path(directory)
    tr = Trainer(cfg, ctx.device, ws, r)
    source = open_tokens(data, dtype)
    sampler = SequenceSampler(source, tr.model_config.seq_len, cfg.batch_size, cfg.seed, r, ws)
    losses: dict[int, float] = {}
    result: dict[str, Any] = {"role": role, "rank": r, "precision": tr.precision, "determinism": tr.determinism}

    def run(first: int, last: int) -> None:
        for s in range(first, last):
            x, y = sampler.next_batch()
            losses[s + 1] = tr.step(x, y, source.path)

    if role == "save":
        ctx.stage("save: training to the checkpoint")
        run(0, k)
        ctx.stage("save: saving")
        st = _plant_rng(light_state(tr, sampler), plants or {})
        msd, osd = get_state_dict(tr.model, tr.optimizer)
        save_state(root / "ckpt", k, {"model": _plant_model_state(msd, plants or {}), "optim": osd},
                   {"scheduler": tr.scheduler.state_dict(), **st}, r, ws)
        result["rng_state"] = st["rng"]
        ctx.stage("save: reference continuation")
        run(k, cfg.steps)
        _save_atomic(snapshot(tr, sampler), reference_path(root, r))
    elif role == "load":
        _load_and_continue(ctx, tr, sampler, root, k, compare.Tolerance(atol, rtol), result, lambda: run(k, cfg.steps))
    else:
        raise ValueError(f"unknown role {role!r}")
    result.update(losses=losses, seconds=time.perf_counter() - t0, nondeterministic_ops=tr.nondeterministic_warnings)
    return result


def _load_and_continue(ctx: RankContext, tr: Trainer, sampler: SequenceSampler, root: Path, k: int,
                       tol: compare.Tolerance, result: dict[str, Any], cont: Callable[[], None]) -> None:
    r, ws = ctx.rank, ctx.world_size
    ctx.stage("load: loading")
    ckpt = root / "ckpt"
    try:
        st = load_checkpoint(resolve_latest(ckpt), tr.model, tr.optimizer, r, ws)
        tr.step_no = int(st["step"])
        tr.scheduler.load_state_dict(st["scheduler"])
        sampler.load_state_dict(st["data"], origin=str(resolve_latest(ckpt) / f"train-rank-{r}.json"))
        rng.restore(st["rng"])
    except (CheckpointError, DataError, ValueError, RuntimeError) as exc:
        result["load_error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        return
    after = light_state(tr, sampler)
    result["restored"] = {c["name"]: c for c in (compare.compare_scalar(x, after, st, compare.Tolerance())
                                                  for x in ("step", "data", "rng"))}
    ctx.stage("load: continuing")
    cont()
    ref = torch.load(reference_path(root, r), weights_only=True)
    result["final"] = compare.compare_states(snapshot(tr, sampler), ref, tol)
