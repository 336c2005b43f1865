"""The reference training loop: AdamW, warm-up + cosine LR, gradient clipping,
BF16 autocast on GPU (fp32 on CPU), dropout on, determinism applied and recorded.

One `Trainer` per rank.  Wrapping: DDP, or FSDP2 `fully_shard` (torch >= 2.6;
older releases ship it as `torch.distributed._composable.fsdp`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from trainready.errors import DataError, UsageError
from trainready.workload import rng
from trainready.workload.model import GPT, PRESETS, ModelConfig, preset_for_vocab

# cuBLAS needs a fixed workspace to be deterministic (CUDA docs, "Reproducibility":
# CUBLAS_WORKSPACE_CONFIG=:4096:8); read when the first cuBLAS handle is made.
CUBLAS_WORKSPACE = ":4096:8"


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a run; the same config + seed gives the same run."""

    preset: str = "tiny"
    vocab_size: int = 0  # 0 = the preset's
    seed: int = 1234
    batch_size: int = 8  # sequences per rank per step
    steps: int = 100  # total steps of the schedule (the LR schedule spans these)
    warmup_steps: int = 10  # linear warm-up (Goyal et al. 2017, arXiv:1706.02677)
    lr: float = 3e-3  # peak LR; tiny models tolerate a high one
    min_lr_ratio: float = 0.1  # cosine floor as a fraction of the peak (Chinchilla-style 10x decay)
    weight_decay: float = 0.1  # AdamW decoupled decay (Loshchilov & Hutter 2019)
    beta1: float = 0.9
    beta2: float = 0.95  # GPT-3 paper's Adam betas (Brown et al. 2020, Appendix B)
    grad_clip: float = 1.0  # global L2 norm (GPT-3, Appendix B)
    precision: str = "auto"  # "fp32" | "bf16" | "auto" (bf16 on GPU, fp32 on CPU)
    deterministic: bool = True
    mode: str = "ddp"  # "ddp" | "fsdp"
    input_noise: float = 0.015  # fraction of input tokens replaced by random ids per step (see `noise_inputs`)

    def model_config(self) -> ModelConfig:
        if self.preset not in PRESETS:
            raise UsageError(f"unknown model preset '{self.preset}' (expected one of: {', '.join(PRESETS)})")
        return preset_for_vocab(self.preset, self.vocab_size)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def lr_multiplier(step: int, warmup: int, total: int, min_ratio: float) -> float:
    """Linear warm-up to 1, then cosine to `min_ratio` (SGDR, Loshchilov & Hutter 2017, eq. 5)."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def noise_inputs(x: np.ndarray, rate: float, vocab: int) -> np.ndarray:
    """Random-token input noise, as pretraining pipelines apply for robustness/masking.

    rate 0.015 = BERT's random-token share: 15% of positions chosen, 10% of those get a
    random id (Devlin et al. 2019, arXiv:1810.04805, section 3.1).  Half the noised
    positions come from each of two sources, so that every host generator is drawn from
    on every step and a restore that skipped one changes the result:
      source 1: positions from NumPy's global generator, ids from Python's `random`;
      source 2: positions and ids from torch's CPU generator (as Hugging Face's
                DataCollatorForLanguageModeling draws them).
    x: [B, T] int64 input ids (targets are left clean); returns a noised copy.
    """
    if rate <= 0:
        return x
    out = x.copy()
    flat = out.reshape(-1)  # a view: [B*T]
    k = max(1, round(rate * flat.size / 2))  # positions per source
    pos = np.random.choice(flat.size, size=k, replace=False)  # NumPy global RNG
    flat[pos] = [random.randrange(vocab) for _ in range(k)]  # Python random
    tpos = torch.randint(0, flat.size, (k,)).numpy()  # torch CPU generator
    flat[tpos] = torch.randint(0, vocab, (k,)).numpy()
    return out


def apply_determinism(on: bool, device: torch.device) -> dict[str, Any]:
    """Apply the determinism settings and return what was set (for the record)."""
    if on and device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    # warn_only: an op without a deterministic kernel warns (counted in the record)
    # instead of aborting; a real nondeterminism then shows up as a resume mismatch.
    torch.use_deterministic_algorithms(on, warn_only=True)
    torch.backends.cudnn.deterministic = on
    torch.backends.cudnn.benchmark = not on
    return {
        "use_deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "CUBLAS_WORKSPACE_CONFIG": os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""),
    }


def _fully_shard() -> Any:
    try:
        from torch.distributed.fsdp import fully_shard  # torch >= 2.6
    except ImportError:
        try:
            from torch.distributed._composable.fsdp import fully_shard  # torch 2.4-2.5
        except ImportError:
            return None
    return fully_shard


def per_tensor_allreduce(group, bucket):  # type: ignore[no-untyped-def]  # DDP rejects string annotations here
    """DDP comm hook: every gradient all-reduced on its own, then averaged.

    DDP rebuilds its buckets after the first iteration (in the order gradients became ready); a
    restarted process's first step runs on the initial layout.  One all-reduce over a whole bucket
    sums each element in an order set by its position in the bucket (ring chunks), so over more
    than 2 ranks the resumed step differed from the uninterrupted one in the last bit (measured:
    ~1e-8 on 4 and 8 gloo ranks).  Per tensor, the order depends on the tensor alone.
    """
    works = [dist.all_reduce(g, group=group, async_op=True) for g in bucket.gradients()]  # views of the buffer
    for w in works:
        w.wait()
    fut = torch.futures.Future()  # type: ignore[var-annotated]
    fut.set_result(bucket.buffer().div_(dist.get_world_size(group)))
    return fut


class Trainer:
    """Model + AdamW + LambdaLR on one rank. `step(x, y)` runs one optimizer step."""

    def __init__(self, cfg: TrainConfig, device: torch.device, world_size: int, rank: int) -> None:
        self.cfg = cfg
        self.device = device
        self.rank = rank
        self.step_no = 0
        prec = cfg.precision if cfg.precision != "auto" else ("bf16" if device.type == "cuda" else "fp32")
        self.precision = prec
        self.determinism = apply_determinism(cfg.deterministic, device)
        self.nondeterministic_warnings: list[str] = []
        mcfg = cfg.model_config()
        self.model_config = mcfg
        rng.seed_all(cfg.seed)  # identical init on every rank
        model: torch.nn.Module = GPT(mcfg).to(device)
        if cfg.mode == "fsdp":
            fully_shard = _fully_shard()
            if fully_shard is None:
                raise UsageError("--mode fsdp: this torch has no FSDP2 fully_shard (needs torch >= 2.4)")
            kw: dict[str, Any] = {}
            if device.type == "cpu":
                from torch.distributed.device_mesh import init_device_mesh

                kw["mesh"] = init_device_mesh("cpu", (world_size,))
            for blk in model.blocks:  # type: ignore[union-attr]
                fully_shard(blk, **kw)
            fully_shard(model, **kw)
        elif cfg.mode == "ddp":
            if dist.is_initialized():
                from torch.nn.parallel import DistributedDataParallel as DDP

                model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
                model.register_comm_hook(None, per_tensor_allreduce)
        else:
            raise UsageError(f"--mode {cfg.mode}: expected ddp or fsdp")
        self.model = model
        self.optimizer = torch.optim.AdamW(
            model.parameters(), lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), weight_decay=cfg.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: lr_multiplier(s, cfg.warmup_steps, cfg.steps, cfg.min_lr_ratio)
        )
        rng.seed_all(cfg.seed + 1 + rank)  # per-rank dropout stream

    @property
    def lr(self) -> float:
        return float(self.scheduler.get_last_lr()[0])

    def step(self, x: np.ndarray, y: np.ndarray, source: str = "") -> float:
        """One step on a [B, T] int64 batch; returns this rank's loss (fp32 scalar)."""
        vocab = self.model_config.vocab_size
        top = int(x.max(initial=0))
        if top >= vocab or int(y.max(initial=0)) >= vocab:
            raise DataError(f"{source}: token id {max(top, int(y.max()))} >= model vocab_size {vocab}; pass --vocab-size")
        x = noise_inputs(x, self.cfg.input_noise, vocab)
        xt = torch.from_numpy(x).to(self.device, non_blocking=True)
        yt = torch.from_numpy(y).to(self.device, non_blocking=True)
        self.model.train()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if self.precision == "bf16":
                with torch.autocast(self.device.type, dtype=torch.bfloat16):
                    _, loss = self.model(xt, yt)
            else:
                _, loss = self.model(xt, yt)
            assert loss is not None
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
        for w in caught:
            text = str(w.message)
            if "deterministic" in text and text not in self.nondeterministic_warnings:
                self.nondeterministic_warnings.append(text.splitlines()[0][:200])
        self.step_no += 1
        return float(loss.detach().float().item())
