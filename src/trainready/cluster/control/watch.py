"""Waiting for a `cluster run` array: one slurmctld call per poll for every task, progress lines, and the
collector's own cancels (a task past --time, one pending for a reason that cannot clear by itself, the rest
past the run's deadline)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from trainready.cluster.control import avail, nap, slurm

# The collector polls the whole array with ONE slurmctld RPC (`scontrol --local show job -o J`: all tasks,
# REQUEST_JOB_INFO_SINGLE, no REQUEST_FED_INFO) every poll_interval() seconds.
POLL_MIN_S = 2.0  # at first: a task stuck pending is named within seconds of Slurm saying why
POLL_MAX_S = 30.0  # at most: a node drained mid-run is named within half a minute; the collector's latency after
# the last task is at most this
POLL_GROWTH = 3.0  # the interval is the time waited so far / this: ~12 polls in a 2-minute run, ~20 in an hour
POLL_PER_NODE_S = 1 / 16  # and at least N/16 s: a 640-node fleet polls every 30 s from the start
GRACE_S = 60.0  # beyond the time limit before the collector gives up on the whole array / the cross step
# A task still RUNNING this long past its --time is cancelled by the collector itself: slurmctld checks time
# limits only periodically (measured here: a 30 s limit was enforced after ~90 s), so waiting for its TIMEOUT
# would stall every fleet run by up to a minute per overrunning node.
TASK_GRACE_S = 10.0
# Marks the collector puts on tasks it cancelled: ran past --time / pending for a reason that cannot clear;
# GONE: a task Slurm no longer knows (ended more than MinJobAge ago, no accounting) while no collector watched.
OVERTIME, STUCK, GONE = "OVERTIME", "STUCK", "GONE"

Progress = Callable[[str], None]


def poll_interval(n: int, waited_s: float) -> float:
    """Seconds to the next poll: growing with the time waited and with the fleet's size, within [2, 30] s."""
    return min(POLL_MAX_S, max(POLL_MIN_S, waited_s / POLL_GROWTH, n * POLL_PER_NODE_S))


@dataclass
class Watch:
    """What the collector has done to the array so far: tasks it cancelled, and why."""

    states: dict[int, slurm.TaskState] = field(default_factory=dict)  # the last word from Slurm, with marks
    over: dict[int, float] = field(default_factory=dict)  # ran past --time + TASK_GRACE_S: cancelled at (time.time())
    stuck: dict[int, str] = field(default_factory=dict)  # pending for a reason that cannot clear: cancelled
    waiting: set[int] = field(default_factory=set)  # named unavailable by Slurm, its node usable: said once


def ended(s: slurm.TaskState) -> bool:
    """Ended in Slurm's words, or by the collector's own mark (cancelled past --time, stuck, gone unwatched)."""
    return s.done or s.state in (OVERTIME, STUCK, GONE)


def mark(states: dict[int, slurm.TaskState], w: Watch) -> dict[int, slurm.TaskState]:
    """The states with the collector's own marks on the tasks it cancelled; a task seen ended and missing now
    keeps the state it ended in: slurmctld forgets an ended task MinJobAge after its end (slurm.conf(5):
    default 300 s) while an array longer than that still runs (640 tasks on this 2-core host: ~30 min), and a
    forgotten task is neither pending again nor lost from the count."""
    out = {i: s for i, s in w.states.items() if i not in states and ended(s)}
    for i, s in states.items():
        if s.state == "CANCELLED" and (i in w.over or i in w.stuck):
            s = dataclasses.replace(s, state=OVERTIME if i in w.over else STUCK)
        out[i] = s
    return out


def cancel_stalled(job: str, states: dict[int, slurm.TaskState], nodes: list[str], limit_s: float, w: Watch,
                   say: Progress) -> None:
    """Cancel (one scancel for all) the tasks running past --time and those pending for a reason that cannot
    clear by itself; the latter are named with their node's Slurm state and reason.  Tasks are named JOB_I:
    the last task of an array keeps the array's own job id, and `scancel JOB` would end every task."""
    ids = []
    for i, s in sorted(states.items()):
        if s.state == "RUNNING" and s.run_s > limit_s + TASK_GRACE_S and i not in w.over:
            say(f"{nodes[i]}: task {s.job_id} still running {s.run_s:.0f} s, past its time limit; cancelling")
            w.over[i] = time.time()
            ids.append(f"{job}_{i}")
    pending = [i for i, s in sorted(states.items()) if s.state == "PENDING" and avail.stuck_reason(s.reason)
               and i not in w.stuck]
    info = slurm.nodes([nodes[i] for i in pending]) if pending else {}  # one call: is the node itself unavailable?
    for i in pending:
        s = states[i]
        node_says = avail.stuck_on(s.reason, nodes[i], info.get(nodes[i]))
        note = "" if node_says or i in w.waiting else avail.waiting_note(s.reason, nodes[i], info.get(nodes[i]))
        if note:
            w.waiting.add(i)
            say(f"{nodes[i]}: task {s.job_id} {note}")
        if not node_says:
            continue  # a sibling's reason echoed onto this task, or a moment's: it clears by itself (avail.py)
        w.stuck[i] = (f"its task {s.job_id} stayed PENDING ({s.reason.replace(',_', ', ')}), a reason that does not "
                      f"clear by itself{node_says.rstrip('.')}")
        say(f"{nodes[i]}: not tested: {w.stuck[i]}; its task is cancelled")
        ids.append(f"{job}_{i}")
    if ids:
        slurm.cancel(*ids)


