"""Input patterns of the battery, made in float64 on the host (copied to the device once, then scaled and cast
there: fingerprint/ops.py), so every device of every node computes on the very same bits.

* `random-7`: N(0, 1) from torch's CPU generator, drawn in blocks of BLOCK elements (in row-major order), block b
  from a generator seeded 7 + the operand's position + 7919·b: the same on any host whatever its cores, and
  drawn on all of them at once (an 8192² operand is 16 blocks: ~2.7 s on one 2-core VM thread, one block's
  time on 16 cores). An operand of at most BLOCK elements is one block: the draw `randn(generator=7+operand)`;
* `ones`: every element 1;
* `walking-bits`: element i has one stored significand bit set, walking through the input format's bits,
  with alternating signs and exponents in [-2, 2] (exact in the input format);
* `large-exp`: `random-7` scaled by the operation's large exponent (2^s on one operand, 2^-s on the other for
  a GEMM, so the product stays finite while every input sits near the top or bottom of its format's range).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from trainready.numerics.bounds import MANT_BITS  # stored significand bits of each input format

PATTERNS = ("random-7", "ones", "walking-bits", "large-exp")
SEED = 7
BLOCK = 2048 * 2048  # elements per independently seeded random block (the quick GEMM's operand: one block)
BLOCK_SEED_STRIDE = 7919  # block b's seed: SEED + operand + 7919·b (a prime, so no two (operand, block) collide
#                           for the < 7919 operands and blocks a battery draws)


def make(pattern: str, shape: tuple[int, ...], dtype: str, operand: int = 0, scale_exp: int = 0) -> Any:
    """The float64 host tensor of `pattern` for operand `operand` of an op on `dtype` inputs; `scale_exp`: the
    large-exp pattern's power of two (negated by the op for its second GEMM operand).  The whole pattern made on
    the host: the definition the battery's operands, made where they are used (ops._operand), are tested
    against (tests/test_fingerprint_inputs.py)."""
    import torch

    if pattern == "ones":
        return torch.ones(shape, dtype=torch.float64)
    if pattern == "walking-bits":
        return walking_bits(shape, MANT_BITS[dtype], operand)
    x = random_base(shape, operand)
    if pattern == "random-7":
        return x.clone()  # the process's base stays as drawn
    if pattern == "large-exp":
        return x * 2.0**scale_exp  # a power of two: exact
    raise ValueError(f"unknown input pattern {pattern!r} (known: {', '.join(PATTERNS)})")


# The process's random bases, (shape, operand, BLOCK) -> float64 host tensor, drawn once per process: the check's
# repeats and the burn-in's windows copy the same values again instead of drawing them again (the standard
# battery's eight operands, 1.6 GB of float64, took 1.3-1.4 s per run to draw on a 16-core H200 host).
# Never written in place: every user casts or scales a copy.
_BASES: dict[tuple[tuple[int, ...], int, int], Any] = {}
_LOCK = threading.Lock()


def random_base(shape: tuple[int, ...], operand: int = 0) -> Any:
    """The `random-7` float64 values of `shape` for operand `operand` (kept for the process: see `_BASES`)."""
    draw_bases([(tuple(shape), operand)])
    with _LOCK:
        return _BASES[(tuple(shape), operand, BLOCK)]


def draw_bases(keys: list[tuple[tuple[int, ...], int]]) -> None:
    """Draw every base of `keys` not drawn yet in this process: all their blocks at once (torch releases the GIL
    in `randn`), each block from its own seeded CPU generator (`_draw_block`), so the bits do not depend on how
    many blocks run side by side."""
    import torch

    block = BLOCK
    with _LOCK:
        todo = [k for k in dict.fromkeys(keys) if (*k, block) not in _BASES]
    if not todo:
        return
    flats = {k: torch.empty(_numel(k[0]), dtype=torch.float64) for k in todo}
    jobs = [(k, b, b * block, min(flats[k].numel(), (b + 1) * block))
            for k in todo for b in range((flats[k].numel() + block - 1) // block)]

    def draw(job: tuple[tuple[tuple[int, ...], int], int, int, int]) -> None:
        (_, operand), b, lo, hi = job
        _draw_block(flats[job[0]][lo:hi], operand, b)

    cores = len(os.sched_getaffinity(0))
    if len(jobs) <= 1 or cores <= 1 or sum(j[3] - j[2] for j in jobs) <= BLOCK:  # small: threads cost more
        for j in jobs:
            draw(j)
    else:
        with ThreadPoolExecutor(min(len(jobs), cores)) as pool:
            list(pool.map(draw, jobs))
    with _LOCK:
        for k in todo:
            _BASES.setdefault((*k, block), flats[k].reshape(k[0]))


def _draw_block(out: Any, operand: int, block: int) -> None:
    """Block `block` of operand `operand`: N(0, 1) from a CPU generator seeded SEED + operand + 7919·block."""
    import torch

    g = torch.Generator().manual_seed(SEED + operand + BLOCK_SEED_STRIDE * block)
    torch.randn(out.numel(), generator=g, dtype=torch.float64, out=out)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def walking_bits(shape: tuple[int, ...], bits: int, operand: int = 0, device: Any = "cpu") -> Any:
    """Element i = ±(1 + 2^-(1 + (i + operand) mod bits)) · 2^(((i + operand) // bits) mod 5 − 2): one stored
    significand bit set, every position in turn, the sign alternating per walk.  Periodic in i with period
    10·bits (sign: 2 walks, exponent: 5), so one period is computed and tiled."""
    import torch

    n = 1
    for s in shape:
        n *= s
    period = 10 * bits
    i = torch.arange(period, dtype=torch.int64)
    pos = (i % bits) + 1
    walk = i // bits
    mant = 1.0 + torch.ldexp(torch.ones(period, dtype=torch.float64), -pos)
    sign = 1.0 - 2.0 * (walk % 2).double()
    one = (sign * torch.ldexp(mant, (walk % 5) - 2)).to(device)  # one period on the host, tiled where it is used
    start = operand % period
    reps = (start + n + period - 1) // period
    return one.repeat(reps)[start:start + n].reshape(shape).clone()
