"""A controller that does not answer means wait, not error.

Slurm's jobs outlive their control plane: while slurmctld restarts (a config change) or fails over to its backup,
and while munge restarts, running tasks and steps carry on.  Every Slurm command trainready runs goes through
`slurm.call`, which hands each "the controller did not answer" (`ControllerDown`) to the `Patience` in force: it
says once since when the controller is silent, polls again with backoff, says when it answers again, and past its
bound raises one SlurmError line with what is known about the run and the command that picks it up again
(`trainready cluster attach`).  With no Patience in force (a plain Slurm call outside a fleet command) the error
is raised as it is.

The bound, unless the operator sets one (--controller-wait): twice the cluster's SlurmctldTimeout, at least
WAIT_FLOOR_S.  slurm.conf(5): SlurmctldTimeout (default 120 s) is how long the backup controller waits for the
primary before it takes over; twice that covers the takeover and the new controller's loading of its saved state.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

from trainready.errors import ControllerDown

WAIT_FLOOR_S = 300.0  # seconds: "a few minutes" when the cluster's SlurmctldTimeout is short
CTLD_TIMEOUT_DEFAULT_S = 120.0  # slurm.conf(5): SlurmctldTimeout's default, when `scontrol show config` lacks it
BACKOFF_FIRST_S = 2.0  # the first retry; each wait doubles it ...
BACKOFF_MAX_S = 30.0  # ... up to this (the collector's own longest poll, run.POLL_MAX_S)
T = TypeVar("T")
# Slurm's words (slurm_errno.c, the munge auth plugin) for a controller that did not answer.  UNSENT: the
# request never reached a controller (no connection, no credential).
SILENT = re.compile(r"Unable to contact slurm controller|Socket timed out|Zero Bytes were transmitted|"
                    r"Protocol authentication error|Munge (?:en|de)code failed|backup controller in standby|"
                    r"Connection (?:refused|reset)|Transport endpoint is not connected")
UNSENT = re.compile(r"\(connect failure\)|Munge encode failed|Connection refused")


def silent(command: str, words: str) -> ControllerDown | None:
    """The error of a Slurm command that failed with `words` (its stderr), when they say the controller did not
    answer; else None (a refusal: a SlurmError of its own)."""
    m = SILENT.search(words)
    if m is None:
        return None
    detail = words[m.start():][:200]
    return ControllerDown(f"{command}: {detail}", detail, bool(UNSENT.search(words)))


SRUN_OWN = re.compile(r"^srun: (?:error|fatal): .*$", re.M)  # srun's own lines; its tasks' output has no prefix


def srun_silent(log: str) -> ControllerDown | None:
    """`silent` over srun's own lines of a step's log (`srun: error: ...`) and nothing else: a task's words, a
    gloo or NCCL 'Connection reset by peer' between its ranks, are the step's failure, not the controller's."""
    own = "\n".join(m.group(0) for m in SRUN_OWN.finditer(log))
    return silent("srun", own) if own else None


def default_bound(ctld_timeout_s: float | None) -> float:
    """Seconds to wait for a silent controller: 2 x SlurmctldTimeout, at least WAIT_FLOOR_S."""
    return max(WAIT_FLOOR_S, 2.0 * (ctld_timeout_s if ctld_timeout_s is not None else CTLD_TIMEOUT_DEFAULT_S))


def clock(t: float) -> str:
    """A wall-clock time as the operator's terminal shows it (local time, HH:MM:SS)."""
    return time.strftime("%H:%M:%S", time.localtime(t))


@dataclass
class Patience:
    """How long a fleet command waits for a silent controller, and what it says meanwhile."""

    bound_s: float
    """Seconds of silence before the command gives up (exit 2)."""
    say: Callable[[str], None]
    """Where the one 'not answering' line and the 'answering again' line go."""
    pickup: str = ""
    """The command that picks the run up again (said when the command gives up); '' before a run exists."""
    known: str = ""
    """The last word on the run (the collector's progress line), said when the command gives up."""
    since: float | None = None
    """Wall time (time.time()) the controller stopped answering; None while it answers."""
    tries: int = 0
    """Calls that went unanswered since then (the backoff's exponent)."""

    def missed(self, err: ControllerDown, what: str, asked: float) -> None:
        """One more unanswered call (sent at `asked`): say so the first time, give up past the bound, else wait
        (backoff)."""
        now = time.time()
        if self.since is None:
            self.since, self.tries = asked, 0
            self.say(f"slurmctld not answering since {clock(asked)} ({what}: {err.detail}); waiting, up to "
                     f"{self.bound_s:.0f} s (--controller-wait); the tasks run on in Slurm meanwhile")
        quiet_s = now - self.since
        if quiet_s > self.bound_s:
            known = f"; {self.known}" if self.known else ""
            pick = (f"; the run goes on in Slurm: pick it up with `{self.pickup}`" if self.pickup
                    else "; nothing was submitted")
            raise ControllerDown(f"slurmctld not answering since {clock(self.since)} ({quiet_s:.0f} s, past "
                                 f"--controller-wait {self.bound_s:.0f} s; {what}: {err.detail}){known}{pick}",
                                 err.detail, unsent=False)
        self.tries += 1
        time.sleep(min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** (self.tries - 1), max(0.0, self.bound_s - quiet_s) + 0.1))

    def answered(self) -> None:
        if self.since is not None:
            self.say(f"slurmctld answering again at {clock(time.time())}, after {time.time() - self.since:.0f} s "
                     "of silence; carrying on")
            self.since = None


_current: list[Patience] = []  # the Patience in force (innermost last)


def current() -> Patience | None:
    return _current[-1] if _current else None


@contextlib.contextmanager
def patient(p: Patience) -> Iterator[Patience]:
    """Every Slurm call inside waits for a silent controller as `p` says."""
    _current.append(p)
    try:
        yield p
    finally:
        _current.remove(p)


def through(fn: Callable[[], T], what: str, resend: bool = True) -> T:
    """fn() (one Slurm command), again and again while the controller does not answer and a Patience is in force.
    `resend` False (sbatch): retried only when the request never reached the controller (ControllerDown.unsent),
    so a submission is never made twice."""
    while True:
        asked = time.time()
        try:
            out = fn()
        except ControllerDown as err:
            p = current()
            if p is None or not (resend or err.unsent):
                raise
            p.missed(err, what, asked)
            continue
        p = current()
        if p is not None:
            p.answered()
        return out
