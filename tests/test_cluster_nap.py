"""The collector's sleep between two polls ends soon after a node writes its record (cluster/control/nap.py), and only
then: a progress file, a temporary file or no new record leave it to its full length; a task that outlives its
record is asked about again 2, 4, 8 ... s later, within the fleet floor and the regular interval."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from trainready.cluster.control import nap


def write_later(path: Path, after_s: float) -> threading.Thread:
    th = threading.Thread(target=lambda: (time.sleep(after_s), path.write_text("{}")), daemon=True)
    th.start()
    return th


def test_records_count_only_node_records(tmp_path: Path) -> None:
    assert nap.records(tmp_path / "absent") == 0 and nap.records(None) == 0
    for name in ("node1.progress.json", ".node1.json.tmp", ".node2.json", "notes.txt"):
        (tmp_path / name).write_text("{}")
    assert nap.records(tmp_path) == 0
    (tmp_path / "node1.json").write_text("{}")
    assert nap.records(tmp_path) == 1


def test_no_new_record_sleeps_the_whole_interval_a_new_one_wakes_it(tmp_path: Path) -> None:
    (tmp_path / "node1.json").write_text("{}")
    write_later(tmp_path / "node2.progress.json", 0.2)  # progress, not a record
    t0 = time.monotonic()
    assert nap.nap(2.0, 0.0, tmp_path, seen=1) == 1
    assert time.monotonic() - t0 >= 2.0
    th = write_later(tmp_path / "node2.json", 0.3)
    t0 = time.monotonic()
    assert nap.nap(60.0, 0.0, tmp_path, seen=1) == 2
    assert time.monotonic() - t0 < 30.0  # woken by the record, not the 60 s interval
    th.join()


def test_a_record_never_wakes_it_before_the_fleet_floor(tmp_path: Path) -> None:
    write_later(tmp_path / "node1.json", 0.1)
    t0 = time.monotonic()
    assert nap.nap(60.0, 3.0, tmp_path, seen=0) == 1
    assert 3.0 <= time.monotonic() - t0 < 30.0


def test_a_task_that_outlives_its_record_is_followed_up_sooner_each_time_doubled() -> None:
    assert nap.follow_up(30.0, 2.0, False, 0.0) == (30.0, 0.0)  # none lingering: the regular interval
    steps, step = [], 0.0
    for _ in range(5):
        sleep_s, step = nap.follow_up(30.0, 2.0, True, step)
        steps.append(sleep_s)
    assert steps == [2.0, 4.0, 8.0, 16.0, 30.0]  # never past the regular interval
    assert nap.follow_up(30.0, 2.0, False, step) == (30.0, 0.0)  # it ended: the next one starts again from 2 s
    assert nap.follow_up(40.0, 25.0, True, 0.0) == (25.0, 2.0)  # a 400-node fleet: never under its floor


def test_a_task_is_cancelled_when_it_passes_its_time_not_a_poll_interval_later() -> None:
    """The next poll is due when the first running task not yet cancelled passes --time + TASK_GRACE_S: a task
    hung 30 s into a 0:30 run was cancelled at 54 s (the poll interval had grown to ~13 s), at 42 s with this."""
    from trainready.cluster.control import slurm, watch

    def st(i: int, state: str, run_s: float) -> slurm.TaskState:
        return slurm.TaskState(i, f"7_{i}", state, "", "", "", run_s=run_s)

    w = watch.Watch(states={0: st(0, "COMPLETED", 9.0), 1: st(1, "RUNNING", 31.0), 2: st(2, "RUNNING", 12.0)})
    due = watch.overtime_due(w, 30.0)
    assert due == 30.0 + watch.TASK_GRACE_S - 31.0 + nap.SETTLE_S  # task 1: 9 s to go, then a second to settle
    assert due < watch.poll_interval(3, 40.0)  # sooner than the regular poll
    w.over[1] = 0.0  # cancelled: no longer what the next poll waits for; task 2 is
    assert watch.overtime_due(w, 30.0) == 30.0 + watch.TASK_GRACE_S - 12.0 + nap.SETTLE_S
    assert watch.overtime_due(watch.Watch(states={0: st(0, "PENDING", 0.0)}), 30.0) == float("inf")
