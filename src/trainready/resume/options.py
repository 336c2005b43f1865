"""Typed options of the resume protocol and of checkpoint compatibility, built once by a command.

`trainready resume` builds one `ResumeOptions` from its flags (or one `CompatOptions` for
`--save-only`/`--load-from`) and hands it down; `prepare` (resume/setup.py) and the checks read
its fields.  The spec's [resume] table (ranks, steps, tolerance, ...) says the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ResumeOptions:
    """How one resume-equivalence run is set up, beyond the spec's [resume] table."""

    data: str | None = None
    """Token data (`--data`): a Megatron prefix (X.idx + X.bin), a flat .bin or .npy; None = a sample corpus."""
    dtype: str | None = None
    """Token dtype of a flat .bin (`--dtype`: uint16, uint32); Megatron files carry their own."""
    directory: Path | None = None
    """Where checkpoints and evidence go (`--dir`); None = the check's own scratch folder."""
    cpu: bool = False
    """`--cpu`: run gloo ranks on the CPU even when GPUs are present (a usage error under a GPU spec)."""
    precision: str = "auto"
    """`--precision`: auto (bf16 autocast on GPU, fp32 on CPU), fp32 or bf16."""
    deterministic: bool = True
    """Apply the determinism settings a bitwise verdict on GPU needs (`--deterministic`)."""
    vocab_size: int = 0
    """Model vocabulary (`--vocab-size`); 0 = sized from the data (resume/sizing.py)."""
    timeout_s: float = 300.0
    """Seconds each of the runs A, B and C may take once its ranks have joined."""
    standalone: bool = False
    """True for `trainready resume`, which runs on the ranks it was given; `trainready node` (False)
    notes when the resume ranks differ from those of the collective checks."""


@dataclass(frozen=True)
class CompatOptions:
    """`trainready resume --save-only DIR | --load-from DIR`: checkpoint compatibility across environments."""

    save_only: Path | None = None
    """Old environment: train to the checkpoint step, save here with a manifest, then stop."""
    load_from: Path | None = None
    """New environment: load the checkpoint saved here, continue it and compare."""
    resume: ResumeOptions = field(default_factory=ResumeOptions)
    """Data, device and precision of the run (its `directory` is not used: the checkpoint folder is)."""
    atol: float | None = None
    """`--atol` given on the command line; None = the tolerance the saver declared in its manifest."""
    rtol: float | None = None
    """`--rtol` given on the command line; None = the tolerance the saver declared in its manifest."""

    @property
    def directory(self) -> Path:
        """The checkpoint folder: --save-only's or --load-from's."""
        return self.save_only or self.load_from or Path("")
