"""`trainready cluster run`, end to end: per-node acceptance as a Slurm job array, then the cross-node step,
then the fleet verdict (and, with --drain, the drains).

    1. sbatch --hold --array=0-(N-1)%K; array task i pinned to node i (ReqNodeList); released
    2. wait: squeue/scontrol states, progress (done / running / pending with job ids); past the deadline
       the rest is cancelled and counts as hung
    3. RESULTS/nodes/NODE.json per node, or "no result" with Slurm's state and exit code
    4. srun -N<n> over the nodes that have a record: clock, storage, limits, hosts, the collective
    5. verdict (verdict.py), fleet.json, and the drains (ledger.py)
"""

from __future__ import annotations

import os
import random
import shlex
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable

from trainready.cluster import slurm
from trainready.cluster.layout import NODE_SCHEMA, node_record, read_json
from trainready.cluster.options import FleetOptions, time_seconds
from trainready.cluster.verdict import NodeInput
from trainready.errors import SlurmError, UsageError

POLL_S = 2.0  # squeue/scontrol poll period while waiting (seconds): light on slurmctld, quick enough for people
GRACE_S = 60.0  # beyond the time limit before the collector gives up on the whole array / the cross step
# A task still RUNNING this long past its --time is cancelled by the collector itself: slurmctld checks time
# limits only periodically (measured here: a 30 s limit was enforced after ~90 s), so waiting for its TIMEOUT
# would stall every fleet run by up to a minute per hung node.
TASK_GRACE_S = 10.0
USABLE = ("idle", "mixed", "allocated", "completing")

Progress = Callable[[str], None]


def select_nodes(opts: FleetOptions) -> list[str]:
    """--nodelist (Slurm's own expansion), or the first --nodes N usable nodes of the partition."""
    if opts.nodelist:
        names = slurm.hostnames(opts.nodelist)
        if not names:
            raise UsageError(f"--nodelist {opts.nodelist}: names no node")
        return names
    info = slurm.nodes(partition=opts.partition)
    usable = [n for n, i in info.items() if i.state.rstrip("*~#!%$@^-") in USABLE and not i.drained]
    want = opts.count or len(usable)
    if want > len(usable):
        raise UsageError(f"--nodes {want}: only {len(usable)} usable node(s) in "
                         f"{'partition ' + opts.partition if opts.partition else 'the default partition'} "
                         f"({', '.join(usable) or 'none'})")
    return usable[:want]


def task_command(opts: FleetOptions) -> list[str]:
    cmd = opts.remote() + ["cluster", "node-task", "--results", str(opts.results), "--level", opts.level.value]
    if opts.spec:
        cmd += ["--spec", str(Path(opts.spec).resolve()) if Path(opts.spec).is_file() else opts.spec]
    for flag, names in (("--only", opts.only), ("--skip", opts.skip)):
        if names:
            cmd += [flag, ",".join(names)]
    for k, v in opts.plants.items():
        cmd += ["--plant", f"{k}={v}"]
    if opts.container:
        cmd += ["--image", opts.container.image]
    return cmd


def batch_script(opts: FleetOptions, gpus: int = 0) -> str:
    """The array task: one step with every CPU (a step gets one CPU per task unless it asks) and GPU of the node."""
    flags = opts.container.srun_flags(opts.results) if opts.container else []
    head = ["srun", "--ntasks=1", "--nodes=1"] + ([f"--gpus-per-node={gpus}"] if gpus else [])
    return ("#!/bin/bash\n"
            "# trainready cluster run: array task $SLURM_ARRAY_TASK_ID is one node's acceptance (pinned with\n"
            "# ReqNodeList); it writes RESULTS/nodes/$SLURMD_NODENAME.json.\n"
            f'exec {shlex.join(head)} --cpus-per-task="$SLURM_CPUS_ON_NODE" {shlex.join(flags + task_command(opts))}\n')


def submit(opts: FleetOptions, nodes: list[str], gpus: int = 0) -> str:
    from trainready.util.atomic import atomic_write_text

    for sub in ("nodes", "cross", "logs", "job"):
        (opts.results / sub).mkdir(parents=True, exist_ok=True)
    for n in nodes:  # an earlier run's record must never stand in for this run's
        node_record(opts.results, n).unlink(missing_ok=True)
    script = opts.results / "job" / "accept.sbatch"
    atomic_write_text(script, batch_script(opts, gpus))
    job = slurm.submit(slurm.sbatch_argv(str(script), len(nodes), opts.concurrency, opts.time_limit,
                                         str(opts.results / "logs" / "accept_%A_%a.out"), opts.partition,
                                         reservation=opts.reservation, gpus=gpus))
    slurm.pin(job, nodes)
    return job


