"""The collector's sleep between two polls of Slurm, cut short when a node writes its record.

A node task writes its record (RESULTS/runs/ID/nodes/NODE.json, atomically) as its last act, so a new record
means a task is about to end: the collector asks Slurm again about SETTLE_S later rather than after the rest of
its poll interval, which grows to POLL_MAX_S over a run.  A 3-node run then ends seconds after its last task,
not up to half a minute after.  Each record wakes the collector at most once, never sooner than `floor_s` after
the last poll: the fleet-size floor that keeps a 640-node run at one slurmctld RPC per 30 s still holds.  A task
that lingers after its record (a container's teardown: enroot removes the unpacked image, ~30k files) is asked
about again FOLLOW_S, then 2x, 4x ... later (`follow_up`), not at the next regular poll up to 30 s away: a 3-node
Pyxis run had sat 30 s between its last record and its cross-node step.  A task the collector cancelled is
followed up the same way; and a poll is due when a running task passes --time + TASK_GRACE_S
(watch.overtime_due): a task hung in a 0:30 run was cancelled at 54 s and seen ended 18 s later; now 42 s and 2 s.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

STEP_S = 0.5  # seconds between two looks at the records folder (one readdir)
SETTLE_S = 1.0  # after a new record: its task's exit and slurmstepd's report to slurmctld (sub-second here)
FOLLOW_S = 2.0  # the first follow-up poll of a task that outlived its record; each next one waits twice as long


def records(folder: Path | None) -> int:
    """Node records in `folder` (NODE.json; NODE.progress.json and temporary files are not records); 0 when
    there is no folder yet."""
    if folder is None:
        return 0
    try:
        with os.scandir(folder) as it:
            return sum(1 for e in it if e.name.endswith(".json") and not e.name.endswith(".progress.json")
                       and not e.name.startswith("."))
    except OSError:
        return 0


def nap(seconds: float, floor_s: float, folder: Path | None, seen: int) -> int:
    """Sleep `seconds`, or less: from `floor_s` on, a record beyond the `seen` ones ends the nap SETTLE_S later.
    Returns the records counted when it woke (the next nap's `seen`)."""
    start = time.monotonic()
    end = start + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(STEP_S, left))
        now = records(folder)
        if now > seen and time.monotonic() - start + SETTLE_S >= floor_s:
            time.sleep(min(SETTLE_S, max(0.0, end - time.monotonic())))
            return now
    return max(seen, records(folder))


def follow_up(interval_s: float, floor_s: float, lingering: bool, previous_s: float) -> tuple[float, float]:
    """The next nap's length, and the follow-up step to remember: while a task has written its record but not
    ended (`lingering`), FOLLOW_S, then twice the previous step, never under `floor_s` nor over the regular
    `interval_s`; otherwise `interval_s` (and the step starts again from FOLLOW_S)."""
    if not lingering:
        return interval_s, 0.0
    step = FOLLOW_S if previous_s <= 0 else 2 * previous_s
    return min(interval_s, max(floor_s, step)), step
