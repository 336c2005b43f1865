"""Per-element rounding bounds for the compute fingerprint's battery (`fingerprint/ops.py`): each kernel's output
against a float64 evaluation of the same (already rounded) inputs.  Worst-case bounds (Higham, "Accuracy and
Stability of Numerical Algorithms", 2nd ed.), so a healthy device never exceeds them whatever its summation
order; they exist to catch a wrong answer every device shares (a flipped high bit, a broken kernel), which a
bit-for-bit comparison between devices cannot see.  A low-bit flip on one device hides under them: the
fingerprint's hashes catch that one.

Roundoffs: `U` = 2^-23, the fp32 compute roundoff doubled for a truncating accumulator (Fasi et al. 2021, as
`bounds.U_ACC`); each output rounded to its format counts one whole ulp (`bounds.half_ulp` x 2); `FLOOR`: the
smallest normal of the output format, for results that flush to zero.
"""

from __future__ import annotations

from typing import Any

from trainready.numerics.bounds import MANT_BITS, U_ACC, U_F64, gamma, gamma_tilde, half_ulp, confidence_lambda

U = U_ACC
OUT_BITS = MANT_BITS  # stored significand bits of each output format: bounds.MANT_BITS, the one table
# Smallest normal of each output format (IEEE 754; bf16 shares fp32's exponent).
FLOOR = {"fp64": 2.0**-1022, "fp32": 2.0**-126, "bf16": 2.0**-126, "fp16": 2.0**-14}
# Accumulation roundoff of each GEMM input format.  FP8 tensor-core GEMMs on Hopper keep about 14 significand
# bits in their accumulator (DeepSeek-V3 Technical Report, 2024, §3.3.2): 2^-13 taken as its roundoff.
GEMM_U = {"fp64": U_F64, "fp32": U, "tf32": U, "bf16": U, "fp16": U, "fp8": 2.0**-13}


def ulp(x: Any, fmt: str) -> Any:
    """One ulp of |x| in output format `fmt` (float64 tensor in and out)."""
    return 2 * half_ulp(x, OUT_BITS[fmt])


def gemm_coefficient(dtype: str, m: int, n: int, k: int) -> float:
    """Coefficient c of |C^ − C| <= c·(|A||B|): γ_K (worst case) while K·u < 0.5, else (FP8's short
    accumulator) the statistical γ̃_K(λ) of Higham & Mary 2019 (false alarm <= 1e-9 over the M·N·K chains)."""
    u = GEMM_U[dtype]
    acc = gamma(k, u) if k * u < 0.5 else gamma_tilde(k, u, confidence_lambda(m * n * k, u))
    return acc + gamma(k, U_F64)


def gemm_bound(dtype: str, out_fmt: str, ref: Any, s: Any, m: int, n: int, k: int) -> Any:
    """|C^ − C| bound per element from C (ref) and S = |A||B| (float64): accumulation plus the output's ulp."""
    acc = gemm_coefficient(dtype, m, n, k) * s
    rnd = ulp(ref.abs() + acc, out_fmt) if out_fmt != "fp64" else 0.0
    return acc + rnd + FLOOR[out_fmt]


def exp_bound(ref: Any, out_fmt: str) -> Any:
    """exp: the CUDA math library's expf is within 2 ulp (CUDA C++ Programming Guide, "Mathematical Functions"),
    counted as 4·U relative, plus the output's rounding."""
    return 4 * U * ref.abs() + ulp(ref, out_fmt) + FLOOR[out_fmt]


def softmax_bound(x: Any, ref: Any, out_fmt: str) -> Any:
    """softmax over the last dim (n terms) computed in fp32: x − max rounds by U·|x − max| (amplified 1:1 by
    exp), exp errs by ~2U, the sum by γ_n, the division by U."""
    n = x.shape[-1]
    shift = (x - x.amax(dim=-1, keepdim=True)).abs()
    rel = (shift + 4) * U + gamma(n + 2, U)
    return rel * ref.abs() + ulp(ref, out_fmt) + FLOOR[out_fmt]


def layer_norm_bound(x: Any, ref: Any, out_fmt: str, eps: float) -> Any:
    """layer norm (no affine) over the last dim: mean and variance are n-term sums (γ_2n each, relative to
    max|x|/σ), the square root and division one U each."""
    n = x.shape[-1]
    sigma = (x.var(dim=-1, unbiased=False, keepdim=True) + eps).sqrt()
    scale = x.abs().amax(dim=-1, keepdim=True) / sigma
    return gamma(4 * n + 8, U) * (scale + ref.abs()) * (1 + scale) + ulp(ref, out_fmt) + FLOOR[out_fmt]


def sum_bound(x: Any, out_fmt: str) -> Any:
    """A sum of n terms in any order: γ_{n−1}·Σ|x| (Higham Eq. 4.4)."""
    n = x.shape[-1]
    mag = x.abs().sum(dim=-1)
    return gamma(n, U) * mag + ulp(mag, out_fmt) + FLOOR[out_fmt]


def sdpa_bound(q: Any, k: Any, v: Any, ref: Any, out_fmt: str) -> Any:
    """Scaled dot-product attention softmax(QKᵀ/√d)V with fp32 scores and accumulation, the probabilities rounded
    to the 16-bit input format before the second GEMM (FlashAttention-2, Dao 2023): each probability is off by at
    most 2^-7 (bf16 rounding, doubled) plus the score's error γ_d·|q||k|/√d (exp turns it into a relative one),
    each output a convex mix of V rows: the bound is that relative error times (P·|V|)."""
    import math

    d = q.shape[-1]
    scale = 1.0 / math.sqrt(d)
    p = ((q @ k.transpose(-2, -1)) * scale).softmax(dim=-1)
    smag = (q.abs() @ k.abs().transpose(-2, -1)) * scale
    rel = 2 * (2.0**-7 + gamma(d + 2, U) * smag + gamma(k.shape[-2] + 2, U))
    return (rel * p) @ v.abs() * 2 + ulp(ref, out_fmt) + FLOOR[out_fmt]
