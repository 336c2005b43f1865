"""The steps of a fleet run, each a function that fleet.py (which drives `cluster run`, `resume` and `rollout`)
calls in order: per-node acceptance as a Slurm job array, then the cross-node step, then the fleet verdict
(and, with --drain, the drains).

    1. sbatch --hold --array=0-(N-1)%K; array task i pinned to node i (ReqNodeList); released
    2. wait: squeue/scontrol states, progress (done / running / pending with job ids); past the deadline
       the rest is cancelled and counts as hung
    3. RESULTS/nodes/NODE.json per node, or "no result" with Slurm's state and exit code
    4. srun -N<n> over the nodes that have a record: clock, storage, limits, hosts, the collective
    5. verdict (judge/verdict.py), fleet.json, and the drains (ledger.py)
"""

from __future__ import annotations

import os
import random
import shlex
import socket
import subprocess
from pathlib import Path
from typing import Any, Callable, Mapping

from trainready.cluster.control import avail, slurm
from trainready.cluster.control.image import log_fault
from trainready.cluster.control.watch import GONE, GRACE_S, OVERTIME, STUCK, Progress, Watch
from trainready.cluster.judge.verdict import NodeInput
from trainready.cluster.options import FleetOptions, time_seconds
from trainready.cluster.tasks import progress
from trainready.cluster.tasks.layout import NODE_SCHEMA, node_record, read_json
from trainready.errors import SlurmError, UsageError


def select_nodes(opts: FleetOptions) -> avail.Selection:
    """--nodelist (Slurm's own expansion), or the first --nodes N usable nodes of the partition (default: all
    of them); the nodes Slurm will not run a task on are not tested (control/avail.py), with Slurm's state and reason."""
    if opts.nodelist:
        names = slurm.hostnames(opts.nodelist)
        if not names:
            raise UsageError(f"--nodelist {opts.nodelist}: names no node")
        return avail.select(names, slurm.nodes(names), opts.reservation)
    info = slurm.nodes(partition=opts.partition)
    sel = avail.select(list(info), info, opts.reservation)
    usable = list(sel.nodes)
    want = opts.count or len(usable)
    if want > len(usable):
        raise UsageError(f"--nodes {want}: only {len(usable)} usable node(s) in "
                         f"{'partition ' + opts.partition if opts.partition else 'the default partition'} "
                         f"({', '.join(usable) or 'none'})")
    if opts.count:  # the first N usable nodes: the others are not part of this run
        return avail.Selection(tuple(usable[:want]), {}, tuple(usable[:want]))
    return sel


def task_command(opts: FleetOptions) -> list[str]:
    cmd = opts.remote() + ["cluster", "node-task", "--results", str(opts.results), "--level", opts.level.value]
    if opts.spec:
        cmd += ["--spec", str(Path(opts.spec).resolve()) if Path(opts.spec).is_file() else opts.spec]
    if opts.burnin_s is not None:
        cmd += ["--duration", f"{opts.burnin_s:g}s"]
    for flag, names in (("--only", opts.only), ("--skip", opts.skip)):
        if names:
            cmd += [flag, ",".join(names)]
    for k, v in opts.plants.items():
        cmd += ["--plant", f"{k}={v}"]
    if opts.container:
        cmd += ["--image", opts.container.image]
    return cmd


def batch_script(opts: FleetOptions, gpus: int = 0) -> str:
    """The array task.  In a container (Pyxis): one srun step with every CPU (a step gets one CPU per task unless
    it asks) and GPU of the node.  Without one, the batch step itself runs the acceptance: it already holds the
    whole exclusive allocation (every CPU, and the GPUs asked for), and a step would cost slurmctld 3 more RPCs
    per node (REQUEST_HET_JOB_ALLOC_INFO, REQUEST_JOB_STEP_CREATE, REQUEST_STEP_COMPLETE, counted with `sdiag`
    on the local cluster: benchmarks/cluster_scale.py)."""
    head = ("#!/bin/bash\n"
            "# trainready cluster run: array task $SLURM_ARRAY_TASK_ID is one node's acceptance (pinned with\n"
            "# ReqNodeList); it writes RESULTS/nodes/$SLURMD_NODENAME.json.\n")
    if not opts.container:
        return head + f"exec {shlex.join(task_command(opts))}\n"
    from trainready.cluster.control.image import prelude

    # the image as $IMAGE: its sha256 and the slurmd version read on the node first (cluster/control/image.py)
    flags = [f for f in opts.container.srun_flags(opts.results) if not f.startswith("--container-image=")]
    srun = ["srun", "--ntasks=1", "--nodes=1"] + ([f"--gpus-per-node={gpus}"] if gpus else [])
    return head + prelude(opts.container.image, opts.plants, opts.container.record) + (
        f'exec {shlex.join(srun)} --cpus-per-task="$SLURM_CPUS_ON_NODE" --container-image="$IMAGE" '
        f'{shlex.join(flags + task_command(opts))}\n')


