"""Input patterns of the battery, generated on the host in float64 (then cast and copied to the device), so every
device of every node computes on the very same bits.

* `random-7`: N(0, 1) from a CPU generator seeded 7 (+ the operand's position), the same on any host;
* `ones`: every element 1;
* `walking-bits`: element i has one stored significand bit set, walking through the input format's bits,
  with alternating signs and exponents in [-2, 2] (exact in the input format);
* `large-exp`: `random-7` scaled by the operation's large exponent (2^s on one operand, 2^-s on the other for
  a GEMM, so the product stays finite while every input sits near the top or bottom of its format's range).
"""

from __future__ import annotations

from typing import Any

PATTERNS = ("random-7", "ones", "walking-bits", "large-exp")
SEED = 7

# Stored significand bits of each input format (IEEE 754 / OCP FP8 e4m3).
MANT_BITS = {"fp64": 52, "fp32": 23, "tf32": 10, "bf16": 7, "fp16": 10, "fp8": 3}


def make(pattern: str, shape: tuple[int, ...], dtype: str, operand: int = 0, scale_exp: int = 0) -> Any:
    """The float64 host tensor of `pattern` for operand `operand` of an op on `dtype` inputs; `scale_exp`: the
    large-exp pattern's power of two (negated by the op for its second GEMM operand)."""
    import torch

    if pattern == "ones":
        return torch.ones(shape, dtype=torch.float64)
    if pattern == "walking-bits":
        return walking_bits(shape, MANT_BITS[dtype], operand)
    g = torch.Generator().manual_seed(SEED + operand)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    if pattern == "random-7":
        return x
    if pattern == "large-exp":
        return torch.ldexp(x, torch.tensor(scale_exp))
    raise ValueError(f"unknown input pattern {pattern!r} (known: {', '.join(PATTERNS)})")


def walking_bits(shape: tuple[int, ...], bits: int, operand: int = 0) -> Any:
    """Element i = ±(1 + 2^-(1 + (i + operand) mod bits)) · 2^(((i + operand) // bits) mod 5 − 2): one stored
    significand bit set, every position in turn, the sign alternating per walk."""
    import torch

    n = 1
    for s in shape:
        n *= s
    i = torch.arange(n, dtype=torch.int64) + operand
    pos = (i % bits) + 1
    walk = i // bits
    mant = 1.0 + torch.ldexp(torch.ones(n, dtype=torch.float64), -pos)
    sign = 1.0 - 2.0 * (walk % 2).double()
    return (sign * torch.ldexp(mant, (walk % 5) - 2)).reshape(shape)
