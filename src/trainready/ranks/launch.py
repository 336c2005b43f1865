"""Start N local ranks (one per GPU with NCCL, or N CPU ranks with gloo), run one
function in each under `torch.distributed`, and supervise them with a deadline.

Rendezvous is torchrun-style env (`MASTER_ADDR`, `MASTER_PORT`, `RANK`,
`WORLD_SIZE`, `LOCAL_RANK`).  Every rank reports *stages* to the parent as it
goes; when the deadline passes, or a rank dies, the parent kills every rank
and names the culprit: a dead rank by its exit code, a hung rank as the one
whose progress stopped earliest.  The CLI therefore never hangs on a rank.

Processes come from a forkserver that has already imported torch (ranks/forkserver.py), so
starting 8 ranks costs a fork each, not a fresh `import torch` each.  Each rank's threads are
set here, its OpenMP wait policy there (ranks/omp.py): the program's own, whoever runs it.
"""

from __future__ import annotations

import importlib
import os
import queue as queue_mod
import signal
import socket
import time
import traceback
from datetime import timedelta
from typing import Any, Callable

from trainready.ranks import live
from trainready.ranks.forkserver import mp_context, warm_up
from trainready.ranks.outcome import LaunchResult, RankContext, RankOutcome
from trainready.errors import Interrupted
from trainready.devices.world import usable_cores

__all__ = ["LaunchResult", "RankContext", "RankOutcome", "free_port", "launch", "warm_up"]

# Stage number of "running" (after init_process_group) in `_worker`.
RUNNING_STAGE_NO = 2
# How long the survivors get, after one rank died, to report before we kill them.
DEAD_RANK_GRACE_S = 3.0


def _short(msg: str, limit: int = 160) -> str:
    msg = " ".join(str(msg).split())
    return msg if len(msg) <= limit else msg[: limit - 1] + "…"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _resolve(fn: str | Callable[..., Any]) -> Callable[..., Any]:
    if callable(fn):
        return fn
    mod, _, name = fn.partition(":")
    return getattr(importlib.import_module(mod), name)  # type: ignore[no-any-return]


def _worker(
    rank: int,
    world_size: int,
    port: int,
    backend: str,
    fn: str,
    kwargs: dict[str, Any],
    q: Any,
    pg_timeout_s: float,
    threads: int,
    env: dict[str, str],
) -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # blocked in the forkserver (live.quiet_starts)
    os.environ.update(env)
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world_size),
    )
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    if backend == "nccl":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
    else:
        device = torch.device("cpu")
    ctx = RankContext(rank, world_size, rank, backend, device, q)
    try:
        ctx.stage("init_process_group")
        init_kw: dict[str, Any] = {"timeout": timedelta(seconds=pg_timeout_s)}
        if backend == "nccl":
            init_kw["device_id"] = device
        dist.init_process_group(backend, rank=rank, world_size=world_size, **init_kw)
        ctx.stage("running")
        value = _resolve(fn)(ctx, **kwargs)
        q.put(("ok", rank, value))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, one line
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        q.put(("error", rank, f"{type(exc).__name__}: {first}{where}"))
    finally:
        try:
            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:  # noqa: BLE001
            pass


