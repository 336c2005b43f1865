"""`trainready image distribute`: one squashfs, its record's sha256, onto node-local storage of every node,
through Slurm: one srun step, one task per node, running nodecopy.SCRIPT.

Two ways to move the bytes (`--via`):
  copy    each node reads the file from where it lies (a shared parallel file system: Lustre, GPFS, NFS) into
          its DEST: N readers of one file, which such file systems serve at their aggregate bandwidth.
  sbcast  sbcast(1) sends it from here down Slurm's tree of slurmds (fan-out up to 8, `--fanout`) into a
          temporary name on each node, which the node then checks and renames: for a file not on a shared file
          system, or one whose servers should not see N readers at once.
A node that cannot take the file is "not ready", with the copy's own words; nothing is drained."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from trainready.cluster.control import avail, slurm
from trainready.errors import ImageError, UsageError
from trainready.image.nodecopy import SCRIPT, TAG
from trainready.image.record import ImageRecord

SCHEMA = "trainready.image-distribution/1"
VIAS = ("copy", "sbcast")


@dataclass(frozen=True)
class Job:
    sqsh: Path
    record: ImageRecord
    dest: str
    via: str = "copy"
    partition: str | None = None
    lock_wait_s: int = 3600
    time_limit: str = "2:00:00"


@dataclass(frozen=True)
class NodeResult:
    node: str
    status: str  # copied / already / failed
    bytes: int = 0
    seconds: float = 0.0
    words: str = ""

    @property
    def ready(self) -> bool:
        return self.status in ("copied", "already")

    def doc(self) -> dict[str, Any]:
        gbps = self.bytes / self.seconds / 1e9 if self.seconds > 0 and self.bytes else None
        return {"node": self.node, "status": self.status, "ready": self.ready, "bytes": self.bytes,
                "seconds": self.seconds, "gb_per_s": round(gbps, 3) if gbps else None, "words": self.words}


@dataclass(frozen=True)
class Outcome:
    job: Job
    results: tuple[NodeResult, ...]
    wall_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    def doc(self) -> dict[str, Any]:
        moved = sum(r.bytes for r in self.results)
        return {"schema": SCHEMA, "file": str(self.job.sqsh), "record": str(self.job.record.path),
                "sha256": self.job.record.sha256, "size_bytes": self.job.record.size, "dest": self.job.dest,
                "via": self.job.via, "nodes": [r.doc() for r in self.results], "bytes": moved,
                "wall_s": round(self.wall_s, 3), "gb_per_s": round(moved / self.wall_s / 1e9, 3) if self.wall_s > 0 else None,
                "ready": [r.node for r in self.results if r.ready],
                "not_ready": {r.node: r.words for r in self.results if not r.ready}, **self.extra}


def check_dest(dest: str, via: str) -> None:
    if not dest.startswith("/"):
        raise UsageError(f"--dest {dest}: expected an absolute folder on node-local storage (e.g. /local/images)")
    if via not in VIAS:
        raise UsageError(f"--via {via}: expected one of {', '.join(VIAS)}")
    if via == "sbcast" and "%n" in dest:
        raise UsageError(f"--dest {dest}: %n is for --via copy (sbcast(1) writes the same path on every node)")


def node_env(job: Job, src: str, move: bool) -> dict[str, str]:
    env = dict(os.environ, TR_TAG=TAG, TR_DEST=job.dest, TR_NAME=job.sqsh.name, TR_SHA=job.record.hex, TR_SRC=src,
               TR_LOCK_WAIT=str(job.lock_wait_s))
    if move:
        env["TR_MOVE"] = "1"
    return env


def parse(out: str) -> dict[str, NodeResult]:
    """The nodes' lines from the step's output."""
    got: dict[str, NodeResult] = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 6 and parts[0] == TAG:
            try:
                got[parts[1]] = NodeResult(parts[1], parts[2], int(parts[3]), float(parts[4]), parts[5].strip())
            except ValueError:
                continue
    return got


def step_argv(job: Job, nodes: list[str]) -> list[str]:
    """srun: one task per node, each on its own node; a node's failure does not stop the others' tasks."""
    argv = ["srun", f"--nodelist={slurm.hostlist(nodes)}", f"--nodes={len(nodes)}", f"--ntasks={len(nodes)}",
            "--ntasks-per-node=1", "--kill-on-bad-exit=0", f"--time={job.time_limit}", "--job-name=trainready-image"]
    if job.partition:
        argv.append(f"--partition={job.partition}")
    return argv + ["bash", "-c", SCRIPT]


# Inside salloc: the data (file, DEST, the temporary name's random part) come through the environment and the node
# step's argv as the script's own arguments ("$@"): nothing from a file name or --dest is ever parsed by a shell.
SBCAST = r"""
set -u
tmp=${TR_DEST%/}/.$TR_NAME.sbcast.$TR_TOKEN
srun --ntasks="$TR_NODES" --ntasks-per-node=1 mkdir -p -- "$TR_DEST"
sbcast -f "$TR_SBCAST" "$tmp"
TR_SRC=$tmp exec "$@"
"""


def sbcast_wrapped(job: Job, nodes: list[str]) -> list[str]:
    """salloc over the nodes, sbcast into a temporary name beside DEST (same file system: the node renames it; its
    name holds 16 random hex digits, so none can be planted there before), then the node step with that file as
    its source (SBCAST; its environment: `sbcast_env`)."""
    argv = ["salloc", f"--nodelist={slurm.hostlist(nodes)}", f"--nodes={len(nodes)}", f"--time={job.time_limit}",
            "--job-name=trainready-image"]
    if job.partition:
        argv.append(f"--partition={job.partition}")
    return argv + ["bash", "-c", SBCAST, "trainready-sbcast", *step_argv(job, nodes)]


def sbcast_env(job: Job, nodes: list[str]) -> dict[str, str]:
    import secrets

    return {"TR_SBCAST": str(job.sqsh), "TR_TOKEN": secrets.token_hex(8), "TR_NODES": str(len(nodes))}


def run_step(job: Job, nodes: list[str]) -> tuple[dict[str, NodeResult], str]:
    """The node step; (node → result, Slurm's own last words for nodes that said nothing)."""
    argv = sbcast_wrapped(job, nodes) if job.via == "sbcast" else step_argv(job, nodes)
    env = node_env(job, str(job.sqsh), move=job.via == "sbcast")
    if job.via == "sbcast":
        env.update(sbcast_env(job, nodes))
    try:
        p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=None)
    except FileNotFoundError:
        raise ImageError(f"{argv[0]}: not found (run on a Slurm login node)") from None
    words = "; ".join(ln.strip() for ln in p.stderr.splitlines() if ln.strip())[-400:]
    return parse(p.stdout), words or f"{argv[0]} exit code {p.returncode}"


def distribute(job: Job, sel: avail.Selection, say: Callable[[str], None]) -> Outcome:
    """Every selected node: copied / already there / failed; the nodes Slurm will not run a task on are failed
    with Slurm's state and reason (avail.py)."""
    check_dest(job.dest, job.via)
    t0 = time.monotonic()
    got: dict[str, NodeResult] = {}
    words = ""
    if sel.nodes:
        say(f"copying {job.sqsh.name} ({job.record.size} bytes) to {job.dest} on {len(sel.nodes)} node(s) via {job.via}")
        got, words = run_step(job, list(sel.nodes))
    wall = time.monotonic() - t0
    results = []
    for n in sel.order or (*sel.nodes, *sel.not_tested):
        if n in sel.not_tested:
            results.append(NodeResult(n, "failed", words=f"node unavailable: {sel.not_tested[n]}"))
        else:
            results.append(got.get(n) or NodeResult(n, "failed", words=f"no answer from the node's task: {words}"))
    return Outcome(job, tuple(results), wall)
