"""A timing below its floor is measured again before it fails: load on the host is not a fault.

The node check's short sweep judges busbw (comm.expected_busbw_gbps x comm.min_fraction), all ops together and
collective efficiency against floors.  A healthy node that shares its host with bursty work (a file upload, a
page-cache flush, a neighbour's job) can miss one of them in one run; a slow link or GPU misses it in every run.
So where the only failures of a sweep are timings, the whole sweep runs once more and a timing verdict fails only
when the second run fails it too (both figures are reported).  Wrong elements and a confirmed straggler
(comm/confirm.py measures its own suspects again) fail at once.
"""

from __future__ import annotations

from typing import Sequence

from trainready.records import Outcome, Status

Verdicts = Sequence[tuple[str, str, Outcome]]
TIMING_KINDS = ("all_ops", "efficiency")  # comm.all_ops, comm.efficiency: figures only, never correctness


def is_timing_failure(name: str, outcome: Outcome) -> bool:
    """A FAIL that rests on a timing alone: an op's busbw (zero wrong elements), all ops together, efficiency."""
    if outcome.status != Status.FAIL:
        return False
    kind = name.split(".")[1] if "." in name else name
    if kind in TIMING_KINDS:
        return True
    if kind == "pairs":
        return False  # confirmed by its own solo re-measurement
    return not any(m.name == "comm_wrong_elements" and m.value > 0 for m in outcome.metrics)


def needs_remeasure(verdicts: Verdicts) -> bool:
    """Every failure of the sweep is a timing (so a second run can clear them all)."""
    failed = [(n, o) for n, _, o in verdicts if o.status in (Status.FAIL, Status.ERROR)]
    return bool(failed) and all(is_timing_failure(n, o) for n, o in failed)


def merge(first: Verdicts, again: Verdicts) -> list[tuple[str, str, Outcome]]:
    """The verdicts after a second run: a timing that failed the first run takes the second run's verdict,
    with the first run's figure in its message; everything else keeps the first run's."""
    second = {n: o for n, _, o in again}
    out = []
    for name, title, o in first:
        o2 = second.get(name)
        if o2 is None or not is_timing_failure(name, o):
            out.append((name, title, o))
            continue
        if o2.status == Status.FAIL:
            msg = f"{o2.message}; measured again: the first run failed it too ({o.message})"
        else:
            msg = f"{o2.message}; measured again: the first run's figure was below ({o.message}): not a fault"
        out.append((name, title, Outcome(o2.status, msg, o2.metrics, remedy=o2.remedy,
                                         details={**dict(o2.details), "first_run": {"message": o.message}})))
    return out
