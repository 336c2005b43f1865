"""The RMA folder of a drained node (RESULTS/rma/NODE/): made after each drain and by `bundle --rma NODE`."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:
    from trainready.cluster.repair.jobs import JobImpact


def after_drain(results: Path, node: str, record: str | None, say: Callable[[str], None],
                here: bool = False, jobs: JobImpact | None = None) -> Path | None:
    """The folder of a node just drained, from the records under RESULTS (on the login node: the node's tools are
    said with the commands that collect them; `here`, on the node: its kernel log's XIDs too); `jobs`: the job
    impact the draining run found (its fleet record's: one answer for both).  A folder that cannot be written is
    said, never stops a drain."""
    from trainready.cluster.repair.rma import evidence, folder, tools

    try:
        ev = evidence.gather(results, node, Path(record) if record else None, here=here, jobs=jobs)
        runs = tools.not_here(node, f"trainready bundle --rma {node} --results {results} (run on {node}: see INDEX.md)")
        argv = [Path(sys.argv[0]).name if sys.argv else "trainready", *sys.argv[1:]]  # the command that drained it
        out = folder.write(ev, runs, folder.folder(results, node), argv)
    except (OSError, ValueError) as exc:
        say(f"{node}: RMA folder not written: {type(exc).__name__}: {exc}")
        return None
    say(f"{node}: RMA evidence in {out} (INDEX.md)")
    return out


def on_demand(results: Path, node: str, out: Path | None, argv: Sequence[str], here: bool,
              bug_report_s: float, dcgm_s: float) -> Path:
    """`trainready bundle --rma NODE --results RESULTS [OUT]`: on the node itself (`here`), with its kernel log's
    XIDs and the vendor's tools under their time limits; elsewhere from the records alone."""
    from trainready.cluster.repair.rma import evidence, folder, tools

    ev = evidence.gather(results, node, here=here)
    work = Path(tempfile.mkdtemp(prefix=f"trainready-rma-{node}-"))
    try:
        runs = tools.collect(work, bug_report_s, dcgm_s) if here else tools.not_here(
            node, f"trainready bundle --rma {node} --results {results} (run on {node}: see INDEX.md)")
        return folder.write(ev, runs, out or folder.folder(results, node), argv, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
