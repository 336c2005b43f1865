"""Job impact from Slurm accounting, for the fleet record and the RMA folder alike: the jobs that ran on a node between its last passing check and its
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
# sacct runs in UTC with the ISO format (sacct(1) ENVIRONMENT: SLURM_TIME_FORMAT; the window -S/-E and the jobs'
# Start/End are read and printed in the process's TZ): the window it is given and the times it prints are UTC.
ENV = {"TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
PRIVILEGED = ("Administrator", "Operator")  # sacctmgr AdminLevel that sees every user's jobs under PrivateData


@dataclass(frozen=True)
class Job:
    job_id: str
    name: str
    user: str
    account: str
    partition: str
    state: str
    start: str  # ISO 8601 UTC with its zone (+00:00), or sacct's word ("Unknown", "None")
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
    since: str  # ISO 8601 UTC (+00:00) of the window's start (its last passing check, or the fallback)
    until: str  # ISO 8601 UTC (+00:00) of the failure
    known: bool
    jobs: tuple[Job, ...] = ()
    why: str = ""  # NOT_KNOWN (and sacct's words), or how the window was chosen
    partial: str = ""  # why the list may lack other users' jobs (Slurm's PrivateData=jobs); "" when it cannot

    def line(self) -> str:
        if not self.known:
            return f"{self.node}: job impact: {self.why}"
        users = sorted({j.user for j in self.jobs})
        listed = ", ".join(f"{j.job_id} ({j.user}, {j.name}, {j.state})" for j in self.jobs[:10])
        more = f" and {len(self.jobs) - 10} more" if len(self.jobs) > 10 else ""
        notes = "; ".join(w for w in (self.why, f"MAY BE PARTIAL: {self.partial}" if self.partial else "") if w)
        return (f"{self.node}: job impact: {len(self.jobs)} job(s) of {len(users)} user(s) ran on it between {self.since} and "
                f"{self.until}{' (' + notes + ')' if notes else ''}: {listed or 'none'}{more}")

    def vendor_text(self) -> str:
        """The same for a vendor's eyes (the RMA folder): counts, job ids and states; no user or job name."""
        if not self.known:
            return self.why
        users = len({j.user for j in self.jobs})
        ids = ", ".join(f"{j.job_id} ({j.state})" for j in self.jobs[:20])
        more = f" and {len(self.jobs) - 20} more" if len(self.jobs) > 20 else ""
        part = f" (may be partial: {self.partial})" if self.partial else ""
        return f"{len(self.jobs)} job(s) of {users} user(s){part}" + (f": {ids}{more}" if ids else "")

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "since": self.since, "until": self.until, "known": self.known,
                "why": self.why, "partial": self.partial, "jobs": [j.to_json() for j in self.jobs],
                "text": self.line()}

    def vendor_json(self) -> dict[str, Any]:
        return {"node": self.node, "since": self.since, "until": self.until, "known": self.known, "why": self.why,
                "partial": self.partial, "jobs": [{"job_id": j.job_id, "state": j.state, "start": j.start,
                                                   "end": j.end} for j in self.jobs],
                "users": len({j.user for j in self.jobs}), "text": self.vendor_text()}


def argv(node: str, since: str, until: str) -> list[str]:
    return ["sacct", "-a", "-X", "-N", node, "-S", since, "-E", until, "--parsable2", "--noheader",
            f"--format={','.join(FIELDS)}"]


def parse(text: str) -> list[Job]:
    """sacct --parsable2 lines (FIELDS, '|' between them) -> jobs; a job name holding '|' is kept whole; Start and
    End, printed in UTC (ENV), carry their zone."""
    out = []
    tail = len(FIELDS) - 2  # the fields after JobName
    for line in text.splitlines():
        parts = line.rstrip("\n").split("|")
        if len(parts) < len(FIELDS) or not parts[0]:
            continue
        name = "|".join(parts[1:len(parts) - tail])
        user, account, partition, state, start, end, nodes, code = parts[len(parts) - tail:]
        out.append(Job(parts[0], name, user, account, partition, state, utc(start), utc(end), nodes, code))
    return out


def utc(text: str) -> str:
    """sacct's standard time (UTC under ENV) with its zone: 2026-12-06T23:28:55 -> 2026-12-06T23:28:55+00:00;
    its words (Unknown, None) as they are."""
    try:
        t = dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return text
    return t.replace(tzinfo=dt.timezone.utc).isoformat(timespec="seconds")


