"""One pre-started interpreter that forks every self-test command (a zygote, as Android starts its apps).

Each fork is a fresh process with its own pid, process group, environment, working directory, output files
and exit status, running `python -m trainready ARGV` exactly as the shell would, except that torch and the
check modules are already imported: `import torch` alone is ~2.3 CPU s on a 2-core x86 VM, paid ~60 times
by a self-test whose commands each start an interpreter.  The forks never share state with one another:
each starts from the same untouched parent, its random generators re-seeded from the OS.

Protocol (one JSON object per line): the client writes {"id", "argv", "env", "cwd", "out", "err"[, "module"]} to the
server's stdin; the server answers {"id", "pid"} at once and {"id", "rc"} when that process has exited
(rc < 0: killed by signal -rc).  The server is single-threaded (a select loop that reaps with
waitpid(WNOHANG)): fork() from a process running Python threads can deadlock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

# What every command imports anyway (checked: none starts a CUDA context or NVML, none reads the environment
# that a command sets): the CLI, every check, the collectives, the resume protocol with DCP, and torch._dynamo,
# which the first optimizer a process builds imports (train_step's AdamW, in-process: ~1 CPU s each time).
PRELOAD = ("torch", "torch.distributed", "torch.distributed.checkpoint", "torch._dynamo", "numpy.random",
           "trainready.cli",
           "trainready.checks.registry_all", "trainready.comm.run", "trainready.resume.protocol",
           "trainready.cluster.steps")
POLL_S = 0.05  # the server's select timeout: how soon an exited command is reported


def _child(req: Mapping[str, Any]) -> None:
    """In the fork: become `python -m MODULE ARGV` (MODULE: trainready) with the request's environment and
    files; never returns."""
    code = 1
    try:
        os.setpgrp()  # its own process group: a timeout ends it and every rank it started
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, req["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            os.dup2(os.open(path, flags, 0o644), fd)
    except OSError:  # its files are gone (the caller was interrupted and removed its scratch): nothing to run
        os._exit(127)
    try:
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        import tempfile

        import numpy as np

        # forks must not draw the same numbers: `random` re-seeds itself in a fork (os.register_at_fork),
        # numpy's global generator does not
        np.random.seed()
        tempfile.tempdir = None  # TMPDIR is this request's
        import runpy

        module = req.get("module", "trainready")
        sys.argv = [module, *req["argv"]]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - as the interpreter would: the traceback on stderr, exit 1
        import traceback

        traceback.print_exc()
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _say(doc: Mapping[str, Any]) -> None:
    os.write(1, (json.dumps(doc) + "\n").encode())


def serve() -> None:
    """The server: import PRELOAD, then fork one process per request line until stdin closes."""
    import importlib
    import select

    for name in PRELOAD:
        importlib.import_module(name)
    sys.stdout.flush()
    children: dict[int, str] = {}
    buf, open_ = b"", True
    while open_ or children:
        if open_ and select.select([0], [], [], POLL_S)[0]:
            chunk = os.read(0, 1 << 16)
            open_ = bool(chunk)
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                req = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _child(req)
                children[pid] = req["id"]
                _say({"id": req["id"], "pid": pid})
        elif not open_:
            select.select([], [], [], POLL_S)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            if pid in children:
                _say({"id": children.pop(pid), "rc": os.waitstatus_to_exitcode(status)})


# Seconds a command waits to be forked: the first one waits for the server to import torch (~1 s quiet; over 60 s
# was seen on a 2-core x86 VM at load average 17-19).
START_S = 600.0


class Zygote:
    """The client: start the server, run commands through it (thread-safe), close it."""

    def __init__(self, env: Mapping[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", "from trainready.selftest.zygote import serve; serve()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(env), cwd=cwd)
        self.cond = threading.Condition()
        self.answers: dict[str, dict[str, Any]] = {}
        self.next_id = 0
        self.running: set[int] = set()  # PIDs of the commands in flight (each leads its own process group)
        self.stopped = False  # kill_all was called: no command starts any more
        threading.Thread(target=self._read, name="trainready-zygote-reader", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            doc = json.loads(line)
            with self.cond:
                self.answers.setdefault(doc["id"], {}).update(doc)
                self.cond.notify_all()
        with self.cond:
            self.answers["closed"] = {}
            self.cond.notify_all()

    def _wait(self, rid: str, key: str, timeout_s: float | None) -> Any:
        with self.cond:
            self.cond.wait_for(lambda: key in self.answers.get(rid, {}) or "closed" in self.answers, timeout_s)
            return self.answers.get(rid, {}).get(key)

    def run(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, out: Path, err: Path,
            timeout_s: float, module: str = "trainready") -> int | None:
        """`python -m MODULE ARGV` as a fork of the server: its exit code, or None when it ran past
        timeout_s (then it and its process group are killed)."""
        with self.cond:
            if self.stopped:
                return None
            self.next_id += 1
            rid = str(self.next_id)
        req = {"id": rid, "argv": list(argv), "env": dict(env), "cwd": str(cwd), "out": str(out), "err": str(err),
               "module": module}
        assert self.proc.stdin is not None
        with self.cond:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        pid = self._wait(rid, "pid", START_S)
        if pid is None:
            raise OSError("the self-test's zygote process did not answer (see its stderr)")
        with self.cond:
            self.running.add(pid)
            if self.stopped:  # kill_all ran while this one was starting
                os.killpg(pid, signal.SIGKILL)
        try:
            rc = self._wait(rid, "rc", timeout_s)
        finally:
            with self.cond:
                self.running.discard(pid)
        if rc is None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._wait(rid, "rc", 10.0)
        return rc if isinstance(rc, int) else None

    def kill_all(self) -> None:
        """Stop every command in flight and its process group (the self-test was interrupted)."""
        with self.cond:
            self.stopped = True
            pids = list(self.running)
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
