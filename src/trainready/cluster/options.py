"""Typed options of `trainready cluster run/resume`, and the Pyxis flags a container image becomes."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from trainready.cluster.judge.guard import DEFAULT_MAX_DRAIN, MaxDrain, parse_max_drain
from trainready.errors import UsageError
from trainready.records import Level


@dataclass(frozen=True)
class Container:
    """Pyxis (NVIDIA's SPANK plugin for enroot): every task runs inside `image`.

    Flags as pyxis documents them (github.com/NVIDIA/pyxis, `srun --help` with pyxis): --container-image,
    --container-mounts=SRC:DST[:FLAGS][,...], --no-container-mount-home.  --results is mounted at the same
    path inside, so the records land where the collector reads them."""

    image: str
    mounts: tuple[str, ...] = ()
    mount_home: bool = False
    record: Mapping[str, Any] | None = None  # the image record's facts (image/fleet.py): the sha256 every node must have

    def srun_flags(self, results: Path) -> list[str]:
        mounts = list(self.mounts)
        res = str(results)
        if not any(m.split(":", 1)[0] == res for m in mounts):
            mounts.append(f"{res}:{res}")
        flags = [f"--container-image={self.image}", f"--container-mounts={','.join(mounts)}"]
        if not self.mount_home:
            flags.append("--no-container-mount-home")  # the image's own environment, not the user's dotfiles
        return flags


def parse_mounts(values: list[str] | None) -> tuple[str, ...]:
    out = []
    for v in values or []:
        for m in v.split(","):
            m = m.strip()
            if not m:
                continue
            if not re.fullmatch(r"[^:,\s]+(:[^:,\s]+)?(:[a-z+-]+)?", m):
                raise UsageError(f"--container-mounts '{m}': expected SRC[:DST[:FLAGS]] (pyxis syntax)")
            out.append(m)
    return tuple(out)


_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def time_seconds(text: str) -> int:
    """Slurm's --time formats (sbatch(1)): M, M:S, H:M:S, D-H, D-H:M, D-H:M:S → seconds; bad → exit 2."""
    m = _TIME.match(text.strip())
    if not m:
        raise UsageError(f"--time '{text}': expected a Slurm time limit (M, M:S, H:M:S, D-H, D-H:M or D-H:M:S)")
    d, a, b, c = m.group(1), int(m.group(2)), m.group(3), m.group(4)
    if d is not None:  # D-H[:M[:S]]
        return int(d) * 86400 + a * 3600 + int(b or 0) * 60 + int(c or 0)
    if c is not None:
        return a * 3600 + int(b) * 60 + int(c)
    if b is not None:
        return a * 60 + int(b)
    return a * 60


@dataclass(frozen=True)
class FleetOptions:
    results: Path
    nodelist: str | None = None  # a Slurm hostlist expression
    count: int | None = None  # --nodes N: the first N available nodes of the partition
    partition: str | None = None
    spec: str | None = None
    level: Level = Level.STANDARD
    burnin_s: float | None = None  # --duration: seconds of burn-in on each node (--level burn-in)
    only: tuple[str, ...] | None = None
    skip: tuple[str, ...] | None = None
    time_limit: str = "30:00"
    concurrency: int = 64  # array tasks at once (%K): bounded so a 640-node run does not flood slurmctld
    reference: str | None = None
    drain: bool = False
    container: Container | None = None
    plants: Mapping[str, str] = field(default_factory=dict)
    cross: bool = True
    collective: bool = True  # the multi-node all_reduce in the cross step (--no-collective: facts only)
    reservation: str | None = None  # run inside this reservation (resume's re-validation)
    licenses: str | None = None  # sbatch --licenses for every task: a site-wide cap (slurm.conf(5) Licenses)
    max_drain: MaxDrain = field(default_factory=lambda: parse_max_drain(DEFAULT_MAX_DRAIN))  # --drain's bound (judge/guard.py)
    topology: Path | None = None  # --topology FILE (topology.conf(5)); None: `scontrol show topology` (switches.py)

    def remote(self) -> list[str]:
        """How a node starts trainready: in a container, the image's own python3 on this trainready staged onto the
        results path that Pyxis mounts (cluster/control/stage.py: the image is not changed); else this interpreter."""
        if self.container:
            from trainready.cluster.control.stage import boot

            return ["python3", str(boot(self.results.resolve()))]
        return [sys.executable, "-m", "trainready"]
