"""A check's deadline and Ctrl-C / SIGTERM stop every rank.

The faults each test plants: a timed-out check that would leave its thread and ranks running into the
next checks; `timeout.<name>` set from the CLI; Ctrl-C, which must not print a child's KeyboardInterrupt
traceback (or nothing); SIGTERM, which must not leave /tmp/trainready-* behind without a word.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import SRC, cpu_machine_only, run_cli
from trainready.checks import REGISTRY, CheckContext
from trainready.records import Status
from trainready.spec import default_spec


def _descendants(root: int) -> list[int]:
    """Every process below `root`, from /proc (no psutil)."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


def _mp_helpers() -> set[int]:
    """multiprocessing's forkserver and resource tracker of this (pytest) process: idle, not work."""
    from multiprocessing import forkserver, resource_tracker

    return {p for p in (forkserver._forkserver._forkserver_pid, resource_tracker._resource_tracker._pid) if p}


def _in_group(pgid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.getpgid(int(d)) == pgid:
                    out.append(int(d))
            except OSError:
                pass
    return out


# ---- --timeout CHECK=SECONDS -------------------------------------------------------------------

@pytest.mark.parametrize("arg, words", [
    ("nosuch=5", "unknown check 'nosuch'"),
    ("comm=0", "expected SECONDS as a number > 0"),
    ("comm=-3", "expected SECONDS as a number > 0"),
    ("comm=nan", "expected SECONDS as a number > 0"),
    ("comm", "expected CHECK=SECONDS"),
])
def test_bad_timeout_is_one_line_exit_2(arg: str, words: str) -> None:
    r = run_cli("node", "--timeout", arg)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and words in lines[0], r.stderr


def test_timeouts_are_recorded(tmp_path: Path) -> None:
    r = run_cli("node", "--only", "versions", "--timeout", "versions=90", "--timeout", "versions=100", "--json", "-")
    doc = json.loads(r.stdout)
    assert doc["context"]["timeouts_given"] == {"versions": 100.0}  # the last one given wins
    assert doc["context"]["timeouts_s"] == {"versions": 100.0}


def test_comm_check_limit_is_the_one_source_of_the_sweep_deadline(monkeypatch, tmp_path: Path) -> None:
    import trainready.checks.comm as cs

    seen = {}

    def fake_sweep(opts):  # type: ignore[no-untyped-def]
        seen["deadline"] = opts.deadline_s
        raise RuntimeError("stop here")

    monkeypatch.setattr(cs, "sweep_local", fake_sweep)
    REGISTRY["comm"]().execute(CheckContext(default_spec(), tmp_path))
    assert seen["deadline"] == cs.sweep_deadline_s(cs.CommSweepCheck.timeout_s) < cs.CommSweepCheck.timeout_s
    REGISTRY["comm"]().execute(CheckContext(default_spec(), tmp_path, timeouts={"comm": 40.0}))
    assert seen["deadline"] == cs.sweep_deadline_s(40.0) == 30.0


# ---- a check's deadline ----------------------------------------------------------------------

@pytest.mark.slow
def test_deadline_stops_a_hung_checks_ranks_and_the_next_check_runs_on_a_quiet_machine(tmp_path: Path) -> None:
    limit = 30.0  # below the launch's own deadline (comm.timeout_s 60 s + start-up), so the check's limit fires
    before = set(_descendants(os.getpid()))  # what earlier tests of this process left is theirs to answer for
    hung = CheckContext(default_spec(), tmp_path, {"allreduce.hang_rank": "3"}, timeouts={"allreduce": limit})
    res = REGISTRY["allreduce"]().execute(hung)
    assert res.status == Status.ERROR and res.message.startswith(f"timed out after {limit:g} s"), res.message
    stopped = res.details["stopped"]
    assert sorted(s["rank"] for s in stopped) == list(range(8)), stopped
    assert all(f"at '{s['stage']}'" in res.message for s in stopped), res.message  # each rank's stage named
    assert not res.details["thread_alive"]
    assert not [t for t in threading.enumerate() if t.name == "check-allreduce"]  # the check's thread ended
    # Quiet: no rank left, only multiprocessing's idle helpers (forkserver, resource tracker).
    assert not [p for p in _descendants(os.getpid()) if p not in _mp_helpers() and p not in before]
    assert not any(os.path.exists(f"/proc/{s['pid']}") for s in stopped)
    nxt = REGISTRY["allreduce"]().execute(CheckContext(default_spec(), tmp_path))
    assert nxt.status == Status.PASS, nxt.message


@pytest.mark.slow
@cpu_machine_only  # asserts the CPU default (8 gloo ranks, gloo's sweep table)
def test_comm_sweep_ends_itself_before_the_checks_limit(tmp_path: Path) -> None:
    """A hang that the per-step stall (60 s) would catch only after the limit: the sweep's own
    deadline (from the same limit) ends it first, naming the hung rank, never the bare 'timed out'."""
    ctx = CheckContext(default_spec(), tmp_path, {"comm.hang_rank": "1"}, timeouts={"comm": 40.0})
    res = REGISTRY["comm"]().execute(ctx)
    assert res.status == Status.FAIL, res.message
    assert "whole sweep 30 s" in res.message and "rank 1 hung" in res.message, res.message


# ---- SIGINT / SIGTERM --------------------------------------------------------------------------

def _start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(SRC), COLUMNS="160", TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    return subprocess.Popen([sys.executable, "-m", "trainready", "node", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _wait_for_ranks(p: subprocess.Popen[str], timeout: float = 240.0) -> None:
    """Until the run has rank processes (main + forkserver + tracker + ranks in its group)."""
    end = time.monotonic() + timeout
    while len(_in_group(p.pid)) < 5:
        if p.poll() is not None or time.monotonic() >= end:
            p.kill()
            out, err = p.communicate(timeout=60)
            raise AssertionError(f"the run ended (exit {p.returncode}) or never started its ranks: {out[-3000:]}{err[-2000:]}")
        time.sleep(0.2)
    time.sleep(1.0)


@pytest.mark.slow
@pytest.mark.parametrize("sig, group, when", [
    (signal.SIGINT, True, "early"),  # Ctrl-C in a terminal: the whole process group
    (signal.SIGTERM, False, "early"),  # kill PID
    (signal.SIGINT, False, "ranks"),  # kill -INT PID (used to print SemLock._rebuild tracebacks)
    (signal.SIGTERM, True, "ranks"),  # Slurm at the time limit: every process of the step
])
def test_interrupt_stops_everything_and_says_so_in_one_line(tmp_path: Path, sig: int, group: bool, when: str) -> None:
    record = tmp_path / "node.json"
    p = _start(tmp_path, "--json", str(record))
    if when == "early":
        time.sleep(2.0)
    else:
        _wait_for_ranks(p)
    (os.killpg if group else os.kill)(p.pid, sig)
    out, err = p.communicate(timeout=180)  # its way out is bounded; at load average 17-19 it took over 60 s
    assert p.returncode == 128 + sig, (p.returncode, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    name = signal.Signals(sig).name
    assert len(lines) == 1 and lines[0].startswith(f"trainready: interrupted ({name}) during "), err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    time.sleep(0.3)
    assert _in_group(p.pid) == [], "a process of the run outlived it"
    assert list((tmp_path / "tmp").glob("trainready-*")) == [], "scratch left behind"
    if when == "ranks":
        assert "removed" in lines[0] and f"partial record at {record}" in lines[0], lines[0]
        doc = json.loads(record.read_text())
        last = doc["results"][-1]
        assert last["status"] == "error" and last["message"].startswith(f"interrupted by {name}"), last
        during = lines[0].split(" during ", 1)[1].split(" ", 1)[0].rstrip(";")
        assert during in REGISTRY, lines[0]  # names the check (and, while its ranks ran, their stages)


def test_an_interrupt_landing_in_a_weakref_callback_is_neither_printed_nor_lost(monkeypatch) -> None:
    """SIGTERM inside a callback Python cannot raise from (importlib's module-lock weakref `cb`): without the hook
    Python prints 'Exception ignored in ...' and a traceback; with it the interrupt reaches no hook and
    `raise_pending` raises it at the next checkpoint.  Another unraisable exception still reaches the hook."""
    import gc
    import weakref

    from trainready.errors import Interrupted
    from trainready.util import signals

    seen: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))

    class Thing:
        pass

    def dropped(cb: object) -> None:
        t = Thing()
        ref = weakref.ref(t, cb)  # type: ignore[arg-type]
        del t
        gc.collect()
        assert ref() is None

    def interrupt(_ref: object) -> None:
        signals._handler(signal.SIGTERM, None)  # raises Interrupted where Python can only ignore it

    def own_error(_ref: object) -> None:
        raise ValueError("a callback's own error")

    saved = dict(signals._state)
    try:
        with signals.interrupts_raise():
            dropped(own_error)
            assert [type(e) for e in seen] == [ValueError]
            dropped(interrupt)
            assert [type(e) for e in seen] == [ValueError]  # the interrupt: not printed
            with pytest.raises(Interrupted):
                signals.raise_pending()  # and not lost
            signals._state["signum"] = 0  # spent: the handlers are restored, not left SIG_IGN
        assert sys.unraisablehook is not None and sys.unraisablehook.__name__ == "<lambda>"
    finally:
        signals._state.update(saved)
