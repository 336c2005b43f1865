"""Slurm's own commands, and nothing else: every sbatch/srun/squeue/scontrol/sacct/scancel call goes through here.

No home-made remote launcher, no ssh: Slurm places the work and reports what became of it.  The command lines
are built by pure functions (`sbatch_argv`, `srun_argv`) so tests can assert them exactly; `call` runs one.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from typing import Mapping, Sequence

from trainready.cluster.control import outage
from trainready.errors import ControllerDown, SlurmError

CALL_TIMEOUT_S = 60.0  # a loaded slurmctld answers in seconds; no answer in a minute means it is not answering
# Slurm job states after which a job or array task will not run again (squeue(1) "JOB STATE CODES").
TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                      "DEADLINE", "PREEMPTED", "REVOKED", "SPECIAL_EXIT"})
PREFIX = "trainready:"  # every drain reason trainready sets starts with this; anything else is an admin's
# Node states (sinfo %T, base name) in which a pinned task starts by itself, now or once the node's current
# jobs end (sinfo(1) "NODE STATE CODES"); every other state (drained, down, fail, maint, reserved, future,
# unknown, ...) is an unavailable node: not tested, never submitted to.
USABLE = frozenset({"idle", "mixed", "allocated", "completing", "planned"})
# sinfo state suffixes: '*' not responding, '$' in a maintenance reservation, '@' pending reboot: unavailable;
# '~' powered off, '#' powering up, '%' powering down, '!' pending power down, '^' rebooting, '-' planned by
# backfill: power saving and reboots that Slurm completes by itself.
SUFFIX_DOWN = "*$@"
SUFFIXES = "*~#!%$@^-"
# Pending reasons that cannot clear by themselves (squeue(1) "JOB REASON CODES"): the task is named, cancelled
# and its node recorded as not tested.  ("Resources", "Priority", "BeginTime", ... clear by themselves.)
STUCK = frozenset({"ReqNodeNotAvail", "PartitionDown", "PartitionInactive", "NodeDown", "PartitionNodeLimit",
                   "PartitionTimeLimit", "BadConstraints", "JobHeldAdmin", "DependencyNeverSatisfied",
                   "InvalidAccount", "InvalidQOS", "ReservationDeleted", "Reservation", "resv_not_found"})


def call(argv: Sequence[str], timeout: float = CALL_TIMEOUT_S, stdin: str | None = None,
         env: Mapping[str, str] | None = None) -> str:
    """One Slurm command (`stdin`: what scontrol reads; `env`: for it alone): its stdout, or one SlurmError line; a silent
    slurmctld waited for where a Patience is in force (outage.py; an sbatch only if surely unsent), never slurmdbd."""
    return outage.through(lambda: _call_once(argv, timeout, stdin, env), shlex.join(argv[:3]), resend=argv[0] != "sbatch")


def _call_once(argv: Sequence[str], timeout: float, stdin: str | None, env: Mapping[str, str] | None) -> str:
    ctld, cmd = argv[0] not in ("sacct", "sacctmgr"), shlex.join(argv[:3])  # slurmdbd's silence: no ControllerDown
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, input=stdin,
                           env={**os.environ, **env} if env else None)
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]}: not found (run on a Slurm login node; for a test cluster on this host: "
                         "scripts/local-slurm.sh up)") from None
    except subprocess.TimeoutExpired:
        words = f"no answer within {timeout:.0f} s"  # below: a silent slurmctld, or slurmdbd's plain error
        raise (ControllerDown(f"{cmd}: {words}", words, unsent=False) if ctld else SlurmError(f"{cmd}: {words}")) from None
    if p.returncode != 0:
        words = " ".join((p.stderr or p.stdout).split()) or f"exit code {p.returncode}"
        if ctld and (down := outage.silent(cmd, words)) is not None:
            raise down
        raise SlurmError(f"{cmd}: {words[:300]}")
    return p.stdout


def hostnames(expr: str) -> list[str]:
    """Slurm's own expansion of a hostlist expression (`scontrol show hostnames`)."""
    return call(["scontrol", "show", "hostnames", expr]).split()


