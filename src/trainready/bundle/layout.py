"""What a handoff bundle holds and where: the records table of an environment handoff.

A colleague must be able to re-run and judge the environment from the bundle alone.  The
sections follow the handoff checklist of a first-server bring-up (hardware/firmware/OS/kernel/
driver; management services; container runtime; packages and config; code commit, lock file and
build recipe; image digest and artifact checksums; training config, tokenizer and sample data;
launch command, directories, pass criteria and test logs; previous environment and checkpoint
compatibility).  Every item of the bundle is filed under one of them.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from trainready.errors import UsageError

BUNDLE_SCHEMA = "trainready.bundle/1"
INDEX_JSON = "index.json"
INDEX_MD = "INDEX.md"

SECTIONS: tuple[tuple[str, str], ...] = (
    ("hardware", "Hardware, firmware, OS, kernel, driver"),
    ("services", "Management services"),
    ("container", "Container runtime"),
    ("packages", "Packages and config"),
    ("code", "Code commit, lock file, build recipe"),
    ("artifacts", "Image digest and imported-artifact checksums"),
    ("training", "Training config, tokenizer, sample data"),
    ("launch", "Launch command, directories, pass criteria, test logs"),
    ("previous", "Previous environment, checkpoint compatibility"),
)
SECTION_IDS = tuple(s for s, _ in SECTIONS)

# --add ROLE=PATH roles: (section, what the file is for).  Without ROLE= the role is guessed from the name.
ROLES: dict[str, tuple[str, str]] = {
    "lock": ("code", "dependency lock file: the exact package set to rebuild the image"),
    "recipe": ("code", "build recipe (Dockerfile / enroot / Singularity definition) of the image"),
    "config": ("training", "training configuration the job is launched with"),
    "tokenizer": ("training", "tokenizer the token files were made with"),
    "data": ("training", "sample of the training data"),
    "log": ("launch", "test or job log"),
    "services": ("services", "management services' state (DCGM, fabric manager, persistence daemon, Slurm)"),
    "previous": ("previous", "the previous environment's record, for compatibility"),
    "notes": ("launch", "operator notes"),
    "other": ("launch", "file given with --add"),
}
_GUESS: tuple[tuple[str, str], ...] = (
    (r"(^|/)(uv\.lock|poetry\.lock|Pipfile\.lock|pdm\.lock|conda-lock\.ya?ml|requirements[^/]*\.txt|environment\.ya?ml)$", "lock"),
    (r"(^|/)(Dockerfile[^/]*|Containerfile[^/]*|[^/]*\.def|[^/]*\.dockerfile)$", "recipe"),
    (r"(^|/)(tokenizer[^/]*|vocab\.json|merges\.txt|[^/]*\.model|[^/]*\.tiktoken|special_tokens_map\.json)$", "tokenizer"),
    (r"\.(log|out|err)$", "log"),
    (r"\.(ya?ml|toml|json|cfg|ini|sh)$", "config"),
)


def parse_add(value: str) -> tuple[str, Path]:
    """`--add [ROLE=]PATH` → (role, path); an unknown role or a missing path is exit 2."""
    role, _, rest = value.partition("=")
    if rest and re.fullmatch(r"[a-z]+", role):
        if role not in ROLES:
            raise UsageError(f"--add {value}: unknown role '{role}' (roles: {', '.join(ROLES)}); or give just the path")
        path = Path(rest).expanduser()
    else:
        path = Path(value).expanduser()
        role = next((r for pat, r in _GUESS if re.search(pat, path.name if path.name else value)), "other")
    if not path.exists():
        raise UsageError(f"--add {value}: no such file or directory")
    return role, path


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(8 << 20), b""):  # 8 MiB reads
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class Item:
    """One file of the bundle (path inside it), or one it references by checksum without a copy
    (sample data, checkpoint files: path = where it lies), with its section and what it is for."""

    path: str
    sha256: str
    bytes: int
    section: str
    what: str
    source: str = ""  # where it came from (original path), when copied
    note: str = ""  # e.g. "secrets redacted: differs from the source"

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"path": self.path, "sha256": self.sha256, "bytes": self.bytes,
                                  "section": self.section, "what": self.what}
        if self.source:
            out["source"] = self.source
        if self.note:
            out["note"] = self.note
        return out

