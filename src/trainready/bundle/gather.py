"""Put each piece of a bundle in the staging directory and describe it as an `Item`.

JSON goes through the one scrub + atomic JSON writer (secrets stay redacted); a text file given
with --add whose content has a token-shaped secret is copied redacted and says so; anything else
is copied byte for byte.  Sample data and checkpoint files are referenced by checksum, not copied.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Any, Iterable, Mapping

from trainready.bundle.layout import ROLES, Item, sha256_file
from trainready.manifest.redact import redact_value, scrub
from trainready.report.kinds import PURPOSE, Record
from trainready.util.atomic import atomic_write_json, atomic_write_text

# Record kind → the section of the handoff table it belongs to.
RECORD_SECTION = {"env": "hardware", "plan": "training", "compare": "previous"}
MAX_FILES = 10_000  # files hashed under one --data directory


class Stage:
    """The staging directory and the items written into it so far."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.items: list[Item] = []
        self.referenced: list[Item] = []

    def _item(self, rel: str, section: str, what: str, source: str = "", note: str = "") -> None:
        p = self.root / rel
        self.items.append(Item(rel, sha256_file(p), p.stat().st_size, section, what, source, note))

    def json(self, rel: str, doc: Any, section: str, what: str, source: str = "") -> None:
        atomic_write_json(self.root / rel, scrub(doc))
        self._item(rel, section, what, source)

    def text(self, rel: str, text: str, section: str, what: str) -> None:
        atomic_write_text(self.root / rel, redact_value(text))
        self._item(rel, section, what)

    def copy(self, rel: str, src: Path, section: str, what: str) -> None:
        """A user file: redacted when it is text holding a secret, else byte for byte."""
        dst = self.root / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        note = ""
        try:
            text = src.read_text(encoding="utf-8")
        except (UnicodeDecodeError, ValueError):
            shutil.copyfile(src, dst)
        else:
            clean = redact_value(text)
            if clean != text:
                note = f"secrets redacted: differs from the source (source sha256 {sha256_file(src)})"
            atomic_write_text(dst, clean)
        self._item(rel, section, what, str(src.resolve()), note)

    def reference(self, path: Path, section: str, what: str) -> None:
        self.referenced.append(Item(str(path.resolve()), sha256_file(path), path.stat().st_size, section, what))


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)[:60] or "x"


def add_records(stage: Stage, records: list[Record]) -> None:
    for i, rec in enumerate(records, 1):
        section = RECORD_SECTION.get(rec.kind, "launch")
        what = PURPOSE.get(rec.kind, rec.kind) + ("; the pass/fail evidence" if section == "launch" else "")
        stage.json(f"records/{i:02d}-{rec.kind}-{_slug(Path(rec.path).stem)}.json", dict(rec.doc), section, what,
                   str(Path(rec.path).resolve()))


def add_specs(stage: Stage, records: list[Record], extra: tuple[str, Path] | None) -> None:
    """The spec each record was judged by (as recorded) and its TOML source when still readable."""
    seen: set[str] = set()
    sources: dict[str, Path] = {}
    for rec in records:
        spec = rec.doc.get("spec")
        if isinstance(spec, Mapping) and spec:
            key = json.dumps(spec, sort_keys=True)
            if key not in seen:
                seen.add(key)
                stage.json(f"spec/judged-{len(seen)}-{_slug(str(spec.get('name', 'spec')))}.json", dict(spec),
                           "launch", "pass criteria: the spec as the record was judged by it (every threshold)")
        src = (rec.doc.get("context") or {}).get("spec_source") if isinstance(rec.doc.get("context"), Mapping) else None
        if isinstance(src, str) and Path(src).is_file():
            sources.setdefault(str(Path(src).resolve()), Path(src))
    if extra is not None:
        sources.setdefault(str(extra[1].resolve()), extra[1])
    for i, path in enumerate(sources.values(), 1):
        stage.copy(f"spec/{i:02d}-{path.name}", path, "launch", "pass criteria: the spec file (TOML) as given")


