"""The battery's operations: GEMMs in every precision, and non-GEMM kernels (exp, softmax, layer norm, an SDPA
forward, a fixed-order reduction), each with its inputs, its run, and its float64 error ratio against the
rounding bounds of `numerics/opbounds.py` (at most 1 on a correct device)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainready.fingerprint.patterns import random_base, walking_bits
from trainready.numerics import opbounds
from trainready.numerics.bounds import MANT_BITS, to_tf32_values

LN_EPS = 1e-5  # layer norm's epsilon (torch's default)


@dataclass(frozen=True)
class Op:
    kind: str  # gemm | exp | softmax | layernorm | sdpa | sum
    dtype: str  # input format: fp64 fp32 tf32 bf16 fp16 fp8
    out: str  # output format
    big: int  # the large-exp pattern's power of two (GEMM: 2^big on A, 2^-big on B)

    @property
    def name(self) -> str:
        return f"{self.dtype} {'GEMM' if self.kind == 'gemm' else self.kind}"


# Large exponents: the GEMM's A·2^s, B·2^-s keep C of unit scale while A sits near its format's top (fp16 max
# 65504 ~ 2^16, e4m3 max 448 ~ 2^8.8) and B near its bottom; exp's inputs are shifted near fp32's overflow at 88.7.
OPS: tuple[Op, ...] = (
    Op("gemm", "fp64", "fp64", 500), Op("gemm", "fp32", "fp32", 60), Op("gemm", "tf32", "fp32", 60),
    Op("gemm", "bf16", "bf16", 60), Op("gemm", "fp16", "fp16", 12), Op("gemm", "fp8", "bf16", 5),
    Op("exp", "fp32", "fp32", 0), Op("exp", "bf16", "bf16", 0),
    Op("softmax", "fp32", "fp32", 20), Op("softmax", "bf16", "bf16", 20),
    Op("layernorm", "fp32", "fp32", 40), Op("layernorm", "bf16", "bf16", 40),
    Op("sdpa", "bf16", "bf16", 2), Op("sum", "fp32", "fp32", 100),
)

# Shapes per battery size: GEMM M = N = K; rows x cols for the row-wise kernels; SDPA [batch, heads, length, dim].
SIZES: dict[str, dict[str, tuple[int, ...]]] = {
    "cpu": {"gemm": (96,), "gemm64": (96,), "rows": (32, 256), "sdpa": (1, 2, 64, 32)},
    "quick": {"gemm": (2048,), "gemm64": (1024,), "rows": (1024, 4096), "sdpa": (2, 8, 512, 128)},
    "standard": {"gemm": (8192,), "gemm64": (4096,), "rows": (4096, 4096), "sdpa": (4, 16, 1024, 128)},
}


def shape_of(op: Op, size: str) -> tuple[int, ...]:
    t = SIZES[size]
    if op.kind == "gemm":
        n = t["gemm64" if op.dtype == "fp64" else "gemm"][0]
        return (n, n, n)
    return t["sdpa"] if op.kind == "sdpa" else t["rows"]


def shape_label(op: Op, size: str) -> str:
    return "x".join(str(s) for s in shape_of(op, size))


def torch_dtype(fmt: str) -> Any:
    import torch

    return {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
            "fp16": torch.float16, "fp8": torch.float8_e4m3fn}[fmt]


def _operand(pattern: str, shape: tuple[int, ...], fmt: str, operand: int, scale_exp: int, device: Any,
             bases: dict[Any, Any], shift_exp: bool = False) -> tuple[Any, Any]:
    """One operand: float64 values made on the host and copied to the device once (the seeded random base drawn
    once per run and kept in `bases`; walking bits one period, tiled on the device; ones made there), large-exp's
    2^s scale and exp's shift applied there (exact, or IEEE-rounded alike on any device), then cast to `fmt` on
    the device: (the input in its format, the same values in float64).  Every step is exact or IEEE
    round-to-nearest-even, so the bits are those of the host cast (checked against the host in the tests)."""
    import torch

    if pattern in ("random-7", "large-exp"):
        key = (shape, operand)
        if key not in bases:
            bases[key] = random_base(shape, operand).to(device)
        x64 = bases[key]
        if pattern == "large-exp":
            x64 = (x64.clamp(-3, 3) + 84.0) if shift_exp else x64 * 2.0**scale_exp
    elif pattern == "walking-bits":
        x64 = walking_bits(shape, MANT_BITS[fmt], operand, device)
    elif pattern == "ones":
        x64 = torch.ones(shape, dtype=torch.float64, device=device)
    else:
        raise ValueError(f"unknown input pattern {pattern!r}")
    x = x64.to(torch_dtype(fmt))
    if fmt == "tf32":
        x = to_tf32_values(x)
    return x, x.double()


def inputs(op: Op, pattern: str, size: str, device: Any, bases: dict[Any, Any] | None = None) -> dict[str, Any]:
    """The op's operands for `pattern`, made on the host and copied to `device`: name -> (native, float64).
    `bases`: the run's cache of host random bases (None: none kept)."""
    b = {} if bases is None else bases
    shape = shape_of(op, size)
    if op.kind == "gemm":
        m, n, k = shape  # B stored [N, K]: B = bᵀ (column-major, as FP8 needs); large-exp: A·2^s, B·2^-s
        return {"a": _operand(pattern, (m, k), op.dtype, 0, op.big, device, b),
                "b": _operand(pattern, (n, k), op.dtype, 1, -op.big, device, b)}
    if op.kind == "sdpa":
        return {n: _operand(pattern, shape, op.dtype, i, op.big, device, b) for i, n in enumerate("qkv")}
    # exp's large-exp pattern: arguments near fp32's overflow (exp(88.7) = 2^128)
    return {"x": _operand(pattern, shape, op.dtype, 0, op.big, device, b, shift_exp=op.kind == "exp")}


