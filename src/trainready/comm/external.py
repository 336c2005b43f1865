"""One rank of an external launcher's job (torchrun / srun): a heartbeat through the rendezvous
TCPStore, and a FAIL verdict that names the silent peer(s) when a step hangs or a collective raises.

Every rank sets ``trainready/comm/stage/<rank>`` = ``[stage number, host, stage name]`` (JSON) before
each step; all ranks run the same steps in the same order, so a lower stage number means "behind".
When this rank's stage has not advanced for ``timeout_s`` (a watchdog thread), or a
torch.distributed call raises (a peer died, a gloo timeout), this rank reads every rank's last
stage through a fresh store client (short timeout) and names those behind it or absent.
The process-group timeout is ``timeout_s + BACKSTOP_S``: only a backstop, so that NCCL's own
watchdog does not abort the process before the verdict is written (the local launcher does the same).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable

from trainready.ranks.env import ExternalRank
from trainready.ranks.launch import RankContext, _short
from trainready.ranks.outcome import rank_ranges
from trainready.records import Outcome, Status

# torchrun's agent may host the store across restarts: the restart count keeps an earlier attempt's stages apart.
STAGE_KEY = "trainready/comm/" + os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") + "/stage/{rank}"
READ_TIMEOUT_S = 3.0  # connecting a fresh store client for the diagnosis; the store is on rank 0's host
BACKSTOP_S = 30.0  # process-group timeout beyond the step timeout (seconds)
STARTUP_S = 60.0  # default allowance for every rank to join: srun/torchrun start tasks seconds apart (spec fleet.join_s)
POLL_S = 0.5  # watchdog poll period (seconds)
LINGER_S = 2.0  # rank 0 keeps the store up this long after its verdict, so the peers' watchdogs can read it
# Other ranks wait this long after theirs: torchrun kills every rank when one exits non-zero, and rank 0's
# watchdog fires about when theirs do, so they must not leave before rank 0 has written its record.
PEER_LINGER_S = 5.0
JOINING = "rendezvous (waiting for every rank to join)"


@dataclass
class ExternalContext(RankContext):
    """RankContext whose stages go to the rendezvous store (heartbeat) and to the watchdog."""

    store: Any = None
    host: str = ""
    stage_name: str = "started"
    stage_t: float = 0.0  # time.monotonic() of the last stage

    def stage(self, name: str) -> None:
        super().stage(name)
        self.stage_name, self.stage_t = name, time.monotonic()
        if self.store is not None:
            try:
                self.store.set(STAGE_KEY.format(rank=self.rank), json.dumps([self._stage_no, self.host, name]))
            except Exception:  # noqa: BLE001 - a lost store must not kill the sweep; the diagnosis will say so
                pass


def read_stages(ext: ExternalRank) -> dict[int, tuple[int, str, str] | None] | str:
    """Every rank's last [stage number, host, stage] from the store (None: never joined), or why not readable."""
    import torch.distributed as dist

    where = f"{ext.master_addr}:{ext.master_port}"
    try:
        # A plain connect first: a refused port fails at once, without c10d's retry loop and C++ stack dump.
        socket.create_connection((ext.master_addr, ext.master_port), timeout=READ_TIMEOUT_S).close()
        client = dist.TCPStore(ext.master_addr, ext.master_port, None, False, timedelta(seconds=READ_TIMEOUT_S))
        out: dict[int, tuple[int, str, str] | None] = {}
        for k in range(ext.world_size):
            key = STAGE_KEY.format(rank=k)
            if client.check([key]):
                no, host, name = json.loads(client.get(key).decode())
                out[k] = (int(no), str(host), str(name))
            else:
                out[k] = None
        return out
    except Exception as exc:  # noqa: BLE001 - the store host (rank 0) may be gone: say so
        return f"the rendezvous store {where} (rank 0's or torchrun's) did not answer ({_short(str(exc), 80)})"


def name_peers(stages: dict[int, tuple[int, str, str] | None] | str, me: int) -> tuple[str, dict[str, Any]]:
    """One clause naming the ranks behind the furthest one and those absent, and the same as JSON."""
    if isinstance(stages, str):
        return f"peers unknown: {stages}", {"store_error": stages}
    absent = [k for k, v in stages.items() if v is None]
    seen = {k: v for k, v in stages.items() if v is not None}
    top = max((v[0] for v in seen.values()), default=0)
    behind = sorted(k for k, v in seen.items() if v[0] < top)
    parts: list[str] = []
    by_stage: dict[tuple[str, str], list[int]] = {}
    for k in behind:
        v = seen[k]
        by_stage.setdefault((v[2], v[1]), []).append(k)
    for (name, host), ranks in sorted(by_stage.items(), key=lambda kv: kv[1][0]):
        who = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {rank_ranges(ranks)}"
        parts.append(f"{who}{' (this rank)' if me in ranks else ''} on {host} still at '{name}'")
    if absent:
        parts.append(f"rank{'s' if len(absent) > 1 else ''} {rank_ranges(absent)} never joined")
    if not parts:
        ahead = seen[me][2] if me in seen else "?"
        text = f"no rank is behind: all {len(seen)} reached '{ahead}' (a stalled collective or link, not one rank)"
    else:
        text = "silent: " + "; ".join(parts)
    details = {"behind": behind, "absent": absent,
               "stages": {str(k): (list(v) if v else None) for k, v in stages.items()}}
    return text, details


