"""Am I one rank of an external launcher's job?  torchrun env or Slurm env.

* torchrun (and any launcher that sets the same variables): ``RANK``, ``WORLD_SIZE``,
  ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``.
* Slurm ``srun`` without torchrun: ``SLURM_PROCID`` (rank), ``SLURM_NTASKS`` (world size),
  ``SLURM_LOCALID`` (local rank); the rendezvous host is the first host of
  ``SLURM_JOB_NODELIST`` (``SLURM_STEP_NODELIST`` when set) and the port is
  ``MASTER_PORT`` if set, else 20000 + SLURM_JOB_ID mod 10000, so that two jobs sharing a
  first node do not collide.
torchrun's variables win when both are present (torchrun started inside srun).
A Slurm world of one task (an `salloc` shell) is not an external launch.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping

from trainready.errors import UsageError

DEFAULT_PORT = 29500  # torchrun's default MASTER_PORT


@dataclass(frozen=True)
class ExternalRank:
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    source: str  # "torchrun" | "slurm"

    def torch_env(self) -> dict[str, str]:
        """The env:// rendezvous variables torch.distributed reads."""
        return {"RANK": str(self.rank), "WORLD_SIZE": str(self.world_size), "LOCAL_RANK": str(self.local_rank),
                "MASTER_ADDR": self.master_addr, "MASTER_PORT": str(self.master_port)}


def _int(env: Mapping[str, str], key: str, source: str) -> int:
    try:
        value = int(env[key])
    except KeyError:
        raise UsageError(f"{source} launch: environment variable {key} is not set") from None
    except ValueError:
        raise UsageError(f"{source} launch: {key}='{env[key]}' is not an integer") from None
    if value < 0:
        raise UsageError(f"{source} launch: {key}={value} must be >= 0")
    return value


def detect(env: Mapping[str, str] | None = None) -> ExternalRank | None:
    """The external rank described by `env` (default os.environ), or None for a local run."""
    env = os.environ if env is None else env
    if "RANK" in env and "WORLD_SIZE" in env:
        rank, ws = _int(env, "RANK", "torchrun"), _int(env, "WORLD_SIZE", "torchrun")
        local = _int(env, "LOCAL_RANK", "torchrun") if "LOCAL_RANK" in env else rank
        if "MASTER_ADDR" not in env:
            raise UsageError("torchrun launch: RANK/WORLD_SIZE are set but MASTER_ADDR is not")
        port = _int(env, "MASTER_PORT", "torchrun") if "MASTER_PORT" in env else DEFAULT_PORT
        _check(rank, ws, "torchrun", "RANK", "WORLD_SIZE")
        return ExternalRank(rank, ws, local, env["MASTER_ADDR"], port, "torchrun")
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        ws = _int(env, "SLURM_NTASKS", "slurm")
        if ws <= 1:
            return None
        rank = _int(env, "SLURM_PROCID", "slurm")
        local = _int(env, "SLURM_LOCALID", "slurm") if "SLURM_LOCALID" in env else 0
        var = next((v for v in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST") if env.get(v)), "")
        nodelist = env.get(var, "")
        if not nodelist:
            raise UsageError("slurm launch: SLURM_JOB_NODELIST is not set (cannot choose a rendezvous host)")
        if "MASTER_PORT" in env:
            port = _int(env, "MASTER_PORT", "slurm")
        else:
            port = 20000 + _int(env, "SLURM_JOB_ID", "slurm") % 10000 if "SLURM_JOB_ID" in env else DEFAULT_PORT
        _check(rank, ws, "slurm", "SLURM_PROCID", "SLURM_NTASKS")
        try:
            first = env.get("MASTER_ADDR") or expand_hostlist(nodelist)[0]
        except UsageError as e:
            raise UsageError(f"slurm launch: {var}: {e}") from None
        return ExternalRank(rank, ws, local, first, port, "slurm")
    return None


def _check(rank: int, ws: int, source: str, rk: str, wk: str) -> None:
    if ws < 1 or rank >= ws:
        raise UsageError(f"{source} launch: {rk}={rank} must be < {wk}={ws}")


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside [...]."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"hostlist '{text}': unbalanced ']'")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise UsageError(f"hostlist '{text}': unbalanced '['")
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _expand_one(name: str, whole: str) -> list[str]:
    m = re.search(r"\[([^\[\]]*)\]", name)
    if not m:
        return [name]
    head, tail = name[: m.start()], name[m.end():]
    out: list[str] = []
    for item in m.group(1).split(","):
        r = _RANGE.match(item.strip())
        if not r:
            raise UsageError(f"hostlist '{whole}': bad range '{item}' (expected N or N-M)")
        lo, hi = r.group(1), r.group(2) or r.group(1)
        if int(hi) < int(lo):
            raise UsageError(f"hostlist '{whole}': range '{item}' runs backwards")
        width = len(lo)  # Slurm keeps the zero padding of the lower bound: node[01-03]
        for i in range(int(lo), int(hi) + 1):
            for rest in _expand_one(tail, whole):
                out.append(f"{head}{i:0{width}d}{rest}")
    return out


def expand_hostlist(text: str) -> list[str]:
    """Slurm hostlist expression → host names, in order: 'node[01-03,7],gpu5' → node01 node02 node03 node7 gpu5."""
    hosts = [h for part in _split_top(text) for h in _expand_one(part, text)]
    if not hosts:
        raise UsageError(f"hostlist '{text}' names no host")
    return hosts
