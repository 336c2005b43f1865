"""The rank processes alive right now, so that a check's deadline or a signal can stop them.

`launch` registers each group of ranks here as it starts them.  Two things stop them:

- a check's deadline (`checks.base.Check._run_bounded`): the ranks of that check only, and
- SIGINT / SIGTERM (`util.signals`): every rank, and no launch may start afterwards.

Stopping is SIGTERM to every rank, then SIGKILL to those still alive after `TERM_GRACE_S`, then a
join, so the next check starts on a quiet machine; the stage each rank last reported is returned so
the result can name it.  A stopped *scope* ("epoch": one check's run) stays cancelled: a launch
asked for by that check's thread afterwards raises `Cancelled` instead of starting ranks.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from trainready.errors import Cancelled

# Seconds between SIGTERM and SIGKILL.  A rank blocked in a gloo/NCCL call dies on SIGTERM at once
# (Python leaves SIGTERM at its default action); one stuck in the driver (D state) needs SIGKILL.
TERM_GRACE_S = 3.0

_lock = threading.RLock()
_groups: list["Group"] = []
_local = threading.local()
_state = {"epoch": 0, "all_cancelled": False}
_cancelled: set[int] = set()
_names: dict[int, str] = {}


@dataclass
class Group:
    """One `launch`: its processes (multiprocessing.Process) and each rank's last (stage_no, stage)."""

    fn: str
    epoch: int
    stages: dict[int, tuple[int, str]]
    procs: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class Stopped:
    rank: int
    pid: int | None
    stage: str  # the last stage the rank reported
    how: str  # "SIGTERM", "SIGKILL" or "had exited"


def begin(name: str) -> int:
    """A new scope (one check's run, named `name`); the caller's thread and threads that `adopt` it own it."""
    with _lock:
        _state["epoch"] += 1
        epoch = _state["epoch"]
        _names[epoch] = name
        _local.epoch = epoch
        return epoch


def adopt(epoch: int) -> None:
    """Make the calling thread (a check's worker thread) part of scope `epoch`."""
    _local.epoch = epoch


def current() -> int:
    """This thread's scope; a thread that adopted none (a pool thread of a check) gets the newest."""
    return int(getattr(_local, "epoch", _state["epoch"]))


def name_of(epoch: int | None = None) -> str:
    """What scope `epoch` (default: the newest) runs, e.g. the check's name; '' when none began."""
    return _names.get(_state["epoch"] if epoch is None else epoch, "")


def _cancelled_now(epoch: int) -> bool:
    return bool(_state["all_cancelled"]) or epoch in _cancelled


def register(group: Group) -> None:
    with _lock:
        if _cancelled_now(group.epoch):
            raise Cancelled(f"not starting {group.fn}: {name_of(group.epoch) or 'the run'} was stopped")
        _groups.append(group)


def start(group: Group, proc: Any) -> None:
    """Start `proc` as one of `group`'s ranks unless its scope was stopped (then `Cancelled`).

    The start itself (seconds, the first time: the forkserver imports torch) runs outside the lock so
    a stop is never kept waiting; a stop that came meanwhile did not see `proc`, so it is stopped here."""
    with _lock:
        if _cancelled_now(group.epoch):
            raise Cancelled(f"not starting {group.fn}: {name_of(group.epoch) or 'the run'} was stopped")
    proc.start()
    with _lock:
        group.procs.append(proc)
        late = _cancelled_now(group.epoch)
    if late:
        _signal(proc, "kill")
        proc.join(timeout=5.0)
        raise Cancelled(f"stopped {group.fn}: {name_of(group.epoch) or 'the run'} was stopped while it started")


def unregister(group: Group) -> None:
    with _lock:
        if group in _groups:
            _groups.remove(group)


def stages(epoch: int | None = None) -> dict[int, str]:
    """rank → last stage of every live rank in scope `epoch` (None: every scope)."""
    with _lock:
        out: dict[int, str] = {}
        for g in _groups:
            if epoch is None or g.epoch == epoch:
                out.update({r: st[1] for r, st in g.stages.items()})
        return out