def hostlist(names: Sequence[str]) -> str:
    """Slurm's own compression of node names into a hostlist expression (`scontrol show hostlist`); one plain name is
    its own expression (no call: a command that names one node needs no Slurm configuration for it)."""
    if len(names) == 1 and not any(c in names[0] for c in ",[]"):
        return names[0]
    return call(["scontrol", "show", "hostlist", ",".join(names)]).strip()


@dataclass(frozen=True)
class NodeInfo:
    name: str
    state: str  # sinfo %T, lower case: idle, mixed, allocated, drained, draining, down, ... ('*': not responding)
    addr: str  # NodeAddr: where a rendezvous on this node listens
    reason: str  # "" when none

    @property
    def base(self) -> str:
        """The state without its suffix flags ('drained*' → 'drained')."""
        return self.state.rstrip(SUFFIXES)

    @property
    def drained(self) -> bool:
        return self.base.startswith(("drain", "drained", "draining"))

    @property
    def flags(self) -> str:
        """The state's suffix flags ('idle*' → '*')."""
        return self.state[len(self.base):]

    @property
    def usable(self) -> bool:
        """A pinned task can start on it by itself (idle or busy, not drained/down/reserved/not responding)."""
        return self.base in USABLE and not any(c in self.flags for c in SUFFIX_DOWN)

    @property
    def ours(self) -> bool:
        """Drained by trainready (reason starts with 'trainready:'), as opposed to by an administrator."""
        return self.reason.startswith(PREFIX)


def nodes(names: Sequence[str] | None = None, partition: str | None = None) -> dict[str, NodeInfo]:
    """State, address and reason of nodes (`sinfo -N`), in Slurm's order; a node in two partitions once."""
    argv = ["sinfo", "--local", "-h", "-N", "-o", "%N\t%T\t%o\t%E"]
    if partition:
        argv += ["-p", partition]
    if names:
        argv += ["-n", ",".join(names)]
    out: dict[str, NodeInfo] = {}
    for line in call(argv).splitlines():
        parts = line.split("\t", 3)
        if len(parts) == 4 and parts[0] not in out:
            reason = "" if parts[3].strip() in ("none", "(null)") else parts[3].strip()
            out[parts[0]] = NodeInfo(parts[0], parts[1].strip(), parts[2].strip(), reason)
    return out


def sbatch_argv(script: str, n: int, concurrency: int, time_limit: str, log_pattern: str, partition: str | None,
                job_name: str = "trainready-accept", reservation: str | None = None, gpus: int = 0,
                licenses: str | None = None) -> list[str]:
    """One held array job, task i for node i; `pin` then points each task at its node and releases it.

    --exclusive --mem=0: the task gets the whole node (every core and byte), as acceptance must; GPUs are
    generic resources that --exclusive does not allocate, so they are asked for (--gpus-per-node)."""
    argv = ["sbatch", "--parsable", "--hold", f"--array=0-{n - 1}%{max(1, min(concurrency, n))}", "--nodes=1",
            "--ntasks=1", "--exclusive", "--mem=0", f"--time={time_limit}", f"--job-name={job_name}",
            f"--output={log_pattern}"] + ([f"--gpus-per-node={gpus}"] if gpus else [])
    if partition:
        argv.append(f"--partition={partition}")
    if reservation:
        argv.append(f"--reservation={reservation}")
    if licenses:  # each array task holds them while it runs: the license count caps the tasks at once
        argv.append(f"--licenses={licenses}")
    return argv + [script]


