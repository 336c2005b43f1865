"""Per-element error bounds for the matmul check's random product C = A·B (K-term dot products).

Two bounds, both componentwise and relative to S = |A||B| (the float64 product of the absolute values):

* Worst case (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., Thm 3.5 / Eq. 3.13):
  |Ĉ − C| ≤ γ_K·S with γ_K = K·u / (1 − K·u), for any summation order.  Certain, but it grows with K·u,
  ~1000x the typical error at K = 1024: a flipped mantissa bit hides under it.
* Statistical (Higham & Mary, "A New Approach to Probabilistic Rounding Error Analysis", SIAM J. Sci.
  Comput. 41(5), 2019, Thm 3.1 and §4): when the rounding errors are independent with mean zero,
  |Ĉ − C| ≤ γ̃_K(λ)·S with γ̃_K(λ) = exp(λ·√K·u + K·u²/(1 − u)) − 1 ≈ λ·√K·u, each rounding chain
  failing with probability at most 2·exp(−λ²(1 − u)²/2).  λ is chosen so that the union over all
  M·N·K chains of the product fails with probability ≤ FALSE_ALARM: λ ≈ 9.5 for the GPU's
  4096 x 1024 x 4096 product, so the bound is ~9.5·√K·u instead of K·u (3.4x tighter at K = 1024,
  and it is a bound on every element at once, not a typical error).

The inputs are exactly representable in the GEMM's input format (bf16 values for bf16, fp32 values with
a 10-bit significand for tf32), so converting them inside the GEMM is exact and the float64 reference
uses the very same numbers: the only errors are accumulation (fp32, u_acc) and, for bf16, rounding the
fp32 result to bf16 (at most half an ulp of the rounded value).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

FALSE_ALARM = 1e-9  # per product: 640 nodes x 8 GPUs x 3 dtypes = 15k products give ~1.5e-5 false alarms per fleet run

# Unit roundoffs (Higham §2.1: u = 2^-t for round to nearest with t significand bits, 2^(1-t) truncating).
U_FP32 = 2.0**-24
U_ACC = 2.0**-23  # fp32 accumulation inside tensor cores may truncate (Fasi, Higham, Mikaitis, Pranesh 2021,
#                   "Numerical behavior of NVIDIA tensor cores", PeerJ CS 7:e330): the truncation roundoff
U_F64 = 2.0**-53  # the float64 reference's own accumulation (K terms): ~1e-13 relative, negligible, still added

# Explicit (stored) significand bits of each format (IEEE 754 binary64/32/16, bfloat16, NVIDIA TF32, OCP FP8
# e4m3): a flip of stored bit b (0 = last) changes the value by 2^(e - (MANT_BITS - b)) where 2^e <= |x| <
# 2^(e+1).  The one table: the matmul bounds, the fingerprint's output ulps and its walking-bits inputs read it.
MANT_BITS = {"fp64": 52, "fp32": 23, "tf32": 10, "bf16": 7, "fp16": 10, "fp8": 3}
TF32_DROP = 23 - 10  # low fp32 significand bits that tf32 does not keep


@dataclass(frozen=True)
class Arith:
    """How one dtype's GEMM rounds: accumulation roundoff, and the output format's significand bits
    (None: the fp32 accumulator is the output, already counted in the accumulation)."""

    u_acc: float
    out_bits: int | None


ARITH = {"fp32": Arith(U_ACC, None), "tf32": Arith(U_ACC, None), "bf16": Arith(U_ACC, MANT_BITS["bf16"])}


def gamma(n: int, u: float) -> float:
    """γ_n = n·u / (1 − n·u) (Higham §3.1)."""
    return n * u / (1 - n * u)


def confidence_lambda(chains: int, u: float, p: float = FALSE_ALARM) -> float:
    """λ such that chains · 2·exp(−λ²(1−u)²/2) ≤ p (Higham & Mary Thm 3.1, union bound over chains)."""
    return math.sqrt(2 * math.log(2 * chains / p)) / (1 - u)


def gamma_tilde(n: int, u: float, lam: float) -> float:
    """γ̃_n(λ) = exp(λ√n·u + n·u²/(1−u)) − 1 (Higham & Mary 2019, Thm 3.1)."""
    return math.expm1(lam * math.sqrt(n) * u + n * u * u / (1 - u))


def coefficients(dtype: str, m: int, n: int, k: int) -> tuple[float, float]:
    """(statistical, worst-case) accumulation coefficient: the bound is coefficient x (|A||B|)_ij."""
    if dtype not in ARITH:
        raise ValueError(f"no error bound for dtype {dtype!r}")
    u = ARITH[dtype].u_acc
    ref = gamma(k, U_F64)
    return gamma_tilde(k, u, confidence_lambda(m * n * k, u)) + ref, gamma(k, u) + ref


def half_ulp(x: Any, bits: int) -> Any:
    """Half an ulp of |x| in a format with `bits` stored significand bits (float64 tensor in, out)."""
    import torch

    _, e = torch.frexp(x.abs())  # |x| = f·2^e, f in [0.5, 1): floor(log2|x|) = e − 1, ulp = 2^(e − 1 − bits)
    return torch.ldexp(torch.ones_like(x), e - 2 - bits)


def element_bounds(dtype: str, ref: Any, s: Any, m: int, n: int, k: int) -> tuple[Any, Any]:
    """(statistical, worst-case) bound on |Ĉ − C| per element, from the reference C and S = |A||B|
    (float64 tensors), for a product of M x K by K x N (m, n, k: the size the confidence is for)."""
    stat_c, worst_c = coefficients(dtype, m, n, k)
    stat, worst = stat_c * s, worst_c * s
    bits = ARITH[dtype].out_bits
    if bits is not None:
        # Rounding the fp32 accumulator y (|y − C| ≤ acc) to the output format: round to nearest errs by at most
        # ½ulp(y) ≤ ½ulp(|C| + acc); we allow a whole ulp, so an epilogue that truncates still passes.  The price:
        # a flip of the LAST stored bit (1 ulp) is not told from rounding; bits above it (≥ 2 ulp) are.
        stat = stat + 2 * half_ulp(ref.abs() + stat, bits)
        worst = worst + 2 * half_ulp(ref.abs() + worst, bits)
    return stat, worst


def to_tf32_values(x: Any) -> Any:
    """fp32 tensor → the same shape with only tf32's 10 stored significand bits (low 13 bits cleared), so the
    GEMM's own fp32→tf32 conversion is exact whether it rounds or truncates."""
    import torch

    bits = x.contiguous().view(torch.int32) & ~((1 << TF32_DROP) - 1)
    return bits.view(torch.float32)


def bits_view(c: Any) -> Any:
    """The tensor's bits as the signed integer type of its element size (a view: writes go through)."""
    import torch

    return c.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[c.element_size()])


def flip_bit(c: Any, flat_index: int, bit: int) -> None:
    """Planted fault: flip stored bit `bit` (0 = last significand bit) of one element, in place."""
    bits_view(c).view(-1)[flat_index] ^= 1 << bit


def top_bit(dtype: str) -> int:
    """The highest stored significand bit of the GEMM's output (tf32 results are fp32 numbers)."""
    return MANT_BITS["bf16" if dtype == "bf16" else "fp32"] - 1
