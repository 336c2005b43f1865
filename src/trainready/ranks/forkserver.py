"""Where local rank processes come from: one forkserver per process, started with the modules every rank
needs already imported (PRELOAD), its sockets in a folder short enough for sun_path."""

from __future__ import annotations

import multiprocessing as mp
import os
from typing import Any

from trainready.ranks import live

# Linux sun_path holds 108 bytes with its NUL (unix(7)).  The forkserver listens on
# <tempdir>/pymp-XXXXXXXX/listener-XXXXXXXX (CPython's multiprocessing.connection.arbitrary_address): 33 bytes.
SUN_PATH_MAX = 107
FORKSERVER_SOCKET_TAIL = len("/pymp-xxxxxxxx/listener-xxxxxxxx")


def _short_socket_dir() -> None:
    """multiprocessing keeps its sockets in a folder under TMPDIR; a deep TMPDIR (a Slurm job's
    per-job folder, a CI workspace, pytest's basetemp + trainready's own scratch) overflows sun_path
    and every launch fails with 'AF_UNIX path too long'.  Then that folder (and only it: sockets,
    removed by multiprocessing at exit) goes to /dev/shm or /tmp instead; TMPDIR itself is unchanged."""
    import tempfile
    from multiprocessing import util

    if len(tempfile.gettempdir()) + FORKSERVER_SOCKET_TAIL <= SUN_PATH_MAX:
        return
    short = next((d for d in ("/dev/shm", "/tmp") if os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK)), None)
    if short is None:
        return  # nowhere shorter: launch raises the OS's own error
    old = tempfile.tempdir
    tempfile.tempdir = short
    try:
        util.get_temp_dir()  # created now, cached for this process (and removed at its exit)
    finally:
        tempfile.tempdir = old


# Imported once by the forkserver, in this order, inherited by every rank it forks.  ranks/omp.py first: it
# sets the ranks' OpenMP wait policy before torch loads libgomp.  None of them initialises CUDA.
PRELOAD = ["trainready.ranks.omp", "torch", "torch.distributed", "trainready.ranks.launch"]
# The rank modules of the checks that launch ranks, preloaded too when their check will run: the resume ranks'
# module pulls in torch.distributed.checkpoint, torch.distributed.tensor and sympy: ~3 s per rank process on a 1x
# H200 VM when each rank imported them itself, and +0.8 CPU s in a forkserver that never runs a resume rank
# (2-core x86 VM), so it is loaded only where resume runs.
RESUME_RANKS = "trainready.resume.worker"


_preload = list(PRELOAD)  # this process's: PRELOAD, then every `also` asked for so far


def mp_context(also: tuple[str, ...] = ()) -> Any:
    """The forkserver context ranks are started from (PRELOAD and every `also` asked for in this process set,
    sockets where they fit).  A module asked for once the forkserver runs (warm_up or this process's first launch)
    is imported by each rank that needs it instead."""
    _short_socket_dir()
    _preload.extend(m for m in also if m not in _preload)
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(_preload))
    return ctx


def warm_up(also: tuple[str, ...] = ()) -> None:
    """Start the forkserver now, so that it imports PRELOAD (and `also`: the rank modules of the checks that will
    run) while this process does other work (the in-process checks): the first launch then costs a fork, not an
    interpreter and torch's import."""
    from multiprocessing import forkserver

    mp_context(also)
    with live.quiet_starts():  # as in launch: the forkserver inherits the blocked SIGTERM (see there)
        forkserver.ensure_running()