def sacct_time(t: dt.datetime) -> str:
    """sacct's -S/-E in UTC (sacct runs under ENV): 2026-12-06T23:28:55; a time without a zone is taken as UTC."""
    return (t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)).astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def visibility() -> str:
    """'' when this caller's sacct -a lists every user's jobs; else why it may list only the caller's own:
    slurm.conf's PrivateData=jobs (slurm.conf(5)) hides other users' jobs from all but root, SlurmUser and users
    of AdminLevel Operator or Administrator (sacctmgr)."""
    import getpass
    import os

    from trainready.cluster.control import slurm
    from trainready.errors import SlurmError

    try:
        conf = slurm.config()
    except SlurmError as e:
        return f"PrivateData not read ({e})"
    private = [w.strip().lower() for w in conf.get("PrivateData", "none").split(",")]
    if "jobs" not in private or os.geteuid() == 0:
        return ""
    user = getpass.getuser()
    if user == conf.get("SlurmUser", "").split("(")[0]:
        return ""
    try:
        level = slurm.call(["sacctmgr", "-n", "-P", "show", "user", user, "format=AdminLevel"]).strip() or "None"
    except SlurmError as e:
        level = f"not read: {e}"
    if level in PRIVILEGED:
        return ""
    return (f"PrivateData=jobs and {user} is no Slurm operator (AdminLevel {level}): sacct lists only {user}'s "
            "own jobs; run as root, SlurmUser or an operator for every user's")


def job_impact(node: str, since: dt.datetime | None, until: dt.datetime, fallback_days: float = 7.0,
               partial: str = "") -> JobImpact:
    """The jobs that ran on `node` from `since` (its last passing check; None: `fallback_days` before `until`)
    to `until` (its failure), other than trainready's own; `partial`: visibility()'s word, said with them."""
    from trainready.cluster.control import slurm
    from trainready.errors import SlurmError

    why = "" if since is not None else f"no passing check on record: the last {fallback_days:g} days"
    start = since if since is not None else until - dt.timedelta(days=fallback_days)
    s, u = sacct_time(start), sacct_time(until)
    window = (utc(s), utc(u))  # what the fleet record keeps: the same moments with their zone
    try:
        text = slurm.call(argv(node, s, u), env=ENV)
    except SlurmError as e:
        return JobImpact(node, *window, False, (), not_known(str(e)))
    jobs = tuple(j for j in parse(text) if not j.name.startswith(OWN_PREFIX))
    return JobImpact(node, *window, True, jobs, why, partial)


def not_known(words: str) -> str:
    """Why the jobs are not known, from sacct's failure: no slurmdbd configured, slurmdbd not answering, else its
    words."""
    if DISABLED in words:
        return NOT_KNOWN
    if "talking to the database" in words or "no answer within" in words:
        said = words[words.find("Problem talking"):] if "Problem talking" in words else words
        return f"not known (slurmdbd not answering: {said[:200]})"
    return f"not known ({words[:200]})"


def impacts(nodes: Sequence[str], last_pass: dict[str, dt.datetime], until: dt.datetime,
            fallback_days: float = 7.0) -> dict[str, JobImpact]:
    """node -> its JobImpact, for every failed node; one sacct call each, none after a failure (accounting off
    or slurmdbd silent: the first answer says so for all, at once)."""
    out: dict[str, JobImpact] = {}
    partial: str | None = None
    for n in nodes:
        imp = job_impact(n, last_pass.get(n), until, fallback_days, partial or "")
        if imp.known and partial is None:
            partial = visibility()
            imp = JobImpact(imp.node, imp.since, imp.until, True, imp.jobs, imp.why, partial)
        out[n] = imp
        if not imp.known:
            for rest in nodes:
                out.setdefault(rest, JobImpact(rest, *_window(last_pass.get(rest), until, fallback_days), False, (),
                                               imp.why))
            break
    return out


def _window(since: dt.datetime | None, until: dt.datetime, fallback_days: float) -> tuple[str, str]:
    start = since if since is not None else until - dt.timedelta(days=fallback_days)
    return utc(sacct_time(start)), utc(sacct_time(until))


def last_active(results: Any, nodes: Sequence[str]) -> dict[str, dt.datetime]:
    """Each node's last active pass under `results` (cluster/repair/coverage.py): the one source of the window's start,
    for the fleet record and the RMA folder alike."""
    from trainready.cluster.repair import coverage

    passes = coverage.last_passes(results)
    return {n: t for n in nodes if (t := (passes.get(n) or {}).get(coverage.ACTIVE)) is not None}


def for_run(results: Any, nodes: Sequence[str], until_iso: str, fallback_days: float = 7.0) -> dict[str, JobImpact]:
    """Each rejected node's jobs since its last active pass under `results` until the run's end: the fleet
    record's `context.job_impact` (as JSON) and the RMA folder's (without users and job names)."""
    if not nodes:  # nothing rejected: no record read, no sacct call
        return {}
    until = dt.datetime.fromisoformat(until_iso) if until_iso else dt.datetime.now(dt.timezone.utc)
    return impacts(list(nodes), last_active(results, nodes), until, fallback_days)


def _when(text: str) -> dt.datetime | None:
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def for_node(results: Any, node: str, until: str, fallback_days: float = 7.0) -> JobImpact:
    """One drained node's job impact for its RMA folder (a drain hands its run's own over instead): the jobs that
    ran on `node` between its last active pass under `results` (none: the `fallback_days` before `until`) and
    `until` (ISO 8601), other than trainready's own; why not where they are not known."""
    end = _when(until)
    if end is None:
        return JobImpact(node, "", until, False, (), f"not known (the failure's time {until!r} is not ISO 8601)")
    return impacts([node], last_active(results, [node]), end, fallback_days)[node]