def progress_line(job: str, nodes: list[str], states: dict[int, slurm.TaskState]) -> tuple[str, int]:
    """('job J: d/n done, r running node(ID) ..., p pending', d)."""
    done = sum(1 for s in states.values() if ended(s))
    running = [f"{nodes[i]}({s.job_id})" for i, s in sorted(states.items()) if s.state == "RUNNING"]
    pending = len(nodes) - done - len(running)
    return (f"job {job}: {done}/{len(nodes)} done, {len(running)} running"
            f"{' ' + ' '.join(running[:8]) if running else ''}{' ...' if len(running) > 8 else ''}, "
            f"{pending} pending"), done


def overtime_due(w: Watch, limit_s: float) -> float:
    """Seconds until the first running task not yet cancelled passes --time + TASK_GRACE_S (by Slurm's RunTime at
    the last poll), so it is cancelled then, not up to a poll interval (30 s) later; inf when none runs."""
    left = [limit_s + TASK_GRACE_S - s.run_s for i, s in w.states.items() if s.state == "RUNNING" and i not in w.over]
    return max(0.0, min(left)) + nap.SETTLE_S if left else float("inf")


def wait(job: str, nodes: list[str], limit_s: float, waves: int, say: Progress, w: Watch | None = None,
         heard: Callable[[Watch, str], None] | None = None, records: Path | None = None) -> Watch:
    """Poll (one slurmctld call for the whole array, poll_interval() apart) until every task has ended.  A task
    running past limit_s + TASK_GRACE_S is cancelled (OVERTIME), one pending for a reason that cannot clear
    is cancelled at once (STUCK); after waves x limit_s + GRACE_S (K tasks at a time) the rest is cancelled.
    `w`: what an earlier collector of this array saw and did (attach); `heard`: told each new progress line;
    `records`: the folder the tasks write their records to (a new one ends the sleep between polls: nap.py)."""
    t0, last, w, seen, step = time.monotonic(), "", w or Watch(), nap.records(records), 0.0
    deadline_s = waves * limit_s + GRACE_S
    while True:
        states = slurm.task_states(job, {i: s.job_id for i, s in w.states.items()})
        if not states:  # Slurm no longer knows the job: what is unfinished here ended unwatched
            states = {i: w.states.get(i) or slurm.TaskState(i, f"{job}_{i}", GONE, "", "", "") for i in range(len(nodes))}
            states = {i: s if s.done or s.state in (OVERTIME, STUCK) else dataclasses.replace(s, state=GONE)
                      for i, s in states.items()}
        cancel_stalled(job, states, nodes, limit_s, w, say)
        w.states = mark(states, w)
        line, done = progress_line(job, nodes, w.states)
        if line != last:
            say(line)
            last = line
            if heard is not None:
                heard(w, line)
        if done >= len(nodes):
            return w
        if time.monotonic() - t0 > deadline_s:
            say(f"job {job}: deadline {deadline_s:.0f} s passed; cancelling the {len(nodes) - done} unfinished task(s)")
            slurm.cancel(job)
            time.sleep(3.0)
            w.states = _at_deadline(w.states, slurm.task_states(job, {i: s.job_id for i, s in w.states.items()}))
            return w
        floor_s = max(POLL_MIN_S, len(nodes) * POLL_PER_NODE_S)
        lingering = records is not None and any(not s.done and (records / f"{nodes[i]}.json").exists()
                                                for i, s in w.states.items() if i < len(nodes))
        lingering = lingering or any(i in w.over or i in w.stuck for i, s in w.states.items()
                                     if not ended(s))  # cancelled, not yet ended
        sleep_s, step = nap.follow_up(poll_interval(len(nodes), time.monotonic() - t0), floor_s, lingering, step)
        seen = nap.nap(min(sleep_s, max(floor_s, overtime_due(w, limit_s))), floor_s, records, seen)


def _at_deadline(before: dict[int, slurm.TaskState], after: dict[int, slurm.TaskState]) -> dict[int, slurm.TaskState]:
    """What each unfinished task was when the wait gave up: RUNNING → OVERTIME, else still PENDING."""
    out = dict(after)
    for i, p in before.items():
        if not p.done and p.state not in (OVERTIME, STUCK):
            out[i] = dataclasses.replace(p, state=OVERTIME if p.state == "RUNNING" else "PENDING")
    return out
