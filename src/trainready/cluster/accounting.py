"""The jobs that ran on a drained node since its last pass, for its RMA folder (cluster/rma/).

One source with the fleet record: the window starts at the node's last active pass under RESULTS
(`sacct.last_active`, from cluster/coverage.py) and the query is cluster/sacct.py's.  A drain hands its run's
answer over (the very one in fleet.json); `bundle --rma` and a folder written without one ask here.  Without
slurmdbd (AccountingStorageType unset) Slurm keeps no such list, and this says so: "not known (no accounting)".
The folder shows it through `JobImpact.vendor_text`/`vendor_json`: counts, job ids and states, no user or job name.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from trainready.cluster import sacct

NOT_KNOWN = sacct.NOT_KNOWN


def _when(text: str) -> dt.datetime | None:
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def job_impact(results: Path, node: str, until: str, fallback_days: float = 7.0) -> sacct.JobImpact:
    """The jobs that ran on `node` between its last active pass under `results` (none: the `fallback_days`
    before `until`) and `until` (ISO 8601), other than trainready's own; why not where they are not known."""
    end = _when(until)
    if end is None:
        return sacct.JobImpact(node, "", until, False, (), f"not known (the failure's time {until!r} is not ISO 8601)")
    return sacct.impacts([node], sacct.last_active(results, [node]), end, fallback_days)[node]
