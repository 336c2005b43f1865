"""The jobs that ran on a node between two times, from Slurm accounting (slurmdbd, `sacct`).

A drained node's owners learn which runs to re-check: the jobs that ran on it between its last passing check
and its failure.  Without slurmdbd (AccountingStorageType unset) Slurm keeps no such list, and this says so:
"not known (no accounting)".  The RMA folder (cluster/rma/) reads it through `job_impact`, the fleet record and
`cluster history` through cluster/sacct.py, which runs the query.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

NOT_KNOWN = "not known (no accounting)"


@dataclass(frozen=True)
class JobImpact:
    """The jobs that ran on `node` in [since, until] (ISO 8601 UTC), or why they are not known."""

    node: str
    since: str  # "" when the node never passed a check trainready recorded
    until: str
    jobs: tuple[str, ...] = ()  # job ids with user and name, as sacct gives them
    known: bool = False
    why: str = NOT_KNOWN  # "" when known

    def text(self) -> str:
        if not self.known:
            return self.why
        return ", ".join(self.jobs) if self.jobs else "none"


def _when(text: str) -> dt.datetime | None:
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def job_impact(node: str, since: str, until: str) -> JobImpact:
    """The jobs that ran on `node` between `since` and `until` (ISO 8601; `since` "" when the node never passed:
    the 7 days before `until`), other than trainready's own: one `sacct` (cluster/sacct.py); without slurmdbd,
    or a time that does not parse, why not."""
    from trainready.cluster import sacct

    end = _when(until)
    if end is None:
        return JobImpact(node, since, until, why=f"not known (the failure's time {until!r} is not ISO 8601)")
    imp = sacct.job_impact(node, _when(since) if since else None, end)
    if not imp.known:
        return JobImpact(node, since, until, why=imp.why)
    return JobImpact(node, since, until, tuple(f"{j.job_id} ({j.user}, {j.name}, {j.state})" for j in imp.jobs),
                     True, "")