def compute(op: Op, ops_in: dict[str, Any]) -> Any:
    """Run the op once (the caller holds the determinism settings: `battery.settings`)."""
    import torch
    import torch.nn.functional as F

    if op.kind == "gemm":
        a, b = ops_in["a"][0], ops_in["b"][0]
        if op.dtype == "fp8":
            one = torch.ones((), dtype=torch.float32, device=a.device)
            return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        return a @ b.t()
    if op.kind == "sdpa":
        q, k, v = (ops_in[n][0] for n in "qkv")
        return F.scaled_dot_product_attention(q, k, v)
    x = ops_in["x"][0]
    if op.kind == "exp":
        return torch.exp(x)
    if op.kind == "softmax":
        return torch.softmax(x, dim=-1)
    if op.kind == "layernorm":
        return F.layer_norm(x, (x.shape[-1],), eps=LN_EPS)
    if op.kind == "sum":
        return x.sum(dim=-1)
    raise ValueError(f"unknown op kind {op.kind!r}")


def reference(op: Op, ops_in: dict[str, Any]) -> tuple[Any, Any]:
    """(float64 result, per-element bound) from the float64 copies of the very inputs the op was given."""
    import torch

    if op.kind == "gemm":
        a, b = ops_in["a"][1], ops_in["b"][1]
        m, k = a.shape
        ref = a @ b.t()
        return ref, opbounds.gemm_bound(op.dtype, op.out, ref, a.abs() @ b.abs().t(), m, b.shape[0], k)
    if op.kind == "sdpa":
        q, k, v = (ops_in[n][1] for n in "qkv")
        ref = torch.softmax((q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5, dim=-1) @ v
        return ref, opbounds.sdpa_bound(q, k, v, ref, op.out)
    x = ops_in["x"][1]
    if op.kind == "exp":
        ref = torch.exp(x)
        return ref, opbounds.exp_bound(ref, op.out)
    if op.kind == "softmax":
        ref = torch.softmax(x, dim=-1)
        return ref, opbounds.softmax_bound(x, ref, op.out)
    if op.kind == "layernorm":
        ref = torch.nn.functional.layer_norm(x, (x.shape[-1],), eps=LN_EPS)
        return ref, opbounds.layer_norm_bound(x, ref, op.out, LN_EPS)
    return x.sum(dim=-1), opbounds.sum_bound(x, op.out)


def error_ratio(op: Op, ops_in: dict[str, Any], out: Any) -> float:
    """max |out − ref| / bound over the elements (0 where out equals ref, inf where out is not finite and ref is)."""
    import torch

    ref, bound = reference(op, ops_in)
    o = out.double()
    diff = torch.where(o == ref, torch.zeros_like(ref), (o - ref).abs())
    diff = torch.nan_to_num(diff, nan=float("inf"))
    return float((diff / bound).max())
