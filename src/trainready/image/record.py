"""The image record beside the squashfs (NAME.sqsh.json, `trainready.image/1`): what was imported, from where,
and the sha256 every node's copy is held to.  Written atomically; never holds a credential."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainready.errors import UsageError

SCHEMA = "trainready.image/1"
REQUIRED = {"reference": str, "digest": str, "sha256": str, "size_bytes": int, "file": str}


def record_path(sqsh: Path) -> Path:
    """The record beside a squashfs: NAME.sqsh.json."""
    return sqsh.with_name(sqsh.name + ".json")


@dataclass(frozen=True)
class ImageRecord:
    path: Path
    doc: dict[str, Any]

    @property
    def sha256(self) -> str:
        """'sha256:HEX' of the squashfs."""
        return str(self.doc["sha256"])

    @property
    def hex(self) -> str:
        return self.sha256.split(":", 1)[1]

    @property
    def size(self) -> int:
        return int(self.doc["size_bytes"])

    def facts(self) -> dict[str, Any]:
        """What a fleet or node record carries of the image: its reference, digest and the squashfs's sha256."""
        return {"reference": self.doc["reference"], "digest": self.doc["digest"], "sha256": self.sha256,
                "record": str(self.path)}


def load(path: Path) -> ImageRecord:
    """A `trainready.image/1` record, or one usage line naming the file and what was expected."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no such image record (trainready image import writes it beside the .sqsh)") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a readable JSON image record ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise UsageError(f"{path}: schema {got!r}, expected '{SCHEMA}'")
    for key, typ in REQUIRED.items():
        if not isinstance(doc.get(key), typ):
            raise UsageError(f"{path}: key '{key}': expected a {typ.__name__}")
    if not str(doc["sha256"]).startswith("sha256:") or len(str(doc["sha256"])) != 71:
        raise UsageError(f"{path}: key 'sha256': expected 'sha256:' and 64 hex digits")
    return ImageRecord(path, doc)


def for_file(sqsh: Path, given: str | None = None) -> ImageRecord:
    """The record `given` (--image-record), else the one beside `sqsh`; it must describe that file's name."""
    rec = load(Path(given) if given else record_path(sqsh))
    if rec.doc["file"] != sqsh.name:
        raise UsageError(f"{rec.path}: key 'file': records {rec.doc['file']!r}, not {sqsh.name!r}")
    return rec