def submit(opts: FleetOptions, nodes: list[str], gpus: int = 0, on_job: Callable[[str], None] | None = None) -> str:
    """The held array, pinned and released; `on_job` hears its id before the pinning (runstate.py keeps it)."""
    from trainready.util.atomic import atomic_write_text

    for sub in ("nodes", "cross", "logs", "job"):
        (opts.results / sub).mkdir(parents=True, exist_ok=True)
    for n in nodes:  # an earlier run's record (or progress) must never stand in for this run's
        node_record(opts.results, n).unlink(missing_ok=True)
        progress.path(opts.results, n).unlink(missing_ok=True)
    if opts.container:  # a Pyxis built for another Slurm: named with Pyxis's rule, before sbatch refuses it
        from trainready.cluster.control.launcher import preflight

        preflight()
    script = opts.results / "job" / "accept.sbatch"
    atomic_write_text(script, batch_script(opts, gpus))
    job = slurm.submit(slurm.sbatch_argv(str(script), len(nodes), opts.concurrency, opts.time_limit,
                                         str(opts.results / "logs" / "accept_%A_%a.out"), opts.partition,
                                         reservation=opts.reservation, gpus=gpus, licenses=opts.licenses))
    if on_job is not None:
        on_job(job)
    slurm.pin(job, nodes)
    return job


def exit_words(s: slurm.TaskState) -> str:
    """'exit code 137 = killed by signal 9' from Slurm's 'rc:signal'."""
    rc, _, sig = s.exit_code.partition(":")
    if sig.isdigit() and sig != "0":  # Slurm's own word: the batch script was killed by signal SIG
        return f"exit code {rc}, killed by signal {sig}"
    code = f"exit code {rc}"
    if rc.isdigit() and int(rc) > 128:  # srun (and a shell) report a task killed by signal S as 128 + S
        code += f" = killed by signal {int(rc) - 128}"
    return code


def never_started(s: slurm.TaskState | None, stuck: str = "") -> str:
    """Why a task never ran on its node ('' if it did): the node is then not tested, never rejected."""
    if s is None:
        return "Slurm has no record of its task (it never started)"
    if s.state == STUCK:
        return stuck or f"its task {s.job_id} stayed PENDING ({s.reason})"
    if s.state in ("PENDING", "CONFIGURING") or (s.state == "CANCELLED" and not s.node):
        why = f"; {s.reason}" if s.reason not in ("", "None") else ""
        return f"its task {s.job_id} never started ({s.state}{why}) before the wait ended; cancelled"
    return ""


def no_result_reason(s: slurm.TaskState, why: str) -> tuple[str, str]:
    """(cause, reason) of a task that ran but left no record (OVERTIME/TIMEOUT are judged with tasks/progress.py)."""
    if s.state == GONE:
        return ("no result: ended unwatched", f"task {s.job_id} wrote no record ({why}) and Slurm no longer knows "
                "it (it ended more than MinJobAge ago; the cluster keeps no accounting)")
    code = exit_words(s)
    if s.state == "COMPLETED":
        return ("no result: wrote no record",
                f"task {s.job_id} COMPLETED ({code}) but wrote no record ({why}); is --results shared?")
    extra = f"; {s.reason}" if s.reason not in ("", "None") else ""
    killed = "killed by signal" in code
    return (f"no result: {'killed by signal' if killed else s.state}", f"task {s.job_id} {s.state} ({code}){extra}")


def overtime(opts: FleetOptions, node: str, s: slurm.TaskState, finished_s: list[float],
             progs: dict[str, dict[str, Any]], ended: float | None) -> tuple[str, str]:
    """(cause, reason) of a task that ran past --time: 'did not finish within --time' or, when its progress
    shows it stopped moving, 'hung' (tasks/progress.py); judged as of `ended`, when it was cancelled."""
    others = [d for n, d in progs.items() if n != node]
    ot = progress.judge(progs.get(node), others, finished_s, s.run_s, opts.time_limit, now=ended)
    end = "cancelled" if s.state == OVERTIME else "killed by Slurm at its time limit"
    return ot.cause, f"task {s.job_id} {ot.text}; {end}"


def read_progress(results: Path) -> dict[str, dict[str, Any]]:
    """Every node's progress file under this run's folder (tasks/progress.py), read once."""
    names = [p.name[: -len(".progress.json")] for p in (results / "nodes").glob("*.progress.json")]
    return {n: d for n in names if (d := progress.read(results, n)) is not None}


