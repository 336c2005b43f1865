"""SIGINT and SIGTERM become one `Interrupted` exception in the main thread.

Ctrl-C sends SIGINT; `kill` and Slurm (at a job's time limit, then SIGKILL after KillWait, 30 s by
default: Slurm's slurm.conf documentation) send SIGTERM.  Both stop the run the same way: the running
check's ranks are stopped (ranks/live.py), the command writes its partial record and removes (or names)
its scratch directory, and the CLI prints one line and exits 128 + the signal number (130 / 143).
The ranks themselves never see SIGINT (ranks/launch.py blocks it in them), so no child prints a
KeyboardInterrupt traceback.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from typing import Any, Iterator, NoReturn

from trainready.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# The first signal (0: none yet), and whether a top-level handler has dealt with it.
_state = {"signum": 0, "handled": False, "installed": False}


def _handler(signum: int, frame: Any) -> None:
    if _state["signum"]:
        return  # the cleanup that follows the first one is bounded (TERM_GRACE_S per rank group)
    _state["signum"] = signum
    raise Interrupted(signum)


def _unraisable(hook: Any) -> Any:
    """sys.unraisablehook that keeps quiet about our own `Interrupted` when it lands where Python cannot raise
    (a weakref callback, such as importlib's module-lock `cb`, or a __del__): Python would print 'Exception
    ignored in ...' and a traceback; the interrupt is not lost, `raise_pending` raises it at the next
    checkpoint.  Anything else goes to the hook that was there."""

    def quiet(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, Interrupted):
            return
        hook(unraisable)

    return quiet


def raise_pending() -> None:
    """A checkpoint: raise `Interrupted` again if a signal came and nobody handled it yet.

    The handler's exception can land inside third-party code that swallows it (an `except:` or
    `except BaseException` around an import, a C callback); the run would then go on as if never
    interrupted.  The CLI's start, every check's start and its wait call this."""
    if _state["signum"] and not _state["handled"]:
        raise Interrupted(int(_state["signum"]))


def handled() -> None:
    """The top-level handler has the interrupt: checkpoints stop raising it."""
    _state["handled"] = True


@contextlib.contextmanager
def interrupts_raise() -> Iterator[None]:
    """Within: the first SIGINT/SIGTERM raises `Interrupted` in the main thread; later ones are ignored.
    Nested uses share the first one's handlers. Handlers are restored after, unless a signal came:
    then both stay ignored until the process exits (the way out must not be interrupted again)."""
    if _state["installed"] or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _handler) for s in SIGNALS}
    old_hook, sys.unraisablehook = sys.unraisablehook, _unraisable(sys.unraisablehook)
    _state["installed"] = True
    try:
        yield
    finally:
        _state["installed"] = False
        sys.unraisablehook = old_hook
        for s, h in old.items():
            signal.signal(s, signal.SIG_IGN if _state["signum"] else h)


def exit_after_interrupt(line: str, code: int) -> NoReturn:
    """Print the one line and end the process with `code` (130 / 143) once the ranks are stopped.

    Exit handlers run (multiprocessing's among them: its semaphores are unlinked, so its resource
    tracker has nothing to warn about), then `os._exit`: a check thread may still be inside torch
    (in-process work cannot be stopped from Python), and a normal interpreter shutdown under it
    aborts in C++ ("terminate called without an active exception", exit -6), printing a line and
    losing the exit code."""
    sys.stderr.write(line.rstrip("\n") + "\n")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    try:
        atexit._run_exitfuncs()
        if "trainready.ranks.live" in sys.modules:  # ranks may have been started: reap the forkserver too
            sys.modules["trainready.ranks.live"].stop_helpers()
    finally:
        os._exit(code)
