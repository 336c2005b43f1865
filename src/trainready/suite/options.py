"""What a command hands its checks beyond the spec: one typed, frozen record, built once.

`trainready node` fills `image_digest`; `trainready resume` fills `resume` (and `protocol`, the run
it has already validated), `throughput`, or `compat`.  A check reads the typed field it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trainready.records import Level
from trainready.resume.options import CompatOptions, ResumeOptions

if TYPE_CHECKING:  # the type only: resume.protocol imports torch, which `import trainready.checks` must not
    from trainready.resume.protocol import ProtocolConfig


@dataclass(frozen=True)
class ThroughputOptions:
    """`trainready resume --throughput`: checkpoint save/load GB/s against a raw write+fsync."""

    directory: Path | None = None
    """Folder measured (the checkpoint directory, --dir); None = the check's workdir."""
    nbytes: int | None = None
    """Bytes of model+optimizer state saved; None = 2 GiB on a GPU, 256 MiB on the CPU."""
    rounds: int = 3
    """Rounds per variant; the median is judged."""


@dataclass(frozen=True)
class CheckOptions:
    """Options of the command that runs the checks; each check reads its own field."""

    image_digest: str | None = None
    """`--image-digest` for `versions` (sha256:<64 hex>); None = env TRAINREADY_IMAGE_DIGEST or the runtime's."""
    resume: ResumeOptions = field(default_factory=ResumeOptions)
    """How the resume check sets up its run (`trainready resume` flags; defaults under `trainready node`)."""
    protocol: ProtocolConfig | None = None
    """The resume run `trainready resume` already validated and prepared from `resume` (prepared once);
    None = the resume check prepares it itself."""
    throughput: ThroughputOptions = field(default_factory=ThroughputOptions)
    """Checkpoint throughput measurement (`trainready resume --throughput`)."""
    compat: CompatOptions | None = None
    """Checkpoint compatibility (`trainready resume --save-only/--load-from`); None when not asked."""
    burnin_s: float | None = None
    """`trainready node --duration`: seconds of burn-in; None = the spec's burnin.duration_s."""
    level: Level = Level.QUICK
    """`trainready node --level`: how deep the run goes (the fingerprint's battery is larger from standard on)."""