def failure(ext: ExternalRank, backend: str, ctx: ExternalContext, what: str, timeout_s: float,
            raised: bool = False) -> Outcome:
    """The FAIL verdict of this rank: where it was, what went wrong, and the silent peer(s).  `raised`: the
    error is this rank's own (torch.distributed raised it here), not the watchdog's "no progress" while waiting."""
    text, peers = name_peers(read_stages(ext), ext.rank)
    return Outcome(
        Status.FAIL,
        f"{backend} sweep over {ext.world_size} ranks ({ext.source}) failed on rank {ext.rank} ({ctx.host}) "
        f"in '{ctx.stage_name}': {what}; {text}",
        remedy="Check the named rank's host and GPU (nvidia-smi -q, dmesg for Xid), its network/NVLink, and its "
        "task's log (srun/torchrun); rerun with NCCL_DEBUG=INFO.",
        details={"rank": ext.rank, "host": ctx.host, "stage": ctx.stage_name, "stage_no": ctx._stage_no,
                 "error": what, "timeout_s": timeout_s, "launcher": ext.source,
                 "store": f"{ext.master_addr}:{ext.master_port}", "raised": raised, **peers},
    )


class Once:
    """Only one of the main thread and the watchdog reports."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken = False

    def take(self) -> bool:
        with self._lock:
            if self._taken:
                return False
            self._taken = True
            return True


def start_watchdog(ctx: ExternalContext, ext: ExternalRank, backend: str, timeout_s: float, once: Once,
                   report: Callable[[Outcome], int], join_s: float = STARTUP_S) -> threading.Event:
    """A daemon thread: no new stage for timeout_s (timeout_s + join_s while joining) → report, exit."""
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(POLL_S):
            idle = time.monotonic() - ctx.stage_t
            limit = timeout_s + join_s if ctx.stage_name == JOINING else timeout_s
            if idle <= limit or not once.take():
                continue
            code = 1
            try:
                code = report(failure(ext, backend, ctx, f"no progress for {idle:.0f} s (timeout {timeout_s:g} s)",
                                      timeout_s))
            except BaseException as exc:  # noqa: BLE001 - e.g. an unwritable --json: still leave, one line
                sys.stderr.write(f"trainready: error: {exc}\n")
                code = getattr(exc, "exit_code", 1)
            leave(ext, code)  # the main thread is blocked in a collective: leave without joining it

    threading.Thread(target=watch, name="trainready-comm-watchdog", daemon=True).start()
    return stop


def context(ext: ExternalRank, backend: str) -> ExternalContext:
    """The rendezvous store (rank 0 hosts it, like torchrun's env://) and this rank's context; nothing joined yet."""
    import torch

    if backend == "nccl":
        torch.cuda.set_device(ext.local_rank)
        device = torch.device("cuda", ext.local_rank)
    else:
        device = torch.device("cpu")
    ctx = ExternalContext(ext.rank, ext.world_size, ext.local_rank, backend, device, host=socket.gethostname())
    ctx.stage_name, ctx.stage_t = JOINING, time.monotonic()
    return ctx


def join(ctx: ExternalContext, ext: ExternalRank, backend: str, timeout_s: float, join_s: float = STARTUP_S) -> None:
    """Create/connect the store, init the process group on it, mark 'joined'. Raises what torch raises."""
    import torch.distributed as dist

    wait = timedelta(seconds=timeout_s + join_s)
    # As torch's env:// rendezvous does (torch/distributed/rendezvous.py, _create_c10d_store): under torchrun
    # with TORCHELASTIC_USE_AGENT_STORE=True the agent hosts the store and every rank is a client; else rank 0 hosts it.
    host = ext.rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
    store = dist.TCPStore(ext.master_addr, ext.master_port, ext.world_size, host, wait, wait_for_workers=False,
                          multi_tenant=True)
    ctx.store = store
    ctx.stage(JOINING)
    kw: dict[str, Any] = {"timeout": timedelta(seconds=timeout_s + BACKSTOP_S)}
    if backend == "nccl":
        kw["device_id"] = ctx.device
    dist.init_process_group(backend, store=store, rank=ext.rank, world_size=ext.world_size, **kw)
    ctx.stage("joined")


def leave(ext: ExternalRank, code: int) -> None:
    """Exit now (a failed process group can block interpreter shutdown), after lingering for the other ranks."""
    sys.stdout.flush()
    sys.stderr.flush()
    if ext.world_size > 1:
        time.sleep(LINGER_S if ext.rank == 0 else PEER_LINGER_S)
    os._exit(code)