def srun_argv(nodelist: str, n: int, time_limit: str, partition: str | None, container_flags: Sequence[str],
              command: Sequence[str], job_name: str = "trainready-cross", tasks_per_node: int = 1,
              reservation: str | None = None, gpus: int = 0, comment: str | None = None) -> list[str]:
    """One step over `nodelist` (the cross-node phase): one task per GPU (tasks_per_node), one per CPU node.
    --kill-on-bad-exit=0 and --no-kill (srun(1)): a task that fails, or a node whose launch fails, leaves the
    others running to write their records; at 640 nodes on one host srun without --no-kill aborted the whole
    step on the first failed launch, and no node had a record."""
    argv = ["srun", f"--nodes={n}", f"--ntasks-per-node={tasks_per_node}", f"--nodelist={nodelist}", f"--time={time_limit}",
            f"--job-name={job_name}", "--kill-on-bad-exit=0", "--no-kill"] + ([f"--gpus-per-node={gpus}"] if gpus else [])
    if partition:
        argv.append(f"--partition={partition}")
    if reservation:
        argv.append(f"--reservation={reservation}")
    if comment:
        argv.append(f"--comment={comment}")  # squeue %k: how a later collector finds the step (run.wait_cross)
    return argv + list(container_flags) + list(command)


def submit(argv: Sequence[str]) -> str:
    """`sbatch --parsable ...` → the job id ("123" or "123;cluster" → "123")."""
    out = call(argv).strip()
    job = out.split(";", 1)[0]
    if not job.isdigit():
        raise SlurmError(f"sbatch --parsable printed {out!r}, expected a job id")
    return job


def pin(job: str, nodes_in_order: Sequence[str]) -> None:
    """Array task i runs on nodes_in_order[i] only (ReqNodeList), then the held array is released.

    The N updates go to one `scontrol` process as commands on its stdin (scontrol(1): with no command on
    the line it reads them from standard input): one process for the fleet, not one per node; the RPCs
    are the same (per update: REQUEST_FED_INFO, REQUEST_JOB_INFO_SINGLE, REQUEST_UPDATE_JOB, sdiag on Slurm
    22.05: a ReqNodeList update makes scontrol first check that the id names one job, loading it with
    SHOW_ALL, which asks for the federation first, `--local` or not; scontrol/update_job.c, _is_single_job).
    scontrol carries on past a failed line and exits 1; then the held array is cancelled, since
    held it would wait in the queue forever, and the error names the tasks' nodes."""
    lines = "".join(f"update JobId={job}_{i} ReqNodeList={node}\n" for i, node in enumerate(nodes_in_order))
    try:
        # + 0.1 s per update: 30x the 3.2 ms each took on the local cluster (128 in 0.40 s, one process)
        call(["scontrol"], timeout=CALL_TIMEOUT_S + len(nodes_in_order) / 10, stdin=lines)
        call(["scontrol", "release", job])
    except SlurmError as e:
        try:
            cancel(job)
            gone = f"the held array was cancelled (scancel {job})"
        except SlurmError as c:
            gone = f"cancelling the held array failed too ({c}): scancel {job}"
        bad = sorted({nodes_in_order[int(i)] for i in re.findall(rf"\b{job}_(\d+)\b", str(e))
                      if int(i) < len(nodes_in_order)})
        raise SlurmError(f"pinning array job {job} to its nodes{' (' + ', '.join(bad) + ')' if bad else ''}: "
                         f"{e}; {gone}") from None


@dataclass(frozen=True)
class TaskState:
    index: int
    job_id: str  # this task's own job id (Slurm gives array tasks their own)
    state: str  # PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, CANCELLED, ...
    exit_code: str  # "rc:signal", as Slurm reports it
    node: str
    reason: str  # Slurm's Reason= (why pending, or why it ended)
    run_s: float = 0.0  # RunTime: seconds since it started

    @property
    def done(self) -> bool:
        return self.state in TERMINAL


KV = re.compile(r"(\w+)=(\S*)")


