"""The collector's count of an array's tasks when slurmctld forgets the ended ones (MinJobAge, slurm.conf(5))
while the array still runs: seen at 640 nodes on the local cluster (a ~30 min array, MinJobAge 600 s), where
"done" fell back from 238 to 221 as finished tasks vanished, and the wait could not end before its deadline.
Pure: the polls are replayed; no Slurm here."""

from __future__ import annotations

from trainready.cluster.control import slurm, watch


def _t(i: int, state: str) -> slurm.TaskState:
    return slurm.TaskState(i, f"9_{i}", state, "0:0" if state == "COMPLETED" else "", f"n{i}", "None")


# Each poll as slurmctld answers it: task 0 ends, then is forgotten while 1 and 2 still run or wait.
POLLS = [
    {0: _t(0, "RUNNING"), 1: _t(1, "PENDING"), 2: _t(2, "PENDING")},
    {0: _t(0, "COMPLETED"), 1: _t(1, "RUNNING"), 2: _t(2, "PENDING")},
    {1: _t(1, "COMPLETED"), 2: _t(2, "RUNNING")},  # task 0 forgotten
    {2: _t(2, "COMPLETED")},  # task 1 forgotten too
]


def test_a_forgotten_ended_task_stays_done_and_the_wait_ends(monkeypatch):
    polls = iter(POLLS)
    monkeypatch.setattr(slurm, "task_states", lambda job, known=None: next(polls))
    monkeypatch.setattr(watch.nap, "nap", lambda seconds, floor_s, folder, seen: seen)
    lines: list[str] = []
    w = watch.wait("9", ["n0", "n1", "n2"], limit_s=600.0, waves=1, say=lines.append)
    counts = [int(line.split(": ", 1)[1].split("/", 1)[0]) for line in lines]
    assert counts == sorted(counts) and counts[-1] == 3, lines  # never falls back, and reaches the end
    assert {i: s.state for i, s in w.states.items()} == {0: "COMPLETED", 1: "COMPLETED", 2: "COMPLETED"}


def test_a_forgotten_task_is_kept_only_if_it_had_ended():
    w = watch.Watch()
    w.states = {0: _t(0, "COMPLETED"), 1: _t(1, "RUNNING")}
    now = watch.mark({2: _t(2, "RUNNING")}, w)
    assert 1 not in now  # a running task missing from Slurm's answer is not assumed done
    assert now[0].state == "COMPLETED" and now[2].state == "RUNNING"
    requeued = watch.mark({0: _t(0, "PENDING")}, w)  # Slurm's word wins over what was seen before
    assert requeued[0].state == "PENDING"