def add_commands(stage: Stage, records: list[Record], argv: list[str]) -> None:
    lines = ["# The exact commands that made each record (context.argv), then the one that made this bundle."]
    for rec in records:
        a = (rec.doc.get("context") or {}).get("argv") if isinstance(rec.doc.get("context"), Mapping) else None
        shown = shlex.join(map(str, a)) if isinstance(a, list) else "(not recorded: record made before trainready recorded argv)"
        lines.append(f"# {rec.kind}: {rec.path}\n{shown}")
    lines.append(f"# bundle\n{shlex.join(argv)}")
    stage.text("commands.txt", "\n".join(lines) + "\n", "launch", "launch commands: exactly what was run, per record")


def data_paths(records: list[Record]) -> Iterable[Path]:
    """Token files the resume runs read (details.declared.data: a Megatron prefix or a file)."""
    for rec in records:
        for r in rec.doc.get("results", []) or []:
            data = ((r.get("details") or {}).get("declared") or {}).get("data") if isinstance(r, Mapping) else None
            if isinstance(data, str) and data:
                yield from (p for p in (Path(data), Path(data + ".bin"), Path(data + ".idx")) if p.is_file())


def checkpoint_dirs(records: list[Record]) -> Iterable[Path]:
    """Checkpoint directories the resume runs wrote (details.run_dir/ckpt), when still on disk."""
    for rec in records:
        for r in rec.doc.get("results", []) or []:
            run_dir = (r.get("details") or {}).get("run_dir") if isinstance(r, Mapping) else None
            if isinstance(run_dir, str) and (Path(run_dir) / "ckpt").is_dir():
                yield Path(run_dir) / "ckpt"


def add_data(stage: Stage, paths: Iterable[Path]) -> None:
    seen: set[str] = set()
    for base in paths:
        files = sorted(p for p in base.rglob("*") if p.is_file())[:MAX_FILES] if base.is_dir() else [base]
        for f in files:
            if str(f.resolve()) not in seen:
                seen.add(str(f.resolve()))
                stage.reference(f, "training", "sample data (token files): checksum of the file at this path")
    if stage.referenced:
        stage.json("checksums/data.json", [i.to_json() for i in stage.referenced if i.section == "training"],
                   "training", "sample-data checksums (sha256 of each token file, not copied)")


def add_checkpoints(stage: Stage, dirs: Iterable[Path]) -> None:
    """Each checkpoint's manifest.json (every file's size and sha256) and `latest` pointer, copied."""
    n = 0
    for d in dirs:
        for man in sorted(d.rglob("manifest.json")):
            n += 1
            rel = f"checkpoints/{n:02d}-{_slug(man.parent.name)}/manifest.json"
            stage.copy(rel, man, "previous", "checkpoint manifest: size and sha256 of every checkpoint file "
                       "(checkpoint compatibility)")
        latest = d / "latest"
        if latest.is_file():
            stage.copy(f"checkpoints/latest-{n:02d}", latest, "previous", "which checkpoint step `latest` names")
        declared = d.parent / "evidence" / "declared.json"  # a resume run's folder: what it declared before running
        if declared.is_file():
            stage.copy(f"checkpoints/declared-{n:02d}.json", declared, "launch",
                       "the resume run's declared tolerance, training setup and data, written before it ran")


def add_files(stage: Stage, adds: Iterable[tuple[str, Path]], logs: Iterable[Path]) -> None:
    for role, path in [*adds, *(("log", p) for p in logs)]:
        section, what = ROLES[role]
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            rel = f.relative_to(path.parent) if path.is_dir() else Path(f.name)
            target = f"{'logs' if role == 'log' else 'files/' + role}/{rel}"
            if any(i.path == target for i in stage.items):
                target = f"{target}.{len(stage.items)}"
            stage.copy(target, f, section, what)
