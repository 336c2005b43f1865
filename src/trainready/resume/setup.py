"""From a spec + options to a validated `ProtocolConfig`: device, world, data.

Shared by `trainready resume` and the node check so the two run the same thing.
Bad data raises `DataError` here, in the parent, before any rank starts.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from trainready.data.corpus import write_sample_corpus
from trainready.data.sampler import SequenceSampler
from trainready.data.source import check_vocab, open_tokens
from trainready.errors import UsageError
from trainready.resume.compare import Tolerance
from trainready.resume.protocol import PLANTS, ProtocolConfig
from trainready.spec.model import NodeSpec, ResumeSpec
from trainready.train.loop import TrainConfig
from trainready.util.devices import cuda_count, require_gpus

# Files up to this many tokens are scanned whole for out-of-vocabulary ids up
# front (~0.1 s per 16 Mi tokens); larger ones are checked batch by batch.
FULL_SCAN_TOKENS = 1 << 26
# Largest --vocab-size accepted: 2**24 ids, ~65x the largest vocabularies in use
# (Gemma's 256,000); beyond it the embedding alone would be a mistake, not a model.
MAX_VOCAB = 1 << 24


def device_world(ranks: int, force_cpu: bool = False, spec: NodeSpec | None = None) -> tuple[int, str]:
    """(ranks, backend): NCCL when GPUs are usable, else gloo. Under a GPU spec (gpu.count > 0) never
    gloo: no usable GPU is `GpuUnusable` (the check fails, naming why) and `--cpu` is a usage error."""
    if ranks < 1:
        raise UsageError(f"--ranks {ranks}: expected >= 1")
    want = spec.gpu.count if spec is not None else 0
    if force_cpu and want > 0:
        raise UsageError(f"--cpu: the spec expects {want} GPU(s) (gpu.count = {want}); judge a CPU run with a "
                         "CPU spec (example:cpu-default)")
    gpus = 0 if force_cpu else (require_gpus(spec) if spec is not None else cuda_count())
    if gpus:
        if ranks > gpus:
            raise UsageError(f"--ranks {ranks}: this machine has {gpus} GPU(s); use at most {gpus} or --cpu")
        return ranks, "nccl"
    from trainready.util.devices import GLOO_LIMIT_RULE, gloo_rank_limit

    top = gloo_rank_limit()
    if ranks > top:
        raise UsageError(f"--ranks {ranks}: expected at most {top} gloo ranks here ({GLOO_LIMIT_RULE})")
    return ranks, "gloo"


def validate(spec: ResumeSpec, vocab_size: int) -> None:
    """Every number the protocol takes, checked before anything runs: one UsageError line each."""
    if spec.steps < 2:
        raise UsageError(f"--steps (resume.steps) {spec.steps}: expected >= 2 (a checkpoint step must fit before it)")
    if not 0 < spec.checkpoint_step < spec.steps:
        raise UsageError(f"--checkpoint-step {spec.checkpoint_step}: expected 0 < checkpoint step < steps ({spec.steps})")
    if spec.batch_size < 1:
        raise UsageError(f"--batch-size (resume.batch_size) {spec.batch_size}: expected >= 1 sequences per rank per step")
    if spec.seed < 0:
        raise UsageError(f"resume.seed {spec.seed}: expected >= 0 (seeds PCG64 and torch)")
    if vocab_size != 0 and not 2 <= vocab_size <= MAX_VOCAB:
        raise UsageError(f"--vocab-size {vocab_size}: expected 0 (the preset's) or 2..{MAX_VOCAB}")
    for flag, value in (("--atol", spec.atol), ("--rtol", spec.rtol)):
        if not math.isfinite(value) or value < 0:
            raise UsageError(f"{flag} {value}: expected a finite number >= 0 (0 = bitwise)")


def prepare(spec: ResumeSpec, options: dict[str, Any], faults: dict[str, str], workdir: Path,
            node: NodeSpec | None = None) -> ProtocolConfig:
    """options: data, dtype, dir, cpu, precision, deterministic, vocab_size, timeout_s (all optional).
    `node`: the whole spec, whose gpu.count > 0 forbids a CPU run (see `device_world`)."""
    validate(spec, int(options.get("vocab_size") or 0))
    world, backend = device_world(spec.ranks, bool(options.get("cpu")), node)
    preset = spec.preset or ("small" if backend == "nccl" else "tiny")
    train = TrainConfig(
        preset=preset, vocab_size=int(options.get("vocab_size") or 0), seed=spec.seed, batch_size=spec.batch_size,
        steps=spec.steps, warmup_steps=min(10, max(1, spec.steps // 10)), mode=spec.mode,
        precision=str(options.get("precision") or "auto"), deterministic=bool(options.get("deterministic", True)),
    )
    if spec.mode not in ("ddp", "fsdp"):
        raise UsageError(f"--mode {spec.mode}: expected ddp or fsdp")
    if train.precision not in ("auto", "fp32", "bf16"):
        raise UsageError(f"--precision {train.precision}: expected auto, fp32 or bf16")
    mcfg = train.model_config()  # UsageError on an unknown preset
    root = Path(options.get("dir") or workdir)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--dir {root}: cannot create ({exc.strerror})") from None
    data = options.get("data")
    dtype = options.get("dtype")
    if not data:
        data = str(write_sample_corpus(root / "sample-data", vocab_size=mcfg.vocab_size))
    source = open_tokens(data, dtype)  # DataError names the file
    if source.num_tokens <= FULL_SCAN_TOKENS:
        check_vocab(source, mcfg.vocab_size)
    for r in range(world):  # too few tokens for one global batch → DataError
        SequenceSampler(source, mcfg.seq_len, spec.batch_size, spec.seed, r, world)
    plants = tuple(p for p in PLANTS if faults.get(f"resume.{p}"))
    return ProtocolConfig(
        train=train, checkpoint_step=spec.checkpoint_step, data=str(data), dtype=dtype, root=root,
        world_size=world, backend=backend, tolerance=Tolerance(spec.atol, spec.rtol), plants=plants,
        timeout_s=float(options.get("timeout_s") or 300.0),
    )
