"""The op table: which torch.distributed call, which buffer is S, and the busbw factor.

Definitions follow nccl-tests doc/PERFORMANCE.md (NVIDIA/nccl-tests):

* ``algbw = S / t`` with S in bytes and t the time of one op; GB = 1e9 bytes.
* ``busbw = algbw * factor(n)``: all_reduce 2(n-1)/n; all_gather, reduce_scatter and
  all_to_all (n-1)/n; broadcast and send/recv 1.
* S is the *full* buffer as nccl-tests counts it (its size column is
  ``max(sendBytes, recvBytes)``):
  all_reduce and broadcast: the one buffer; all_gather: the gathered output
  (``sendcount*n*size``); reduce_scatter: the input (``recvcount*n*size``);
  all_to_all: one rank's whole send buffer (n blocks); send/recv: the message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from trainready.errors import UsageError


@dataclass(frozen=True)
class OpInfo:
    name: str
    nccl_test: str  # the nccl-tests binary that measures the same thing
    split: bool  # True: S is n blocks of the per-rank count (count column = per-rank)
    redop: str  # nccl-tests "redop" column
    root: int  # nccl-tests "root" column (-1: none)
    buffer: str  # which buffer S is, in words (docs and JSON)
    factor: Callable[[int], float]

    def busbw_factor(self, n: int) -> float:
        if n < 1:
            raise ValueError(f"world size must be >= 1, got {n}")
        return self.factor(n)


def _ring2(n: int) -> float:
    return 2.0 * (n - 1) / n  # nccl-tests PERFORMANCE.md, AllReduce


def _ring1(n: int) -> float:
    return (n - 1) / n  # nccl-tests PERFORMANCE.md, ReduceScatter/AllGather/AlltoAll


def _one(n: int) -> float:
    return 1.0  # nccl-tests PERFORMANCE.md, Broadcast (and point-to-point)


OPS: dict[str, OpInfo] = {
    o.name: o
    for o in (
        OpInfo("all_reduce", "all_reduce_perf", False, "sum", -1, "the one buffer (count x dtype)", _ring2),
        OpInfo("all_gather", "all_gather_perf", True, "none", -1, "the gathered output (n x per-rank count x dtype)", _ring1),
        OpInfo("reduce_scatter", "reduce_scatter_perf", True, "sum", -1, "the input (n x per-rank count x dtype)", _ring1),
        OpInfo("broadcast", "broadcast_perf", False, "none", 0, "the one buffer, root 0", _one),
        OpInfo("all_to_all", "alltoall_perf", True, "none", -1, "one rank's send buffer (n blocks of per-rank count)", _ring1),
        OpInfo("sendrecv", "sendrecv_perf", False, "sum", -1, "the message each rank sends to rank+1", _one),
    )
}
OP_ALIASES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
              "alltoall": "all_to_all", "send_recv": "sendrecv", "p2p": "sendrecv"}

# Keys of the spec's comm.expected_busbw_gbps table: a canonical op name, optionally '@<ranks>' (world size >= 1)
# where the figure applies only at that world size: all_reduce = 480.0, all_reduce@16 = 350.0.
EXPECTATION_KEY_GRAMMAR = f"an op name ({', '.join(OPS)}), optionally '@<ranks>' with ranks >= 1"


def valid_expectation_key(key: str) -> bool:
    """Is `key` a valid comm.expected_busbw_gbps key?  Canonical names only: aliases ('allreduce') are typos here."""
    op, at, ranks = key.partition("@")
    if op not in OPS:
        return False
    return not at or (ranks.isdigit() and ranks.isascii() and int(ranks) >= 1)


# name -> (torch dtype attribute, nccl-tests type name, bytes per element)
DTYPES: dict[str, tuple[str, str, int]] = {
    "float": ("float32", "float", 4),
    "half": ("float16", "half", 2),
    "bfloat16": ("bfloat16", "bfloat16", 2),
    "double": ("float64", "double", 8),
    "int32": ("int32", "int32", 4),
}
DTYPE_ALIASES = {"float32": "float", "fp32": "float", "float16": "half", "fp16": "half", "bf16": "bfloat16",
                 "float64": "double", "fp64": "double", "int": "int32"}
# Largest integer each dtype holds exactly (2^(mantissa bits+1)); bounds the test values.
EXACT_INT = {"float": 2**24, "half": 2**11, "bfloat16": 2**8, "double": 2**53, "int32": 2**31 - 1}


def op_names(values: list[str] | None) -> list[str]:
    """Resolve `--ops` (comma-separated, aliases allowed, 'all'); unknown → UsageError."""
    if not values:
        return list(OPS)
    out: list[str] = []
    for v in values:
        for n in (x.strip().lower() for x in v.split(",") if x.strip()):
            if n == "all":
                out.extend(o for o in OPS if o not in out)
                continue
            n = OP_ALIASES.get(n, n)
            if n not in OPS:
                raise UsageError(f"--ops: unknown op '{n}' (expected some of: {', '.join(OPS)})")
            if n not in out:
                out.append(n)
    return out


def dtype_name(value: str) -> str:
    v = DTYPE_ALIASES.get(value.strip().lower(), value.strip().lower())
    if v not in DTYPES:
        raise UsageError(f"--dtype: unknown dtype '{value}' (expected one of: {', '.join(DTYPES)}, bf16, fp16, fp32)")
    return v


_SIZE = re.compile(r"^\s*(\d+)\s*([kKmMgGtT]?)[iI]?[bB]?\s*$")


def parse_size(text: str, what: str = "size") -> int:
    """nccl-tests style sizes: 8, 1K, 64M, 1G (powers of 1024, as nccl-tests parses them)."""
    m = _SIZE.match(str(text))
    if not m:
        raise UsageError(f"{what}: '{text}' is not a size (expected e.g. 8, 1K, 64M, 1G)")
    mult = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}[m.group(2).lower()]
    value = int(m.group(1)) * mult
    if value < 1:
        raise UsageError(f"{what}: '{text}' must be at least 1 byte")
    return value


def size_steps(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """min, min*f, ... <= max, like nccl-tests -b/-e/-f."""
    if min_bytes > max_bytes:
        raise UsageError(f"--min-bytes ({min_bytes}) is larger than --max-bytes ({max_bytes})")
    if factor < 2:
        raise UsageError(f"--factor: expected an integer >= 2, got {factor}")
    out, s = [], min_bytes
    while s <= max_bytes:
        out.append(s)
        s *= factor
    return out


# nccl-tests trims the per-rank count of ops that divide a buffer over ranks to a multiple of 16 bytes
# ("base = (count/nranks) & ~(16/eltSize - 1)" in src/all_gather.cu, reduce_scatter.cu, alltoall.cu,
# since nccl-tests commit 29f4114, v2.13.12, Dec 2024: aligned buffers for non-power-of-2 rank counts).
SPLIT_ALIGN_BYTES = 16


def counts_for(op: str, size: int, n: int, elem: int) -> tuple[int, int]:
    """(per-call count, bytes S actually moved) for a requested size, as nccl-tests' setupArgs computes them.

    count = size // elem (src/common.cu setupArgs); split ops (all_gather, reduce_scatter, all_to_all):
    per-rank count = count // n rounded DOWN to a multiple of 16 bytes, S = per-rank count * n * elem
    (the "size" column, max(sendBytes, recvBytes)); all_reduce, broadcast, sendrecv: count, count * elem.
    """
    total = size // elem
    if OPS[op].split:
        align = max(1, SPLIT_ALIGN_BYTES // elem)  # elements per 16 bytes (16/eltSize)
        c = (total // n) // align * align
        return c, c * n * elem
    return total, total * elem


def bandwidths(op: str, nbytes: int, seconds: float, n: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 B/s) for one op of S=`nbytes` taking `seconds`."""
    if seconds <= 0:
        return float("nan"), float("nan")
    alg = nbytes / seconds / 1e9
    return alg, alg * OPS[op].busbw_factor(n)


def human(nbytes: int) -> str:
    for unit, div in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if nbytes >= div and nbytes % div == 0:
            return f"{nbytes // div}{unit}"
    return str(nbytes)