def wait(job: str, nodes: list[str], limit_s: float, waves: int, say: Progress) -> dict[int, slurm.TaskState]:
    """Poll until every task has ended; a task running past limit_s + TASK_GRACE_S is cancelled (hung), and
    after waves x limit_s + GRACE_S (K tasks at a time) whatever is left is cancelled too."""
    t0, last = time.monotonic(), ""
    deadline_s = waves * limit_s + GRACE_S
    states: dict[int, slurm.TaskState] = {}
    hung: set[int] = set()
    while True:
        states = slurm.task_states(job, {i: s.job_id for i, s in states.items()}) or states
        for i, s in states.items():
            if s.state == "RUNNING" and s.run_s > limit_s + TASK_GRACE_S and i not in hung:
                say(f"{nodes[i]}: task {s.job_id} still running {s.run_s:.0f} s, past its time limit: hung; cancelling")
                slurm.cancel(s.job_id)
                hung.add(i)
        states = {i: (slurm.TaskState(i, s.job_id, "HUNG", s.exit_code, s.node, s.reason, s.run_s)
                      if i in hung and s.state == "CANCELLED" else s)
                  for i, s in states.items()}
        done = sum(1 for s in states.values() if s.done or s.state == "HUNG")
        running = [f"{nodes[i]}({s.job_id})" for i, s in sorted(states.items()) if s.state == "RUNNING"]
        pending = len(nodes) - done - len(running)
        line = f"job {job}: {done}/{len(nodes)} done, {len(running)} running{' ' + ' '.join(running[:8]) if running else ''}" \
               f"{' ...' if len(running) > 8 else ''}, {pending} pending"
        if line != last:
            say(line)
            last = line
        if done >= len(nodes):
            return states
        if time.monotonic() - t0 > deadline_s:
            say(f"job {job}: deadline {deadline_s:.0f} s passed; cancelling the {len(nodes) - done} unfinished task(s)")
            slurm.cancel(job)
            time.sleep(3.0)
            return _at_deadline(states, slurm.task_states(job, {i: s.job_id for i, s in states.items()}))
        time.sleep(POLL_S)


def _at_deadline(before: dict[int, slurm.TaskState], after: dict[int, slurm.TaskState]) -> dict[int, slurm.TaskState]:
    """What each unfinished task was when the wait gave up: RUNNING → HUNG, else still PENDING (never started)."""
    out = dict(after)
    for i, p in before.items():
        if not p.done and p.state != "HUNG":
            out[i] = slurm.TaskState(i, p.job_id, "HUNG" if p.state == "RUNNING" else "PENDING", p.exit_code,
                                     p.node, p.reason, p.run_s)
    return out


def no_result_reason(s: slurm.TaskState | None, path: Path, why: str, limit: str) -> str:
    if s is None:
        return "Slurm has no record of its task (never started)"
    rc, _, sig = s.exit_code.partition(":")
    code = f"exit code {rc}" + (f", signal {sig}" if sig and sig != "0" else "")
    if rc.isdigit() and int(rc) > 128:  # srun (and a shell) report a task killed by signal S as 128 + S
        code += f" = killed by signal {int(rc) - 128}"
    if s.state == "HUNG":
        return f"task {s.job_id} hung: still running {s.run_s:.0f} s after it started, past --time {limit}; cancelled"
    if s.state == "TIMEOUT":
        return f"task {s.job_id} TIMEOUT: hung past --time {limit}; killed by Slurm"
    if s.state in ("PENDING", "CONFIGURING"):
        return f"task {s.job_id} never started (PENDING: {s.reason}); cancelled at the end of the wait"
    if s.state == "COMPLETED":
        return f"task {s.job_id} COMPLETED ({code}) but wrote no record ({why}); is --results shared?"
    return f"task {s.job_id} {s.state} ({code}){'; ' + s.reason if s.reason not in ('', 'None') else ''}"


def gather(opts: FleetOptions, nodes: list[str], states: dict[int, slurm.TaskState]) -> list[NodeInput]:
    out = []
    for i, node in enumerate(nodes):
        s = states.get(i)
        path = node_record(opts.results, node)
        doc, why = read_json(path, NODE_SCHEMA)
        info = {"job_id": s.job_id, "state": s.state, "exit_code": s.exit_code} if s else {}
        if doc is not None and doc.get("node") != node:
            doc, why = None, f"{path} names node {doc.get('node')!r}"
        reason = "" if doc is not None else no_result_reason(s, path, why, opts.time_limit)
        out.append(NodeInput(node, doc, reason, str(path), info))
    return out


def cross_phase(opts: FleetOptions, nodes: list[str], spec_gpus: int, say: Progress) -> int:
    """One srun step over `nodes`; returns srun's exit code (the records say what each node found)."""
    from trainready.cluster.clock import ClockServer

    if not nodes:
        return 0
    info = slurm.nodes(nodes)
    first = info.get(nodes[0])
    cmd = opts.remote() + ["cluster", "cross-task", "--results", str(opts.results)]
    if opts.spec:
        cmd += ["--spec", str(Path(opts.spec).resolve()) if Path(opts.spec).is_file() else opts.spec]
    for k, v in opts.plants.items():
        cmd += ["--plant", f"{k}={v}"]
    flags = opts.container.srun_flags(opts.results) if opts.container else []
    argv = slurm.srun_argv(slurm.hostlist(nodes), len(nodes), opts.time_limit, opts.partition, flags, cmd,
                           tasks_per_node=max(1, spec_gpus), reservation=opts.reservation, gpus=spec_gpus)
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