def stop(epoch: int | None = None, grace_s: float = TERM_GRACE_S) -> list[Stopped]:
    """Cancel scope `epoch` (None: everything, for good) and stop its ranks: SIGTERM, then SIGKILL
    after `grace_s`, then join. Returns each rank's pid, last stage and how it ended."""
    with _lock:
        if epoch is None:
            _state["all_cancelled"] = True
        else:
            _cancelled.add(epoch)
        ranks = [(g, r, p) for g in _groups if epoch is None or g.epoch == epoch for r, p in enumerate(g.procs)]
    how = terminate([p for _, _, p in ranks], grace_s)
    return [Stopped(r, p.pid, g.stages.get(r, (0, "started"))[1], how[id(p)]) for g, r, p in ranks]


def terminate(procs: list[Any], grace_s: float = TERM_GRACE_S) -> dict[int, str]:
    """SIGTERM every live process, SIGKILL those still alive after `grace_s`, join all.
    Returns id(proc) → "SIGTERM", "SIGKILL" or "had exited"."""
    how = {id(p): ("SIGTERM" if p.is_alive() else "had exited") for p in procs}
    for p in procs:
        if how[id(p)] == "SIGTERM":
            _signal(p, "terminate")
    end = time.monotonic() + grace_s
    for p in procs:
        p.join(timeout=max(0.0, end - time.monotonic()))
    for p in procs:
        if p.is_alive():
            how[id(p)] = "SIGKILL"
            _signal(p, "kill")
    for p in procs:
        p.join(timeout=5.0)
    return how


def _signal(proc: Any, what: str) -> None:
    try:
        getattr(proc, what)()
    except (OSError, ValueError, AttributeError):  # already reaped, or never started
        pass


def describe(stopped: list[Stopped]) -> str:
    """'rank 3 at 'before all_reduce'; ranks 0-2,4-7 at 'in all_reduce'' (grouped by stage)."""
    from trainready.ranks.outcome import rank_ranges

    by_stage: dict[str, list[int]] = {}
    for s in stopped:
        by_stage.setdefault(s.stage, []).append(s.rank)
    parts = []
    for stage, ranks in sorted(by_stage.items(), key=lambda kv: min(kv[1])):
        word = "rank" if len(ranks) == 1 else "ranks"
        parts.append(f"{word} {rank_ranges(ranks)} at '{stage}'")
    return "; ".join(parts)


@contextlib.contextmanager
def quiet_starts() -> Iterator[None]:
    """Block SIGINT and SIGTERM in this thread while ranks start.  The forkserver (started on the first
    launch) inherits the mask: a Ctrl-C or a Slurm SIGTERM sent to the whole process group reaches the
    parent, and the forkserver lives on to reap the ranks (no zombie; stop_helpers ends it).  The ranks
    it forks inherit it too: SIGINT stays blocked in them (no child KeyboardInterrupt traceback), SIGTERM
    is unblocked again in `launch._worker`, so the parent's and Slurm's SIGTERM end a rank at once."""
    from multiprocessing import resource_tracker

    # Start the resource tracker first: starting it unblocks SIGINT/SIGTERM in the calling thread
    # (CPython's resource_tracker.ensure_running), which would let the forkserver start without the mask.
    resource_tracker.ensure_running()
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    except (AttributeError, OSError, ValueError):  # not POSIX
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def stop_helpers(wait_s: float = 3.0) -> None:
    """End multiprocessing's helper processes now (the forkserver, then the resource tracker) and reap
    them, instead of leaving them to notice our exit: after an interrupt no child may outlive the CLI.
    Uses CPython's own stop protocol (close the "alive" pipe) with a bounded wait; best effort."""
    from multiprocessing import forkserver, resource_tracker

    for obj, fd_attr, pid_attr in ((forkserver._forkserver, "_forkserver_alive_fd", "_forkserver_pid"),
                                   (resource_tracker._resource_tracker, "_fd", "_pid")):
        fd, pid = getattr(obj, fd_attr, None), getattr(obj, pid_attr, None)
        if fd is None or pid is None:
            continue
        try:
            os.close(fd)
            setattr(obj, fd_attr, None)
            end = time.monotonic() + wait_s
            while os.waitpid(pid, os.WNOHANG) == (0, 0):
                if time.monotonic() > end:  # e.g. a forkserver still importing torch: it cannot do harm now
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.02)
            setattr(obj, pid_attr, None)
        except (OSError, ChildProcessError):
            pass
