"""From a spec + options to a validated `ProtocolConfig`: device, world, data.

Shared by `trainready resume` and the node check so the two run the same thing.
Bad data raises `DataError` here, in the parent, before any rank starts; so does a model
vocabulary smaller than the ids the run reads (resume/sizing.py), and a --dir without the
space the run will write is a `UsageError`, before anything is written.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Mapping

from trainready.data.corpus import write_sample_corpus
from trainready.data.identity import identify
from trainready.data.source import open_tokens
from trainready.devices.world import cuda_count, require_gpus
from trainready.errors import UsageError
from trainready.resume.compare import Tolerance
from trainready.resume.options import ResumeOptions
from trainready.resume.protocol import PLANTS, ProtocolConfig
from trainready.resume.sizing import MAX_VOCAB, SAMPLE_CORPUS_ALLOWANCE, choose_model, predicted_bytes
from trainready.spec.model import NodeSpec, ResumeSpec
from trainready.util.diskspace import require_free
from trainready.workload.loop import TrainConfig
from trainready.workload.model import ModelConfig


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
    from trainready.devices.world import GLOO_LIMIT_RULE, gloo_rank_limit

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
        raise UsageError(f"--vocab-size {vocab_size}: expected 0 (size it from the data) or 2..{MAX_VOCAB}")
    for flag, value in (("--atol", spec.atol), ("--rtol", spec.rtol)):
        if not math.isfinite(value) or value < 0:
            raise UsageError(f"{flag} {value}: expected a finite number >= 0 (0 = bitwise)")


def prepare(spec: ResumeSpec, options: ResumeOptions, faults: Mapping[str, str], workdir: Path,
            node: NodeSpec | None = None) -> ProtocolConfig:
    """The validated protocol for `spec` run as `options` say, in `options.directory` (else `workdir`).
    `node`: the whole spec, whose gpu.count > 0 forbids a CPU run (see `device_world`)."""
    validate(spec, options.vocab_size)
    world, backend = device_world(spec.ranks, options.cpu, node)
    preset = spec.preset or ("small" if backend == "nccl" else "tiny")
    train = TrainConfig(
        preset=preset, vocab_size=options.vocab_size, seed=spec.seed, batch_size=spec.batch_size,
        steps=spec.steps, warmup_steps=min(10, max(1, spec.steps // 10)), mode=spec.mode,
        precision=options.precision or "auto", deterministic=options.deterministic,
    )
    if spec.mode not in ("ddp", "fsdp"):
        raise UsageError(f"--mode {spec.mode}: expected ddp or fsdp")
    if train.precision not in ("auto", "fp32", "bf16"):
        raise UsageError(f"--precision {train.precision}: expected auto, fp32 or bf16")
    mcfg = train.model_config()  # UsageError on an unknown preset
    precision = train.precision if train.precision != "auto" else ("bf16" if backend == "nccl" else "fp32")
    root = Path(options.directory or workdir)
    data, dtype = options.data, options.dtype
    source = open_tokens(data, dtype) if data else None  # DataError names the file
    choice = None
    if source is not None:  # sized from the data before anything is written
        choice = choose_model(source, preset, train.vocab_size, spec.batch_size, spec.seed, world, spec.steps)
        _require_space(root, choice.config, world, spec.mode, precision, 0)
    else:  # the sample corpus's ids are below the preset's vocabulary: its size bounds the run
        _require_space(root, mcfg, world, spec.mode, precision, SAMPLE_CORPUS_ALLOWANCE)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--dir {root}: cannot create ({exc.strerror})") from None
    if source is None:
        data = str(write_sample_corpus(root / "sample-data", vocab_size=mcfg.vocab_size))
        source = open_tokens(data, dtype)
        choice = choose_model(source, preset, train.vocab_size, spec.batch_size, spec.seed, world, spec.steps)
    assert choice is not None
    plants = tuple(p for p in PLANTS if faults.get(f"resume.{p}"))
    return ProtocolConfig(
        train=dataclasses.replace(train, vocab_size=choice.config.vocab_size), checkpoint_step=spec.checkpoint_step,
        data=str(Path(data).resolve()), dtype=dtype, root=root, world_size=world, backend=backend,
        tolerance=Tolerance(spec.atol, spec.rtol), plants=plants, timeout_s=options.timeout_s,
        model=choice, identity=identify(source),
    )


def _require_space(root: Path, cfg: ModelConfig, world: int, mode: str, precision: str, extra: int) -> None:
    """Free space of --dir >= the planner's checkpoint size + run A's evidence (+ extra); else one line, exit 2."""
    need = predicted_bytes(cfg, world, mode, precision)
    what = (f"checkpoint {need['checkpoint']} B as the planner predicts (plan/checkpoint.py) + run A's evidence "
            f"{need['evidence']} B + {need['allowance'] + extra} B of metadata/records")
    require_free(root, need["total"] + extra, what)
