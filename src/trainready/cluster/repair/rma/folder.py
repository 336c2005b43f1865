"""RESULTS/rma/NODE/: the evidence a GPU vendor's support asks for before an RMA, one folder per drained node.

Written as every bundle is (bundle/): JSON through the one scrub (secrets redacted), text redacted, every file's
sha256 in index.json (`trainready.bundle/1`), so `trainready bundle --verify RESULTS/rma/NODE` checks it; built
in a staging folder beside it and renamed into place.  An earlier folder of the node is kept, renamed
NODE.STAMP (its time), never overwritten.

Where it is made: after a drain, on the login node (`cluster run`, `cluster sweep` with --drain): from the records
under RESULTS; the kernel log and the vendor's tools are the node's own, and INDEX.md gives the commands that
collect them there (`trainready bundle --rma NODE --results RESULTS` run on the node through Slurm, which also
runs `nvidia-bug-report.sh` and `dcgmi diag -r 3 --json` where they exist).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Sequence

from trainready import __version__
from trainready.bundle.gather import Stage
from trainready.bundle.index import index_doc
from trainready.bundle.layout import INDEX_JSON, INDEX_MD
from trainready.cluster.repair.rma.evidence import Evidence
from trainready.cluster.repair.rma.render import index_md
from trainready.cluster.repair.rma.tools import ToolRun
from trainready.manifest.redact import redact_value
from trainready.util.atomic import _umask, atomic_write_json, atomic_write_text, fsync_dir

FOLDER = "rma"


def folder(results: Path, node: str) -> Path:
    return results / FOLDER / node


def collect_commands(node: str, results: str, reason: str) -> list[str]:
    """The commands that run `bundle --rma` on a drained node: Slurm starts no job on a drained node, so it is
    resumed inside a maintenance reservation that keeps every other job off (as `cluster resume` does), and
    drained again with its reason as it was."""
    resv = f"rma-{node}"
    return [f"scontrol create reservation ReservationName={resv} Nodes={node} StartTime=now Duration=60 "
            f"Users=$USER Flags=MAINT,IGNORE_JOBS",
            f"scontrol update nodename={node} state=resume",
            shlex.join(["srun", f"--reservation={resv}", "-w", node, "-N", "1", "--exclusive", "--time=45:00",
                        "trainready", "bundle", "--rma", node, "--results", results]),
            shlex.join(["scontrol", "update", f"nodename={node}", "state=drain",
                        'reason="' + (reason or "trainready: rma") + '"']),  # quoted as slurm.drain quotes it
            f"scontrol delete ReservationName={resv}"]


def write(ev: Evidence, tools: Sequence[ToolRun], out: Path, argv: Sequence[str], tool_dir: Path | None = None) -> Path:
    """Write the folder at `out` (its parent made); `tool_dir`: where the tools wrote their files."""
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Stage(Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent)))
    try:
        _fill(stage, ev, tools, tool_dir)
        created = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        meta = {"created_at": created, "tool_version": __version__, "command": shlex.join(argv), "rma": ev.node}
        cmds = collect_commands(ev.node, ev.results, str(ev.reason.get("slurm") or ""))  # Slurm's, as it was
        atomic_write_text(stage.root / INDEX_MD, redact_value(index_md(ev, tools, stage.items, cmds, meta)))
        stage._item(INDEX_MD, "launch", "for people: the node, its GPUs, what failed, the XIDs, what to run")
        atomic_write_json(stage.root / INDEX_JSON, index_doc(stage.items, [], {}, meta))
        os.chmod(stage.root, 0o777 & ~_umask())
        if out.exists():
            stamp = dt.datetime.fromtimestamp(out.stat().st_mtime, dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            os.rename(out, _free(out.with_name(f"{out.name}.{stamp}")))
        os.rename(stage.root, out)
        fsync_dir(out.parent)
        return out
    finally:
        shutil.rmtree(stage.root, ignore_errors=True)


def _free(p: Path) -> Path:
    return next(c for c in (p, *(p.with_name(f"{p.name}-{i}") for i in range(2, 1000))) if not c.exists())


def _fill(stage: Stage, ev: Evidence, tools: Sequence[ToolRun], tool_dir: Path | None) -> None:
    facts = {k: v for k, v in dataclasses.asdict(ev).items() if k not in ("record", "history")}
    facts["jobs"] = ev.jobs.vendor_json()  # counts, ids and states: other users' names stay in the fleet record
    stage.json("facts.json", facts, "hardware", "the node's GPUs (serial, PCI bus, slot, VBIOS), driver, the failed "
               "checks with their class and reproduce command, the drain, the jobs since the last pass (ids and states)")
    if ev.record is not None:
        (stage.root / "record").mkdir()
        stage.json("record/node.json", dict(ev.record), "launch", "the node's own record of the failing run "
                   "(trainready.fleetnode/1: every check, its metrics, the manifest)", ev.record_path)
    stage.json("xids.json", {"timeline": list(ev.xids) if not isinstance(ev.xids, str) else [],
                             "not_read": ev.xids if isinstance(ev.xids, str) else "",
                             "catalogue": "https://docs.nvidia.com/deploy/xid-errors/"},
               "hardware", "the XID timeline from the node's kernel log, each with NVIDIA's meaning and action")
    stage.json("history.json", list(ev.history), "previous", "per sweep: verdict, counters per GPU (ECC, remapped "
               "rows, PCIe replays, XIDs), trend WARNs")
    trend = Path(ev.results) / "sweep" / "trend" / f"{ev.node}.json"
    if trend.is_file():
        stage.copy("history/trend.json", trend, "previous", "the sweep's figure trend of the node "
                   "(trainready.sweeptrend/1: `trainready report` draws it)")
    stage.json("tools.json", [t.to_json() for t in tools], "services", "nvidia-bug-report.sh and dcgmi diag -r 3: "
               "ran, absent, timed out, or not run here")
    for t in tools:
        for rel in t.files:
            if tool_dir is not None and (tool_dir / rel).is_file():
                _tool_file(stage, f"tools/{rel}", tool_dir / rel, f"{t.name}'s output")


GZ_LINE_MAX = 1 << 20  # characters of one line (or one private-key block) redacted at a time: memory stays bounded
PEM_BEGIN, PEM_END = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), re.compile(r"-----END [A-Z ]*PRIVATE KEY-----")


def _tool_file(stage: Stage, rel: str, src: Path, what: str) -> None:
    """A tool's output: text redacted (Stage.copy); nvidia-bug-report's .gz unpacked, redacted and packed again,
    streamed (a line at a time: a 300 MB report never sits in memory whole)."""
    import gzip

    if not rel.endswith(".gz"):
        stage.copy(rel, src, "services", what)
        return
    dst = stage.root / rel
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        with gzip.open(src, "rt", encoding="utf-8", errors="replace", newline="") as fin, \
                gzip.open(dst, "wt", encoding="utf-8", newline="") as fout:
            changed = redact_stream(fin, fout.write)
    except (OSError, EOFError):  # not gzip after all: kept as it is
        dst.unlink(missing_ok=True)
        stage.copy(rel, src, "services", what)
        return
    stage._item(rel, "services", what, str(src), "secrets redacted: differs from the tool's own file" if changed else "")


def redact_stream(lines: Iterable[str], write: Callable[[str], object]) -> bool:
    """`redact_value` over a text a line at a time; a private key's PEM block, which spans lines, is gathered from
    its BEGIN line to its END line (at most GZ_LINE_MAX characters) and redacted whole.  Whether anything changed."""
    changed, block = False, ""
    for line in lines:
        if block or (PEM_BEGIN.search(line) and not PEM_END.search(line)):
            block += line
            if not PEM_END.search(line) and len(block) < GZ_LINE_MAX:
                continue
            line, block = block, ""
        for k in range(0, len(line), GZ_LINE_MAX):
            part = line[k:k + GZ_LINE_MAX]
            clean = redact_value(part)
            changed |= clean != part
            write(clean)
    if block:
        clean = redact_value(block)
        changed |= clean != block
        write(clean)
    return changed
