"""`trainready bundle --verify OUT`: re-check every checksum of a bundle against its index.json.

Each file listed in index.json is hashed again; a file whose sha256 or size differs is
"changed", a listed file that is absent is "missing", and a file the index does not list is
"extra" (index.json itself is the root of trust and is not listed).  Works on a bundle
directory and on OUT.tar.gz (read in place, nothing extracted).
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from trainready.bundle.layout import BUNDLE_SCHEMA, INDEX_JSON, sha256_file
from trainready.errors import UsageError


@dataclass(frozen=True)
class Verification:
    checked: int
    changed: tuple[str, ...]
    missing: tuple[str, ...]
    extra: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not (self.changed or self.missing or self.extra)


def _dir_files(root: Path) -> Iterator[tuple[str, str]]:
    for p in sorted(root.rglob("*")):
        if p.is_file() or p.is_symlink():
            yield str(p.relative_to(root)), "" if p.is_symlink() else sha256_file(p)


def _inner(name: str) -> str:
    """A tar member's path inside the bundle (below its one top-level folder)."""
    return name.split("/", 1)[1] if "/" in name else name


def _tar_files(path: Path) -> Iterator[tuple[str, str]]:
    try:
        with tarfile.open(path, "r:*") as tar:
            for m in tar:
                if m.isdir():
                    continue
                name = _inner(m.name)
                fh = tar.extractfile(m) if m.isfile() else None
                if fh is None:
                    yield name, ""  # a link or device: never a bundle file
                    continue
                h = hashlib.sha256()
                for block in iter(lambda: fh.read(8 << 20), b""):
                    h.update(block)
                yield name, h.hexdigest()
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise UsageError(f"--verify {path}: not a readable tar.gz ({exc})") from None


def verify(path: Path) -> Verification:
    if not path.exists():
        raise UsageError(f"--verify {path}: no such bundle (a directory or .tar.gz made by trainready bundle)")
    files = dict(_dir_files(path) if path.is_dir() else _tar_files(path))
    if INDEX_JSON not in files:
        raise UsageError(f"--verify {path}: no {INDEX_JSON}; not a trainready bundle")
    index = _read_index(path, files)
    listed = {str(i["path"]): str(i["sha256"]) for i in index.get("items", []) if isinstance(i, dict)}
    changed = tuple(sorted(p for p, h in listed.items() if p in files and files[p] != h))
    missing = tuple(sorted(p for p in listed if p not in files))
    extra = tuple(sorted(p for p in files if p not in listed and p != INDEX_JSON))
    return Verification(len(listed), changed, missing, extra)


def _read_index(path: Path, files: dict[str, str]) -> dict:  # type: ignore[type-arg]
    try:
        if path.is_dir():
            text = (path / INDEX_JSON).read_text(encoding="utf-8")
        else:
            with tarfile.open(path, "r:*") as tar:
                member = next(m for m in tar if _inner(m.name) == INDEX_JSON)
                text = tar.extractfile(member).read().decode("utf-8")  # type: ignore[union-attr]
        doc = json.loads(text)
    except (OSError, ValueError, StopIteration, tarfile.TarError) as exc:
        raise UsageError(f"--verify {path}: {INDEX_JSON} unreadable ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != BUNDLE_SCHEMA:
        raise UsageError(f"--verify {path}: {INDEX_JSON} is not a '{BUNDLE_SCHEMA}' index")
    return doc
