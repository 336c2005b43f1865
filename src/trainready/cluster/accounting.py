"""The jobs that ran on a node between two times, from Slurm accounting (slurmdbd, `sacct`).

A drained node's owners learn which runs to re-check: the jobs that ran on it between its last passing check
and its failure.  Without slurmdbd (AccountingStorageType unset) Slurm keeps no such list, and this says so:
"not known (no accounting)".  The RMA folder (cluster/rma/) and `cluster history` read it through
`job_impact`; the accounting query itself is filled in where slurmdbd is configured.
"""

from __future__ import annotations

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


def job_impact(node: str, since: str, until: str) -> JobImpact:
    """The jobs that ran on `node` between `since` and `until`: not known until slurmdbd is queried here."""
    return JobImpact(node, since, until)
