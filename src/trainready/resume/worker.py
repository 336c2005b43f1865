"""The rank side of the resume protocol: one function, three roles, each run in
fresh processes by `trainready.ranks.launch.launch`.

  A: steps 0→N uninterrupted; records its train state at K and its full state at N.
  B: steps 0→K, then saves a checkpoint at K (the run that gets "interrupted").
  C: a fresh start that first proves its state differs from A's at N, then loads
     K, checks each piece was restored (vs A at K), runs K→N, compares with A.

Planted faults (tests / `--plant`): skip_rng (every generator), skip_rng_python,
skip_rng_numpy (that generator only), skip_data, skip_lr leave that piece unrestored in C;
fill_disk fills the checkpoint's filesystem just before B saves.  Evidence files go to
`out_dir` (A's states, per rank).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from torch.distributed.checkpoint.state_dict import get_state_dict

from trainready.ckpt.load import load_checkpoint, resolve_latest
from trainready.ckpt.save import save_checkpoint
from trainready.data.sampler import SequenceSampler
from trainready.data.source import TokenSource, open_tokens
from trainready.ranks.launch import RankContext
from trainready.errors import CheckpointError, CheckpointWriteError
from trainready.resume import compare
from trainready.resume.job import RankJob
from trainready.train import rng
from trainready.train.loop import Trainer
from trainready.util.atomic import atomic_write_stream


def _local(t: torch.Tensor) -> torch.Tensor:
    """This rank's shard (FSDP2 DTensor → local tensor), copied to CPU."""
    if hasattr(t, "to_local"):
        t = t.to_local()
    return t.detach().to("cpu", copy=True)


def _save_atomic(obj: dict[str, Any], path: Path) -> None:
    """A's evidence for C: written whole or not at all (C must never compare against half a file)."""
    atomic_write_stream(path, lambda fh: torch.save(obj, fh))


def fill_disk(path: Path, leave: int = 64 << 10) -> None:
    """Planted fault: take all but `leave` bytes of the free space of path's filesystem (after the pre-check)."""
    import os

    from trainready.util.diskspace import free_bytes

    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, max(1, free_bytes(path.parent) - leave))
    finally:
        os.close(fd)


def light_state(tr: Trainer, sampler: SequenceSampler) -> dict[str, Any]:
    """step, LR scheduler, data position, RNG: what goes into train-rank-R.json."""
    return {
        "step": tr.step_no,
        "lr": {"last_epoch": tr.scheduler.last_epoch, "last_lr": [float(x) for x in tr.scheduler.get_last_lr()]},
        "data": sampler.state_dict(),
        "rng": rng.capture([tr.device.index or 0] if tr.device.type == "cuda" else []),
    }


def snapshot(tr: Trainer, sampler: SequenceSampler) -> dict[str, Any]:
    """light_state + every parameter and optimizer-state tensor, by FQN."""
    msd, osd = get_state_dict(tr.model, tr.optimizer)
    tensors = {f"param:{k}": _local(v) for k, v in msd.items()}
    for fqn, st in osd["state"].items():
        for key, v in st.items():
            if torch.is_tensor(v):
                tensors[f"optim:{fqn}.{key}"] = _local(v)
    return {"tensors": tensors, **light_state(tr, sampler)}


@dataclass
class _Training:
    """One rank's trainer, its data, and the loss at every step it ran."""

    tr: Trainer
    source: TokenSource
    sampler: SequenceSampler
    losses: dict[int, float] = field(default_factory=dict)

    def run(self, first: int, last: int, hook: Callable[[int], None] | None = None) -> None:
        for s in range(first, last):
            x, y = self.sampler.next_batch()
            self.losses[s + 1] = self.tr.step(x, y, self.source.path)
            if hook:
                hook(s + 1)