def _supervise(procs: list[Any], q: Any, stages: dict[int, tuple[int, str]], deadline: float, timeout_s: float,
               stall_s: float | None, marks: dict[str, float]) -> tuple[dict[int, tuple[str, Any]], dict[int, int], bool]:
    """Wait for every rank's result, a death (plus `DEAD_RANK_GRACE_S`), the deadline or a stall.
    `deadline` covers start-up until every rank is "running", then `timeout_s` from that moment.  `marks`: the
    monotonic times every rank was running and every result was in."""
    world_size = len(procs)
    all_started = False
    done: dict[int, tuple[str, Any]] = {}
    died: dict[int, int] = {}
    first_death: float | None = None
    timed_out = False
    last_news = time.monotonic()
    while len(done) + len(died) < world_size:
        now = time.monotonic()
        if now >= deadline or (stall_s is not None and now - last_news > stall_s):
            timed_out = True
            break
        if first_death is not None and now - first_death > DEAD_RANK_GRACE_S:
            break
        try:
            kind, rank, payload = q.get(timeout=0.1)
        except queue_mod.Empty:
            for r, p in enumerate(procs):
                if r not in done and r not in died and not p.is_alive() and p.exitcode not in (None, 0):
                    died[r] = p.exitcode
                    first_death = first_death or time.monotonic()
            continue
        last_news = time.monotonic()
        if kind == "stage":
            stages[rank] = payload
            if not all_started and all(st[0] >= RUNNING_STAGE_NO for st in stages.values()):
                all_started = True
                marks["running"] = last_news
                deadline = min(deadline, last_news + timeout_s)
        else:
            done[rank] = (kind, payload)
    if len(done) == world_size:
        marks["results"] = time.monotonic()
    for p in procs:
        p.join(timeout=0.2 if (timed_out or died) else 5.0)
    return done, died, timed_out


def _drain(q: Any, stages: dict[int, tuple[int, str]], done: dict[int, tuple[str, Any]]) -> None:
    """Read late messages, so that errors that raced the deadline are still reported."""
    while True:
        try:
            kind, rank, payload = q.get_nowait()
        except (queue_mod.Empty, OSError, ValueError):
            break
        if kind == "stage":
            stages[rank] = payload
        elif rank not in done:
            done[rank] = (kind, payload)


def _end(group: live.Group) -> None:
    """Stop what is still alive of `group` (SIGTERM, then SIGKILL), reap it, forget the group."""
    try:
        live.terminate(group.procs)
    finally:
        live.unregister(group)


# free_port() lets the port go before rank 0's store binds it, so a launch beside this one (the self-test
# runs cases side by side; resume starts C beside A and B) can take it first: rank 0 then fails to listen
# (EADDRINUSE) before any rank ran `fn`, and the launch is made again on another port.
PORT_TRIES = 3


def launch(fn: str, world_size: int, backend: str = "gloo", kwargs: dict[str, Any] | None = None,
           timeout_s: float = 60.0, env: dict[str, str] | None = None, threads_per_rank: int | None = None,
           stall_s: float | None = None, startup_s: float = 60.0) -> LaunchResult:
    """Run ``fn(ctx: RankContext, **kwargs)`` on `world_size` local ranks (`_launch_once`), again on another
    port when rank 0 could not listen on the one it was given (PORT_TRIES)."""
    for _ in range(PORT_TRIES - 1):
        res = _launch_once(fn, world_size, backend, kwargs, timeout_s, env, threads_per_rank, stall_s, startup_s)
        if not _port_taken(res):
            return res
    return _launch_once(fn, world_size, backend, kwargs, timeout_s, env, threads_per_rank, stall_s, startup_s)


def _port_taken(res: LaunchResult) -> bool:
    return any(o.state == "error" and "EADDRINUSE" in o.message and o.last_stage == "init_process_group"
               for o in res.outcomes)


