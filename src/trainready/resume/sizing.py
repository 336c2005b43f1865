"""What the resume protocol's model and disk must be for the data it will read.

* Vocabulary: by default sized from the data: the largest token id in the windows
  runs A, B and C read (every rank, every step), rounded up to a multiple of 64.
  `--vocab-size` overrides it; an id at or above an explicit value is one line.
* Disk: the checkpoint size the planner predicts for this model (plan/checkpoint.py,
  12 bytes/param for fp32 weights + AdamW m, v) plus run A's evidence, compared
  with the free space of the directory before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trainready.data.sampler import SequenceSampler
from trainready.data.source import TokenSource
from trainready.errors import DataError
from trainready.workload.model import ModelConfig, preset_for_vocab

# Padding of a data-sized vocabulary: GPT-2's 50,257 ids become 50,304 = 786 x 64, the
# padded size nanoGPT uses (a multiple of 64 keeps the embedding/head matmuls aligned).
VOCAB_MULTIPLE = 64
# Largest vocabulary accepted: 2**24 ids, ~65x the largest vocabularies in use
# (Gemma's 256,000); beyond it the embedding alone would be a mistake, not a model.
MAX_VOCAB = 1 << 24
# Disk allowance beyond the tensors' bytes, per rank and run: DCP metadata, per-tensor
# record headers, train-rank-R.json (RNG states ~20 KB), A's step-K state, the manifest.
PER_RANK_ALLOWANCE = 1 << 20  # bytes
SAMPLE_CORPUS_ALLOWANCE = 1 << 20  # bytes; the sample corpus is ~0.25 MB (docs/data.md)


@dataclass(frozen=True)
class ModelChoice:
    """The model the protocol trains, as recorded in the result."""

    config: ModelConfig
    preset: str
    vocab_from: str  # "data" or "--vocab-size"
    largest_id: int  # in the windows read
    windows: int  # distinct windows (seq_len + 1 tokens) the run reads
    params: int  # exact count (plan.model.from_reference)

    def to_json(self) -> dict[str, Any]:
        c = self.config
        return {"preset": self.preset, "params": self.params, "vocab_size": c.vocab_size,
                "vocab_from": self.vocab_from, "largest_id_read": self.largest_id, "windows_read": self.windows,
                "layers": c.n_layer, "hidden": c.d_model, "heads": c.n_head, "ffn": c.d_ff,
                "seq_len": c.seq_len, "tied_embeddings": c.tie_embeddings}

    def describe(self) -> str:
        c = self.config
        src = ("sized from the data: largest id read " f"{self.largest_id}, rounded up to a multiple of {VOCAB_MULTIPLE}"
               if self.vocab_from == "data" else "--vocab-size")
        tied = ", tied embedding/head" if c.tie_embeddings else ""
        return (f"model {self.params / 1e6:.2f} M params: {c.n_layer} layers, hidden {c.d_model}, seq_len "
                f"{c.seq_len}{tied}, vocab {c.vocab_size} ({src})")


def largest_id(source: TokenSource, seq_len: int, batch: int, seed: int, world: int, steps: int) -> tuple[int, int, int]:
    """(largest id, its token offset, distinct windows) over every window the `steps` batches of every
    rank read; DataError at a negative id or too few tokens for one global batch."""
    ids = [SequenceSampler(source, seq_len, batch, seed, r, world).windows_ahead(steps) for r in range(world)]
    windows = np.unique(np.concatenate(ids))
    top, where = -1, 0
    for k in windows:
        start = int(k) * seq_len
        block = source.tokens(start, seq_len + 1)
        if int(block.min()) < 0:
            i = int(np.argmin(block))
            raise DataError(f"{source.path}: token {start + i}: found id {int(block[i])}, expected 0 <= id")
        i = int(np.argmax(block))
        if int(block[i]) > top:
            top, where = int(block[i]), start + i
    return top, where, int(windows.size)


def round_vocab(top: int) -> int:
    return (top + 1 + VOCAB_MULTIPLE - 1) // VOCAB_MULTIPLE * VOCAB_MULTIPLE


def choose_model(source: TokenSource, preset: str, given_vocab: int, batch: int, seed: int, world: int,
                 steps: int) -> ModelChoice:
    """The preset sized for the ids the run reads (or for `given_vocab` when non-zero)."""
    from trainready.plan.model import from_reference

    def done(cfg: ModelConfig, src: str, top: int, n: int) -> ModelChoice:
        return ModelChoice(cfg, preset, src, top, n, from_reference(cfg).total_params)

    if given_vocab:
        cfg = preset_for_vocab(preset, given_vocab)
        top, where, n = largest_id(source, cfg.seq_len, batch, seed, world, steps)
        if top >= given_vocab:
            raise DataError(f"{source.path}: token {where}: found id {top}, expected 0 <= id < --vocab-size "
                            f"{given_vocab} (leave --vocab-size out to size the model from the data)")
        return done(cfg, "--vocab-size", top, n)
    # The windows depend on seq_len, which a larger vocabulary may change (LARGE_VOCAB): at most two passes.
    seq = preset_for_vocab(preset, 0).seq_len
    top, where, n = largest_id(source, seq, batch, seed, world, steps)
    cfg = preset_for_vocab(preset, round_vocab(top))
    if cfg.seq_len != seq:
        top2, where2, n = largest_id(source, cfg.seq_len, batch, seed, world, steps)
        top, where = max((top, where), (top2, where2))
        cfg = preset_for_vocab(preset, round_vocab(top))
    if cfg.vocab_size > MAX_VOCAB:
        raise DataError(f"{source.path}: token {where}: found id {top}, expected ids below {MAX_VOCAB} "
                        "(a larger vocabulary is not a model trainready trains)")
    return done(cfg, "data", top, n)


def predicted_bytes(cfg: ModelConfig, world: int, mode: str, precision: str) -> dict[str, int]:
    """Bytes the run writes: the checkpoint (the planner's `checkpoint.full`), run A's final state on
    every rank (world x `checkpoint.per_rank`) and the per-rank allowance."""
    from trainready.plan.checkpoint import checkpoint_quantities
    from trainready.plan.inputs import Parallel, PlanInput, Training, validate
    from trainready.plan.model import from_reference

    # The reference workload keeps fp32 weights whatever the autocast: the planner's "fp32"/"amp" rows.
    prec = "amp" if precision == "bf16" else "fp32"
    inp = validate(PlanInput(from_reference(cfg), Parallel(dp=world, zero=3 if mode == "fsdp" else 0),
                             Training(precision=prec)))
    q = {x.key: int(x.value) for x in checkpoint_quantities(inp)}
    step_counters = 4 * from_reference(cfg).stage_tensors(1)  # AdamW 'step': one fp32 scalar per tensor
    ckpt = q["checkpoint.full"] + step_counters
    evidence = world * (q["checkpoint.per_rank"] + step_counters)
    return {"checkpoint": ckpt, "evidence": evidence, "allowance": 2 * world * PER_RANK_ALLOWANCE,
            "total": ckpt + evidence + 2 * world * PER_RANK_ALLOWANCE}