def task_states(job: str, known: dict[int, str] | None = None) -> dict[int, TaskState]:
    """Each array task's state from slurmctld (`scontrol show job -o`; records live MinJobAge s after the end),
    else from what the cluster keeps (_from_accounting; `known` = {task index: its job id}); {} when Slurm no
    longer knows the job.  A silent controller is waited for (outage.py), never read as "no job"."""
    try:
        text = call(["scontrol", "--local", "show", "job", "-o", job])  # --local: no REQUEST_FED_INFO first
    except ControllerDown:
        raise
    except SlurmError:  # "Invalid job id specified": ended more than MinJobAge ago
        return _from_accounting(job, known or {})
    out: dict[int, TaskState] = {}
    for line in text.splitlines():
        kv = dict(KV.findall(line))
        idx = kv.get("ArrayTaskId", "").split("%")[0]  # "0%1": a one-task array, never split (its throttle after %)
        if not idx.isdigit():
            continue  # the still-unsplit pending rest of the array ("3-9%4")
        nodes_ = kv.get("NodeList", "")
        out[int(idx)] = TaskState(int(idx), kv.get("JobId", ""), kv.get("JobState", "UNKNOWN"),
                                  kv.get("ExitCode", ""), "" if nodes_ == "(null)" else nodes_, kv.get("Reason", ""),
                                  _seconds(kv.get("RunTime", "")))
    return out


def _seconds(text: str) -> float:
    """Slurm's [D-]HH:MM:SS → seconds (0 when absent)."""
    m = re.match(r"^(?:(\d+)-)?(\d+):(\d+):(\d+)$", text)
    if not m:
        return 0.0
    d, h, mi, se = (int(x or 0) for x in m.groups())
    return float(((d * 24 + h) * 60 + mi) * 60 + se)


_CONFIG: dict[str, dict[str, str]] = {}  # SLURM_CONF → slurmctld's configuration, read once


def config() -> dict[str, str]:  # `scontrol show config`: 'Key = Value' lines
    key = os.environ.get("SLURM_CONF", "")
    if key not in _CONFIG:
        lines = (line.partition("=") for line in call(["scontrol", "show", "config"]).splitlines())
        _CONFIG[key] = {k.strip(): v.strip() for k, sep, v in lines if sep}
    return _CONFIG[key]


def _from_accounting(job: str, known: dict[int, str]) -> dict[int, TaskState]:
    """The tasks' ends from accounting (AccountingStorageType: `sacct`) or the job-completion log (JobCompType
    jobcomp/filetxt: `sacct -c`, each task under its own job id); {} where the cluster keeps neither."""
    fields = ["-n", "-P", "-o", "JobID,State,ExitCode,NodeList"]
    conf = config()
    if conf.get("AccountingStorageType", "accounting_storage/none") != "accounting_storage/none":
        argv = ["sacct", "-j", job, *fields]  # slurmdbd: array tasks as JOB_INDEX
    elif conf.get("JobCompType") == "jobcomp/filetxt":
        argv = ["sacct", "-c", "-j", ",".join(sorted(set(known.values()) | {job})), *fields]  # each task's own id
    else:
        return {}
    try:
        text = call(argv)
    except SlurmError:
        return {}
    by_id = {v: k for k, v in known.items()}
    out: dict[int, TaskState] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 4:
            continue
        m = re.match(r"^\d+_(\d+)$", parts[0])
        idx = int(m.group(1)) if m else by_id.get(parts[0])
        if idx is not None and parts[1]:
            out[idx] = TaskState(idx, parts[0], parts[1].split()[0], parts[2], parts[3], "")
    return out


def cancel(*jobs: str) -> None:
    """scancel the jobs (or array tasks) named, in one command."""
    call(["scancel", *jobs])


def drain(node: str, reason: str) -> None:
    """Take `node` out of service with `reason` (callers prefix it with PREFIX), inside '"' (update_node.c)."""
    call(["scontrol", "update", f"nodename={node}", "state=drain", f'reason="{reason}"'])  # scontrol strips 1 '"' each end


def undrain(node: str) -> None:
    call(["scontrol", "update", f"nodename={node}", "state=resume"])
