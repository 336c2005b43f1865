"""Job impact from Slurm accounting: the jobs that ran on a node between its last passing check and its
failure, so their owners learn which runs to re-check.

One `sacct` call per failed node (sacct(1): `-a -X -N NODE -S SINCE -E UNTIL --parsable2 --noheader
--format=...`: every user's jobs, allocations only, that ran on NODE in the window).  trainready's own jobs
(names `trainready-*`: the acceptance tasks, the cross-node and pair steps) are left out: they are the checks.
Where slurmdbd is not configured, sacct says "Slurm accounting storage is disabled" and the impact is
NOT_KNOWN; without a passing check on record the window starts `fallback_days` before the failure, said so.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Sequence

NOT_KNOWN = "not known (no accounting)"
FIELDS = ("JobID", "JobName", "User", "Account", "Partition", "State", "Start", "End", "NodeList", "ExitCode")
OWN_PREFIX = "trainready"  # the job names trainready submits (cluster/control/slurm.py, steps.py)
DISABLED = "accounting storage is disabled"  # sacct's own words without slurmdbd (Slurm 22.05)


@dataclass(frozen=True)
class Job:
    job_id: str
    name: str
    user: str
    account: str
    partition: str
    state: str
    start: str
    end: str
    nodes: str
    exit_code: str

    def to_json(self) -> dict[str, str]:
        return {"job_id": self.job_id, "name": self.name, "user": self.user, "account": self.account,
                "partition": self.partition, "state": self.state, "start": self.start, "end": self.end,
                "nodes": self.nodes, "exit_code": self.exit_code}


@dataclass(frozen=True)
class JobImpact:
    node: str
    since: str  # ISO time of the window's start (its last passing check, or the fallback)
    until: str  # ISO time of the failure
    known: bool
    jobs: tuple[Job, ...] = ()
    why: str = ""  # NOT_KNOWN (and sacct's words), or how the window was chosen

    def line(self) -> str:
        if not self.known:
            return f"{self.node}: jobs since its last pass: {self.why}"
        users = sorted({j.user for j in self.jobs})
        listed = ", ".join(f"{j.job_id} ({j.user}, {j.name}, {j.state})" for j in self.jobs[:10])
        more = f" and {len(self.jobs) - 10} more" if len(self.jobs) > 10 else ""
        return (f"{self.node}: {len(self.jobs)} job(s) of {len(users)} user(s) ran on it between {self.since} and "
                f"{self.until}{' (' + self.why + ')' if self.why else ''}: {listed or 'none'}{more}")

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "since": self.since, "until": self.until, "known": self.known,
                "why": self.why, "jobs": [j.to_json() for j in self.jobs], "text": self.line()}


def argv(node: str, since: str, until: str) -> list[str]:
    return ["sacct", "-a", "-X", "-N", node, "-S", since, "-E", until, "--parsable2", "--noheader",
            f"--format={','.join(FIELDS)}"]


def parse(text: str) -> list[Job]:
    """sacct --parsable2 lines (FIELDS, '|' between them) -> jobs; a job name holding '|' is kept whole."""
    out = []
    tail = len(FIELDS) - 2  # the fields after JobName
    for line in text.splitlines():
        parts = line.rstrip("\n").split("|")
        if len(parts) < len(FIELDS) or not parts[0]:
            continue
        name = "|".join(parts[1:len(parts) - tail])
        out.append(Job(parts[0], name, *parts[len(parts) - tail:]))
    return out


def sacct_time(t: dt.datetime) -> str:
    """sacct's -S/-E format (local time, as slurmctld stores it): 2026-12-06T23:28:55."""
    return t.astimezone().strftime("%Y-%m-%dT%H:%M:%S")


def job_impact(node: str, since: dt.datetime | None, until: dt.datetime, fallback_days: float = 7.0) -> JobImpact:
    """The jobs that ran on `node` from `since` (its last passing check; None: `fallback_days` before `until`)
    to `until` (its failure), other than trainready's own."""
    from trainready.cluster.control import slurm
    from trainready.errors import SlurmError

    why = "" if since is not None else f"no passing check on record: the last {fallback_days:g} days"
    start = since if since is not None else until - dt.timedelta(days=fallback_days)
    s, u = sacct_time(start), sacct_time(until)
    try:
        text = slurm.call(argv(node, s, u))
    except SlurmError as e:
        words = str(e)
        return JobImpact(node, s, u, False, (), NOT_KNOWN if DISABLED in words else f"not known ({words[:200]})")
    jobs = tuple(j for j in parse(text) if not j.name.startswith(OWN_PREFIX))
    return JobImpact(node, s, u, True, jobs, why)


def impacts(nodes: Sequence[str], last_pass: dict[str, dt.datetime], until: dt.datetime,
            fallback_days: float = 7.0) -> dict[str, dict[str, Any]]:
    """node -> its JobImpact as JSON, for every failed node; one sacct call each (none where accounting is off:
    the first answer says so for all)."""
    out: dict[str, dict[str, Any]] = {}
    for n in nodes:
        imp = job_impact(n, last_pass.get(n), until, fallback_days)
        out[n] = imp.to_json()
        if not imp.known and imp.why == NOT_KNOWN:
            for rest in nodes:
                out.setdefault(rest, JobImpact(rest, imp.since, imp.until, False, (), NOT_KNOWN).to_json())
            break
    return out


def for_run(results: Any, nodes: Sequence[str], until_iso: str, fallback_days: float = 7.0) -> dict[str, dict[str, Any]]:
    """The fleet record's `context.job_impact`: each rejected node's jobs since its last active pass under
    `results` (cluster/coverage.py) until the run's end."""
    from trainready.cluster import coverage

    if not nodes:  # nothing rejected: no record read, no sacct call
        return {}
    passes = coverage.last_passes(results)
    until = dt.datetime.fromisoformat(until_iso) if until_iso else dt.datetime.now(dt.timezone.utc)
    last = {n: t for n in nodes if (t := (passes.get(n) or {}).get(coverage.ACTIVE)) is not None}
    return impacts(list(nodes), last, until, fallback_days)
