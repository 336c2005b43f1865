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
from pathlib import Path
from typing import Any, Callable

import torch
import torch._dynamo  # noqa: F401  the first optimizer a process builds imports it (torch/_compile.py
# `_disable_dynamo` on Optimizer.__init__): ~1 CPU s per rank process on a 2-core x86 VM; imported with this
# module, it is paid once by the ranks' forkserver that preloads it (ranks/forkserver.py) and inherited by each rank
from torch.distributed.checkpoint.state_dict import get_state_dict

from trainready.ckpt.load import load_checkpoint, resolve_latest
from trainready.ckpt.save import save_checkpoint
from trainready.data.sampler import SequenceSampler
from trainready.data.source import open_tokens
from trainready.ranks.launch import RankContext
from trainready.errors import CheckpointError, CheckpointWriteError
from trainready.resume import compare
from trainready.resume.job import RankJob
from trainready.workload import rng
from trainready.workload.loop import Trainer
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


def wait_for_go(ctx: RankContext, go: Path, run: str, poll_s: float = 0.02) -> bool:
    """C's processes start beside A and B and build their model; here they wait for the parent's word that
    `run` ended (the file `go`: "run", or "stop" when a run failed).  Bounded by the launch's limit."""
    ctx.stage(f"C: waiting for run {run}")
    while not go.exists():
        time.sleep(poll_s)
    return go.read_text().strip() == "run"


def _resume_c(ctx: RankContext, tr: Trainer, sampler: SequenceSampler, run: Callable[[int, int], None],
              result: dict[str, Any], go: Path | None, out: Path, ckpt: Path, k: int, plants: tuple[str, ...],
              tol: compare.Tolerance) -> bool:
    """Run C: wait for B (`go`), keep its fresh state, load K, note what was restored, train K→N; then wait for
    A (`go`-A) and compare all three with A's files.  False when it stopped early (result says why)."""
    r, ws = ctx.rank, ctx.world_size
    tw = time.perf_counter()
    if go is not None and not wait_for_go(ctx, go, "B"):
        result["stopped"] = True
        return False
    result["wait_b_s"] = time.perf_counter() - tw
    fresh = snapshot(tr, sampler)  # before the load: must differ from A's final state (compared below)
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
        sampler.load_state_dict(st["data"], origin=str(resolve_latest(ckpt) / f"train-rank-{r}.json"))
    if "skip_rng" not in plants:
        rng.restore(st["rng"], skip=[g for g in ("python", "numpy") if f"skip_rng_{g}" in plants])
    result["load_s"] = time.perf_counter() - tl
    at_k = light_state(tr, sampler)
    ctx.stage("C: training")
    run(k, tr.cfg.steps)
    final = snapshot(tr, sampler)
    tw = time.perf_counter()
    if go is not None and not wait_for_go(ctx, go.with_name(go.name + "-A"), "A"):
        result["stopped"] = True
        return False
    result["wait_a_s"] = time.perf_counter() - tw
    a_final = torch.load(out / f"A-final-rank{r}.pt", weights_only=True)
    result["differs_before_load"] = compare.differs_before_load(fresh, a_final, tol)
    result["restored"] = compare.restored(at_k, torch.load(out / f"A-at-{k}-rank{r}.pt", weights_only=True))
    result["final"] = compare.compare_states(final, a_final, tol)
    result["compare_s"] = time.perf_counter() - tw - result["wait_a_s"]
    return True


def resume_rank(ctx: RankContext, job: RankJob) -> dict[str, Any]:
    t0 = time.perf_counter()
    cfg, role, plants, tol = job.train, job.role, job.plants, job.tolerance
    r, ws, k = ctx.rank, ctx.world_size, job.checkpoint_step
    out, ckpt = job.out_dir, job.ckpt_dir
    tr = Trainer(cfg, ctx.device, ws, r)
    source = open_tokens(job.data, job.dtype)
    sampler = SequenceSampler(source, tr.model_config.seq_len, cfg.batch_size, cfg.seed, r, ws)
    losses: dict[int, float] = {}
    result: dict[str, Any] = {"role": role, "rank": r, "build_s": time.perf_counter() - t0, "steps_s": 0.0}

    def run(first: int, last: int, hook: Callable[[int], None] | None = None) -> None:
        ts = time.perf_counter()
        for s in range(first, last):
            x, y = sampler.next_batch()
            losses[s + 1] = tr.step(x, y, source.path)
            if hook:
                hook(s + 1)
        result["steps_s"] += time.perf_counter() - ts

    ctx.stage(f"{role}: training")
    if role == "A":
        def at_k(step: int) -> None:
            if step == k:
                _save_atomic(light_state(tr, sampler), out / f"A-at-{k}-rank{r}.pt")

        run(0, cfg.steps, at_k)
        _save_atomic(snapshot(tr, sampler), out / f"A-final-rank{r}.pt")
    elif role == "B":
        run(0, k)
        if "fill_disk" in plants and r == 0:
            fill_disk(ckpt.parent / "planted-filler.bin")
        ctx.stage("B: saving")
        ts = time.perf_counter()
        st = light_state(tr, sampler)
        try:
            save_checkpoint(ckpt, k, tr.model, tr.optimizer, {"scheduler": tr.scheduler.state_dict(), **st}, r, ws)
        except CheckpointWriteError as exc:  # disk full / quota / I/O error: reported whole, not as a crash
            result["save_error"] = str(exc)
            return result
        result["save_s"] = time.perf_counter() - ts
    elif role == "C":
        if not _resume_c(ctx, tr, sampler, run, result, job.go, out, ckpt, k, plants, tol):
            return result
    else:
        raise ValueError(f"unknown role {role!r}")
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