def _launch_once(
    fn: str,
    world_size: int,
    backend: str = "gloo",
    kwargs: dict[str, Any] | None = None,
    timeout_s: float = 60.0,
    env: dict[str, str] | None = None,
    threads_per_rank: int | None = None,
    stall_s: float | None = None,
    startup_s: float = 60.0,
) -> LaunchResult:
    """Run ``fn(ctx: RankContext, **kwargs)`` on `world_size` local ranks.

    `fn` is ``"module:function"`` so that it can be found in a fresh process.
    Returns within `timeout_s` + a few seconds whatever the ranks do.  With
    `stall_s`, also gives up (timed_out) once no rank has reported anything
    (stage, result) for `stall_s` seconds: a per-step bound for long runs.
    The clock for `timeout_s` starts once every rank has joined the process
    group (stage "running"): process start-up and rendezvous on a loaded host
    get their own allowance, `startup_s`, so a busy machine does not look hung.
    """
    if world_size < 1:
        raise ValueError("world_size must be >= 1")
    ctx = mp_context((fn.split(":", 1)[0],))
    # Intra-op threads: the cores this process may use (its affinity set), shared out among the ranks: 8 gloo
    # ranks get 1 each on 2 cores, 8 each on 64.  torch's default, one per core in every rank, would queue
    # ranks x cores threads on the cores; their waits are passive (ranks/omp.py).
    threads = threads_per_rank or max(1, usable_cores() // world_size)
    # The process-group timeout is what unblocks survivors stuck in a collective.
    # Shorter than the parent's deadline so that survivors report their own
    # timeout first and the silent (hung) rank stands out.
    pg_timeout = max(2.0, 0.75 * timeout_s)
    stages: dict[int, tuple[int, str]] = {r: (0, "started") for r in range(world_size)}
    group = live.Group(fn, live.current(), stages)
    live.register(group)  # Cancelled if this check was already stopped (deadline, signal)
    t0 = time.monotonic()
    marks: dict[str, float] = {}
    try:
        with live.quiet_starts():  # the forkserver and every rank inherit it: signals reach the parent (see there)
            q = ctx.Queue()
            args = (world_size, free_port(), backend, fn, kwargs or {}, q, pg_timeout, threads, env or {})
            for r in range(world_size):
                live.start(group, ctx.Process(target=_worker, args=(r, *args), name=f"trainready-rank{r}",
                                              daemon=True))
        done, died, timed_out = _supervise(group.procs, q, stages, t0 + startup_s + timeout_s, timeout_s, stall_s,
                                           marks)
        _drain(q, stages, done)
    except Interrupted as exc:  # a command running ranks in its own (main) thread: say where they were
        where = live.describe([live.Stopped(r, None, st[1], "") for r, st in sorted(stages.items())])
        exc.during = exc.during or f"{fn.rsplit(':', 1)[-1]} ({where})"
        raise
    finally:  # whatever happened (an interrupt included), no rank outlives its launch
        _end(group)
    q.close()
    outcomes = _outcomes(world_size, done, died, stages, [p.exitcode for p in group.procs])
    end = time.monotonic()
    timing = {k: round(v - t0, 3) for k, v in marks.items()} | {"ended": round(end - t0, 3)}
    return LaunchResult(world_size, backend, outcomes, end - t0, timed_out, timing)


def _outcomes(world_size: int, done: dict[int, tuple[str, Any]], died: dict[int, int | None],
              stages: dict[int, tuple[int, str]], exitcodes: list[int | None]) -> tuple[RankOutcome, ...]:
    """Each rank's outcome.  Who is to blame: a dead rank; else a rank still silent when the others had given
    up (hung); else, if all are silent, the ones whose progress stopped earliest; a rank's own exception only
    when nobody died or hung (otherwise it is most likely the timeout/peer-closed error caused by them)."""
    unresolved = [r for r in range(world_size) if r not in done and r not in died]
    if died:
        culprits = set(died)
    elif unresolved and len(unresolved) < world_size:
        culprits = set(unresolved)
    elif unresolved:
        low = min(stages[r][0] for r in unresolved)
        culprits = {r for r in unresolved if stages[r][0] == low}
    else:
        culprits = {r for r in done if done[r][0] == "error"}
    outcomes = []
    for r in range(world_size):
        stage_no, stage = stages[r]
        if r in done and done[r][0] == "ok":
            outcomes.append(RankOutcome(r, "ok", done[r][1], "", stage, stage_no, exitcodes[r]))
        elif r in died:
            outcomes.append(RankOutcome(r, "died", None, "", stage, stage_no, died[r]))
        elif r in culprits and r in done:
            outcomes.append(RankOutcome(r, "error", None, _short(done[r][1]), stage, stage_no, exitcodes[r]))
        elif r in culprits:
            outcomes.append(RankOutcome(r, "hung", None, "", stage, stage_no, None))
        else:
            msg = _short(done[r][1]) if r in done else ""
            outcomes.append(RankOutcome(r, "stuck", None, msg, stage, stage_no, None))
    return tuple(outcomes)