def resume_rank(ctx: RankContext, job: RankJob) -> dict[str, Any]:
    t0 = time.perf_counter()
    cfg, role, r, ws = job.train, job.role, ctx.rank, ctx.world_size
    tr = Trainer(cfg, ctx.device, ws, r)
    source = open_tokens(job.data, job.dtype)
    t = _Training(tr, source, SequenceSampler(source, tr.model_config.seq_len, cfg.batch_size, cfg.seed, r, ws))
    result: dict[str, Any] = {"role": role, "rank": r}
    ctx.stage(f"{role}: training")
    roles = {"A": _role_a, "B": _role_b, "C": _role_c}
    if role not in roles:
        raise ValueError(f"unknown role {role!r}")
    if not roles[role](ctx, job, t, result):
        return result  # a save or load that failed: reported whole, not as a crash
    losses = t.losses
    result.update(
        losses=losses,
        seconds=time.perf_counter() - t0,
        determinism=tr.determinism,
        nondeterministic_ops=tr.nondeterministic_warnings,
        precision=tr.precision,
        params=sum(p.numel() for p in tr.model.parameters()),
        device=str(ctx.device),
    )
    return result


def _role_a(ctx: RankContext, job: RankJob, t: _Training, result: dict[str, Any]) -> bool:
    """The uninterrupted run: its light state at the checkpoint step and its final state, for B and C."""
    r, k, out = ctx.rank, job.checkpoint_step, job.out_dir

    def at_k(step: int) -> None:
        if step == k:
            _save_atomic(light_state(t.tr, t.sampler), out / f"A-at-{k}-rank{r}.pt")

    t.run(0, job.train.steps, at_k)
    _save_atomic(snapshot(t.tr, t.sampler), out / f"A-final-rank{r}.pt")
    return True


def _role_b(ctx: RankContext, job: RankJob, t: _Training, result: dict[str, Any]) -> bool:
    """Train to the checkpoint step and save; False when the save failed (result['save_error'])."""
    r, ws, k, ckpt = ctx.rank, ctx.world_size, job.checkpoint_step, job.ckpt_dir
    t.run(0, k)
    if "fill_disk" in job.plants and r == 0:
        fill_disk(ckpt.parent / "planted-filler.bin")
    ctx.stage("B: saving")
    ts = time.perf_counter()
    st = light_state(t.tr, t.sampler)
    try:
        save_checkpoint(ckpt, k, t.tr.model, t.tr.optimizer, {"scheduler": t.tr.scheduler.state_dict(), **st}, r, ws)
    except CheckpointWriteError as exc:  # disk full / quota / I/O error: reported whole, not as a crash
        result["save_error"] = str(exc)
        return False
    result["save_s"] = time.perf_counter() - ts
    return True


def _role_c(ctx: RankContext, job: RankJob, t: _Training, result: dict[str, Any]) -> bool:
    """A fresh process: load the checkpoint (minus any planted omission), say what was restored, train on and
    compare the final state with A's; False when the checkpoint was refused (result['checkpoint_error'])."""
    r, ws, k, ckpt, plants, tr = ctx.rank, ctx.world_size, job.checkpoint_step, job.ckpt_dir, job.plants, t.tr
    a_final = torch.load(job.out_dir / f"A-final-rank{r}.pt", weights_only=True)
    result["differs_before_load"] = compare.differs_before_load(snapshot(tr, t.sampler), a_final, job.tolerance)
    ctx.stage("C: loading")
    tl = time.perf_counter()
    try:
        st = load_checkpoint(resolve_latest(ckpt), tr.model, tr.optimizer, r, ws)
    except CheckpointError as exc:
        result["checkpoint_error"] = str(exc)
        return False
    tr.step_no = int(st["step"])
    if "skip_lr" not in plants:
        tr.scheduler.load_state_dict(st["scheduler"])
    if "skip_data" not in plants:  # DataError if the checkpoint was saved on other data
        t.sampler.load_state_dict(st["data"], origin=str(resolve_latest(ckpt) / f"train-rank-{r}.json"))
    if "skip_rng" not in plants:
        rng.restore(st["rng"], skip=[g for g in ("python", "numpy") if f"skip_rng_{g}" in plants])
    result["load_s"] = time.perf_counter() - tl
    a_k = torch.load(job.out_dir / f"A-at-{k}-rank{r}.pt", weights_only=True)
    result["restored"] = compare.restored(light_state(tr, t.sampler), a_k)
    ctx.stage("C: training")
    t.run(k, job.train.steps)
    result["final"] = compare.compare_states(snapshot(tr, t.sampler), a_final, job.tolerance)
    return True