def gather(opts: FleetOptions, nodes: list[str], w: Watch) -> list[NodeInput]:
    """Each node's record, or why there is none: never started (not tested), ran past --time, died."""
    docs = {n: read_json(node_record(opts.results, n), NODE_SCHEMA) for n in nodes}
    finished = [float(d["task_s"]) for d, _ in docs.values() if d and isinstance(d.get("task_s"), (int, float))]
    progs: dict[str, dict[str, Any]] | None = None
    out = []
    for i, node in enumerate(nodes):
        s = w.states.get(i)
        path = node_record(opts.results, node)
        doc, why = docs[node]
        info = {"job_id": s.job_id, "state": s.state, "exit_code": s.exit_code} if s else {}
        if doc is not None and doc.get("node") != node:
            doc, why = None, f"{path} names node {doc.get('node')!r}"
        if doc is not None and (lie := contradicts(doc, s)):
            out.append(NodeInput(node, None, "", str(path), info, not_tested=lie))
        elif doc is not None:
            out.append(NodeInput(node, doc, "", str(path), info))
        elif s is None or never_started(s, w.stuck.get(i, "")):
            out.append(NodeInput(node, None, "", str(path), info, not_tested=never_started(s, w.stuck.get(i, ""))))
        elif opts.container and (cf := log_fault(opts.results, i)) is not None:  # Pyxis/enroot said why
            out.append(NodeInput(node, None, cf.text, str(path), info, cause=cf.cause,
                                 not_tested=cf.text if cf.not_tested else ""))
        else:
            if s.state in (OVERTIME, "TIMEOUT"):
                progs = progs if progs is not None else read_progress(opts.results)
                cause, text = overtime(opts, node, s, finished, progs, w.over.get(i))
            else:
                cause, text = no_result_reason(s, why)
            out.append(NodeInput(node, None, text, str(path), info, cause=cause))
    return out


def contradicts(doc: Mapping[str, Any], s: slurm.TaskState | None) -> str:
    """Why a node record is not its own task's: the exit code its report implies (records.Report.exit_code) is not
    the one Slurm recorded for the node's task, which the node's own slurmd reported (another node can write the
    record through the shared folder, not that); '' when they agree or the task did not end by itself."""
    from trainready.records import PLANTED_EXIT, planted_of

    if s is None or s.state not in ("COMPLETED", "FAILED"):
        return ""
    rc, _, sig = s.exit_code.partition(":")
    report = doc.get("report") if isinstance(doc.get("report"), Mapping) else {}
    status = str(report.get("status", ""))
    want = PLANTED_EXIT if planted_of(report.get("context")) else 1 if status in ("fail", "error") else 0
    if not rc.isdigit() or sig not in ("", "0") or int(rc) == want:
        return ""
    return (f"its record says {status.upper() or 'no status'} (its task would exit {want}), but Slurm says task "
            f"{s.job_id} exited {rc}: written by another process than this node's task, not judged; left as it is")


def cross_phase(opts: FleetOptions, nodes: list[str], info: Mapping[str, slurm.NodeInfo], spec_gpus: int,
                say: Progress) -> int:
    """One srun step over `nodes` (`info`: Slurm's word on them, for the first node's address); returns srun's
    exit code (the records say what each node found)."""
    from trainready.cluster.tasks.clock import ClockServer

    if not nodes:
        return 0
    first = info.get(nodes[0])
    cmd = opts.remote() + ["cluster", "cross-task", "--results", str(opts.results)]
    if not opts.collective:
        cmd.append("--no-collective")
    if opts.spec:
        cmd += ["--spec", str(Path(opts.spec).resolve()) if Path(opts.spec).is_file() else opts.spec]
    for k, v in opts.plants.items():
        cmd += ["--plant", f"{k}={v}"]
    flags = opts.container.srun_flags(opts.results) if opts.container else []
    argv = slurm.srun_argv(slurm.hostlist(nodes), len(nodes), opts.time_limit, opts.partition, flags, cmd,
                           tasks_per_node=max(1, spec_gpus), reservation=opts.reservation, gpus=spec_gpus,
                           comment=cross_comment(opts.results))
    log = opts.results / "logs" / "cross.out"
    with ClockServer() as server:
        env = dict(os.environ, MASTER_ADDR=first.addr if first else nodes[0],
                   MASTER_PORT=str(random.randint(20000, 29999)),
                   TRAINREADY_CLOCK_SERVER=f"{socket.gethostname()}:{server.port}")
        say(f"cross-node step over {len(nodes)} node(s): {shlex.join(argv[:6])} ...")
        with open(log, "w", encoding="utf-8") as fh:
            try:
                p = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                   timeout=time_seconds(opts.time_limit) + GRACE_S)
            except FileNotFoundError:
                raise SlurmError("srun: not found") from None
            except subprocess.TimeoutExpired:
                say(f"cross-node step still running after --time {opts.time_limit}; stopped (see {log})")
                return 124
    return p.returncode


def cross_comment(run_dir: Path) -> str:
    """The cross-node step's --comment: names the run, so that a later collector finds the step (wait_cross)."""
    return f"trainready cross {run_dir}"

