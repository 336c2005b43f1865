"""One array task = one node's acceptance: run the node checks, collect the manifest, write the node record.

Runs on the node (inside the image under test with Pyxis), started by Slurm from `trainready cluster run`'s
batch script as `trainready cluster node-task ...`.  The record goes to RESULTS/nodes/$SLURMD_NODENAME.json,
written atomically, so the collector sees a whole record or none.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from trainready.cluster.plants import faults as fl
from trainready.cluster.tasks import progress
from trainready.cluster.tasks.layout import NODE_SCHEMA, node_name, node_record
from trainready.records import Level

# Metrics the fleet compares across nodes (name → unit), from the throughput, train_step and pcie checks.
THROUGHPUT: dict[str, str] = {"gemm_bf16": "TFLOP/s", "hbm_copy": "GB/s", "train_tokens_per_s": "tokens/s",
                              "pcie_h2d": "GB/s", "pcie_d2h": "GB/s"}  # pinned host↔device copies (checks/pcie.py)
# The burn-in's sustained figures (checks/burnin.py: each GPU's median over the run), compared the same way.
THROUGHPUT.update({"burnin_gemm_sustained": "TFLOP/s", "burnin_hbm_sustained": "GB/s"})
SLURM_VARS = ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_STEP_ID", "SLURMD_NODENAME",
              "SLURM_CLUSTER_NAME")


@dataclass(frozen=True)
class TaskOptions:
    results: Path
    spec: str | None
    level: Level
    only: tuple[str, ...] | None
    skip: tuple[str, ...] | None
    plants: Mapping[str, str]
    image: str | None  # the container image reference (Pyxis --container-image), recorded as given
    burnin_s: float | None = None  # --duration: the burn-in's seconds (None: the spec's burnin.duration_s)


def planted_stop(nf: fl.NodeFaults) -> None:
    """Planted task death: SIGKILL now."""
    if nf.kill:
        os.kill(os.getpid(), signal.SIGKILL)


def planted_hang(nf: fl.NodeFaults) -> None:
    """Planted hang: sleep until Slurm (time limit) or the collector (scancel) ends us.  The caller has entered the
    first check's phase (and made no scratch yet): the other nodes' first check takes a second, so the collector's
    evidence of a hang (progress.HUNG_FACTOR x the others' time in that phase + HUNG_SLACK_S) is there ~11 s in,
    whatever the host's load does to start-up times; a short --time then suffices (the self-test's: 0:25)."""
    while nf.hang:
        time.sleep(3600)


def accept(opts: TaskOptions) -> int:
    """Run this node's acceptance and write its record; the node report's exit code (0 pass/warn, 1 fail)."""
    from trainready.checks import CheckContext, select
    from trainready.manifest.build import collect
    from trainready.suite.runner import run_checks
    from trainready.spec import load_spec
    from trainready.util.atomic import atomic_write_json

    t0 = time.time()
    node = node_name()
    nf = fl.for_node(opts.plants, node)
    checks = select(list(opts.only) if opts.only else None, list(opts.skip) if opts.skip else None, opts.level)
    prog = progress.Writer(opts.results, node, len(checks))  # what the collector reads if we overrun --time
    planted_stop(nf)
    if nf.hang and checks:  # planted: its first check starts and never ends (before any scratch is made)
        prog.phase(checks[0].name)
        planted_hang(nf)
    spec, source = load_spec(opts.spec)
    work = Path(tempfile.mkdtemp(prefix=f"trainready-{node}-"))
    try:
        from trainready.suite.options import CheckOptions

        ctx = CheckContext(spec, work, fl.check_plants(nf), CheckOptions(burnin_s=opts.burnin_s, level=opts.level))
        report = run_checks("node", checks, ctx, context={"spec_source": source, "node": node},
                            on_start=lambda c: prog.phase(c.name))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    prog.phase("manifest")
    manifest = collect()
    doc = record(node, report.to_json(), manifest, opts, nf)
    doc["task_s"] = round(time.time() - t0, 3)  # the acceptance's own wall time (the collector's --time hint)
    atomic_write_json(node_record(opts.results, node), doc)
    if nf.forge:
        forge(opts.results, nf.forge)
    return report.exit_code


def record(node: str, report: dict[str, Any], manifest: dict[str, Any], opts: TaskOptions,
           nf: fl.NodeFaults) -> dict[str, Any]:
    """The node record: who (Slurm node, job, task), what ran (report), on what (manifest, image)."""
    from trainready.manifest.drift import versions
    from trainready.manifest.envvars import scrub

    from trainready.cluster.control.image import annotate

    if nf.slow_factor is not None:
        scale_throughput(report, nf.slow_factor)
    for res in report.get("results", []) if nf.text else []:  # planted cluster.text: bytes no message should hold
        res["message"] = f"\x00\ud800\x1b[2J\x07 {res.get('message', '')}"
    container = annotate(manifest, opts.image)  # image checksum + slurmd/pyxis/enroot (cluster/control/image.py)
    vers = versions(manifest)
    if nf.drift:
        vers["torch"] = "0.0.0+planted"
    doc = {
        "schema": NODE_SCHEMA,
        "node": node,
        "slurm": {k: os.environ[k] for k in SLURM_VARS if k in os.environ},
        "image": opts.image,
        "container": container or None,  # the image's ref, digest, sha256 and the python/torch judged in it
        "versions": vers,
        "report": report,
        "manifest": manifest,
    }
    if opts.plants:
        doc["planted"] = dict(opts.plants)  # a test run: never evidence (fleet verdict says so)
    return scrub(doc)  # type: ignore[no-any-return]


def forge(results: Path, victim: str, wait_s: float = 300.0) -> None:
    """Planted `cluster.forge`: once VICTIM's own record is there, overwrite it with a failing one, as a rogue node
    can through the shared results folder (docs/cluster.md, "What a node can make trainready do")."""
    import json

    from trainready.util.atomic import atomic_write_json

    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        try:
            doc = json.loads(node_record(results, victim).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            time.sleep(0.5)
            continue
        doc["report"]["status"] = "fail"
        doc["report"]["results"][0].update(status="fail", message="wrong answers (written by another node)")
        atomic_write_json(node_record(results, victim), doc)
        return


def scale_throughput(report: dict[str, Any], factor: float) -> None:
    """Planted `cluster.slow`: this node's throughput figures x factor (in the record, as throughput.slow_gpu does)."""
    for res in report.get("results", []):
        for m in res.get("metrics", []):
            if m.get("name") in THROUGHPUT and isinstance(m.get("value"), (int, float)):
                m["value"] = m["value"] * factor
