"""`trainready bundle OUT RECORD...`: assemble a handoff bundle (a directory, or OUT.tar.gz).

Built in a staging directory beside OUT and renamed (or tarred, then renamed) into place at the
end: an interrupted bundle never looks like a complete one.  A record with planted faults is a
test, not evidence, and is refused (exit 2) — except self-test records, which are planted by
design and are evidence that the detectors work.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from trainready import __version__
from trainready.bundle import gather
from trainready.bundle.index import index_doc, index_md, section_facts
from trainready.bundle.layout import INDEX_JSON, INDEX_MD
from trainready.errors import UsageError
from trainready.records import SCHEMA_VERSION, read_report
from trainready.report.kinds import Record, read_record
from trainready.util.atomic import _umask, atomic_write_json, atomic_write_text, fsync_dir


@dataclass(frozen=True)
class BundleOptions:
    out: Path
    records: tuple[str, ...] = ()
    adds: tuple[tuple[str, Path], ...] = ()  # (role, path) from --add [ROLE=]PATH
    logs: tuple[Path, ...] = ()
    data: tuple[Path, ...] = ()
    checkpoints: tuple[Path, ...] = ()
    spec: str | None = None
    collect_env: bool = True  # run `trainready env` here when no env record is given
    argv: tuple[str, ...] = ()


def is_tar(out: Path) -> bool:
    return out.name.endswith((".tar.gz", ".tgz"))


def check_out(out: Path) -> None:
    if not out.parent.is_dir():
        raise UsageError(f"bundle {out}: directory {out.parent} does not exist (create it first)")
    if out.exists():
        raise UsageError(f"bundle {out}: already exists; a bundle is never written over (choose a new name)")
    try:  # where the bundle is staged before its rename: a read-only or pseudo filesystem refuses here, not later
        os.rmdir(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".probe", dir=out.parent))
    except OSError as exc:
        raise UsageError(f"bundle {out}: cannot create a folder in {out.parent} ({exc.strerror})") from None


def _planted(rec: Record) -> str:
    """What makes a record a test rather than evidence ('' when it is evidence)."""
    if rec.kind == "selftest":
        return ""
    if rec.planted:
        return ", ".join(f"{k}={v}" for k, v in rec.planted.items())
    for node in rec.doc.get("nodes", []) or []:  # a fleet record's embedded node records
        inner = node.get("record") if isinstance(node, Mapping) else None
        ctx = inner.get("context") if isinstance(inner, Mapping) else None
        if isinstance(ctx, Mapping) and ctx.get("planted"):
            return f"node {node.get('node', '?')}: " + ", ".join(f"{k}={v}" for k, v in ctx["planted"].items())
    return ""


def read_records(paths: tuple[str, ...]) -> list[Record]:
    recs = []
    for p in paths:
        rec = read_record(p)
        if rec.doc.get("schema") == SCHEMA_VERSION:  # the one reader of report records: refuses planted ones
            read_report(p, p, "a record made without --plant: a bundle holds evidence only "
                        "(trainready selftest records are the exception)")
        why = _planted(rec)
        if why:
            raise UsageError(f"{p}: a record with planted faults ({why}) is a test, not evidence; a bundle holds "
                             "evidence only (trainready selftest records are the exception)")
        recs.append(rec)
    return recs


def build(opts: BundleOptions, progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    check_out(opts.out)
    records = read_records(opts.records)
    spec_file = None
    if opts.spec:
        from trainready.spec import load_spec

        _, source = load_spec(opts.spec)
        spec_file = ("spec", Path(source))
    stage = gather.Stage(Path(tempfile.mkdtemp(prefix=f".{opts.out.name}.", dir=opts.out.parent)))
    try:
        env = next((dict(r.doc) for r in records if r.kind == "env"), None)
        if env is None and opts.collect_env:
            progress("collecting the manifest (trainready env)")
            from trainready.manifest.build import collect

            env = collect()
            stage.json("env.json", env, "hardware", "environment manifest (trainready env) at bundle time: host, GPUs, "
                       "driver, software chain, container, code, env vars (secrets redacted)")
        progress("copying records")
        gather.add_records(stage, records)
        gather.add_specs(stage, records, spec_file)
        gather.add_commands(stage, records, list(opts.argv) or ["trainready", "bundle", str(opts.out)])
        stage.json("trainready.json", {"tool_version": __version__, "python": platform.python_version(),
                                       "platform": platform.platform()},
                   "launch", "the trainready version (and Python) that made this bundle")
        progress("checksumming sample data and checkpoints")
        gather.add_data(stage, [*gather.data_paths(records), *opts.data])
        gather.add_checkpoints(stage, [*gather.checkpoint_dirs(records), *opts.checkpoints])
        gather.add_files(stage, opts.adds, opts.logs)
        return _finish(stage, opts, env, records)
    finally:
        shutil.rmtree(stage.root, ignore_errors=True)


def _finish(stage: gather.Stage, opts: BundleOptions, env: Mapping[str, Any] | None, records: list[Record]) -> dict[str, Any]:
    meta = {"created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "tool_version": __version__,
            "command": " ".join(opts.argv) or f"trainready bundle {opts.out}"}
    facts = section_facts(env, records)
    atomic_write_text(stage.root / INDEX_MD, index_md(index_doc(stage.items, stage.referenced, facts, meta)))
    stage._item(INDEX_MD, "launch", "this index for people: the handoff records table")
    doc = index_doc(stage.items, stage.referenced, facts, meta)
    atomic_write_json(stage.root / INDEX_JSON, doc)
    if is_tar(opts.out):
        tmp = opts.out.with_name(f".{opts.out.name}.{os.getpid()}.tmp")
        try:
            with tarfile.open(tmp, "w:gz") as tar:
                tar.add(stage.root, arcname=opts.out.name.removesuffix(".gz").removesuffix(".tar").removesuffix(".tgz"))
            os.replace(tmp, opts.out)
        finally:
            tmp.unlink(missing_ok=True)
    else:
        os.chmod(stage.root, 0o777 & ~_umask())
        os.rename(stage.root, opts.out)
    fsync_dir(opts.out.parent)
    return doc

