"""Question 2, first step: does every device compute the right numbers?

Two products per dtype (fp32, tf32 on GPU, bf16), on every device at once:

1. Known answer.  A [M, 64] @ B [64, N] with integer entries in [-2, 2]: every
   input, product (|x| <= 4), partial sum and result (|x| <= 64*4 = 256) is an
   integer exactly representable in fp32, tf32 (11-bit significand) and bf16
   (8-bit significand: every integer |x| <= 2^8), so the answer must be EXACT.
2. Random data.  A [M, K] @ B [K, N], entries N(0, 1), against a float64
   product of the same inputs; judged componentwise against |A||B| with the
   bounds derived in `tolerance` below.  The product is computed twice and the
   two results must be bitwise equal.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from trainready.checks.base import Check, CheckContext, register
from trainready.hardware.parallel import DeviceRun, local_devices, on_each_device
from trainready.records import Level, Metric, Outcome, Status, Threshold

K_RANDOM = 1024  # inner dimension of the random product (tolerances scale with it)
K_EXACT = 64  # inner dimension of the integer product: 64 * 2 * 2 = 256 = 2^8, exact in bf16
N_GPU = 4096  # M = N on a GPU: 4096x1024x4096 fp64 reference is ~0.1 TFLOP, milliseconds on an H100
N_CPU = 512  # M = N on a CPU: keeps the check well under a second on 2 cores

# Unit roundoffs u (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., §2.1: u = 2^-t for
# round-to-nearest with t significand bits; 2^(1-t) when truncating).
U_FP32 = 2.0**-24  # 24-bit significand, round to nearest
U_ACC = 2.0**-23  # fp32 accumulation inside tensor cores truncates (Fasi, Higham, Mikaitis, Pranesh 2021,
#                   "Numerical behavior of NVIDIA tensor cores", PeerJ CS 7:e330): use the truncation roundoff
U_TF32 = 2.0**-10  # tf32 keeps 11 significand bits; inputs may be truncated, not rounded (same source)
U_BF16 = 2.0**-8  # bf16 keeps 8 significand bits, result rounded to nearest
MARGIN = 2.0  # covers the float64 reference's own error (~K * 2^-53) and |A||B|'s; the bounds are worst cases


def gamma(n: int, u: float) -> float:
    """γ_n = n·u / (1 − n·u) (Higham §3.1): |fl(x·y) − x·y| ≤ γ_n |x|·|y| for an n-term dot product, any order."""
    return n * u / (1 - n * u)


def tolerance(dtype: str, k: int) -> float:
    """Bound on max_ij |C − C_ref|_ij / (|A||B|)_ij for a K-term product (Higham Thm 3.5 / Eq. 3.13, componentwise).

    - fp32: accumulation γ_K(u_acc) plus the output rounding u_fp32.
    - tf32: the GEMM rounds fp32 inputs to tf32 (reference uses the fp32 inputs): each product
      a·b gains ≤ (2u_tf32 + u_tf32²)|a||b|; then fp32 accumulation and output as for fp32.
    - bf16: the reference is the float64 product of the same bf16 inputs, so the only errors are fp32
      accumulation γ_K(u_acc) and rounding the output to bf16 (u_bf16·|C| ≤ u_bf16·(|A||B|)).
      (Random data typically shows ~sqrt(K)·u growth; we judge against the worst case, so no false alarms.)
    """
    acc = gamma(k, U_ACC)
    if dtype == "fp32":
        return MARGIN * (acc + U_FP32)
    if dtype == "tf32":
        return MARGIN * (2 * U_TF32 + U_TF32**2 + acc + U_FP32)
    if dtype == "bf16":
        return MARGIN * (acc + U_BF16)
    raise ValueError(f"no tolerance for dtype {dtype!r}")


@contextlib.contextmanager
def matmul_mode(dtype: str) -> Iterator[None]:
    """Set cuBLAS's fp32 mode (IEEE vs TF32) and turn off bf16 reduced-precision split-K reductions,
    so the product computed is the one the tolerance describes; restore afterwards.

    Process-global flags: the caller runs one dtype on all devices at a time.  Uses only the new
    `fp32_precision` API where it exists (torch ≥ 2.9 refuses a mix of old and new).
    """
    import torch

    m = torch.backends.cuda.matmul
    new_api = hasattr(m, "fp32_precision")
    old_prec = m.fp32_precision if new_api else m.allow_tf32
    old_red = m.allow_bf16_reduced_precision_reduction
    try:
        if new_api:
            m.fp32_precision = "tf32" if dtype == "tf32" else "ieee"
        else:
            m.allow_tf32 = dtype == "tf32"
        m.allow_bf16_reduced_precision_reduction = False
        yield
    finally:
        if new_api:
            m.fp32_precision = old_prec
        else:
            m.allow_tf32 = old_prec
        m.allow_bf16_reduced_precision_reduction = old_red


def _inputs(n: int) -> dict[str, Any]:
    """Seeded CPU inputs, identical for every device (so every GPU computes the same product)."""
    import torch

    g = torch.Generator().manual_seed(20)
    return {
        "a": torch.randn(n, K_RANDOM, generator=g),
        "b": torch.randn(K_RANDOM, n, generator=g),
        "ai": torch.randint(-2, 3, (n, K_EXACT), generator=g),
        "bi": torch.randint(-2, 3, (K_EXACT, n), generator=g),
    }


def inputs_for(n: int) -> dict[str, Any]:
    """`_inputs` plus the exact integer answer (int64, computed once on the CPU)."""
    d = _inputs(n)
    d["expected"] = d["ai"] @ d["bi"]
    return d


def _bump(c: Any) -> None:
    """Planted fault: add 1 to the element of smallest magnitude (so +1 is representable in any dtype)."""
    idx = int(c.abs().argmin())
    c.view(-1)[idx] += 1


def matmul_on_device(device: str, dtype: str, inputs: dict[str, Any], corrupt: bool, nondet: bool) -> dict[str, float]:
    """One dtype's two products on one device. Returns rel_err, exact_mismatches, repeat_mismatches."""
    import torch

    tdt = torch.bfloat16 if dtype == "bf16" else torch.float32
    a, b = inputs["a"].to(device, tdt), inputs["b"].to(device, tdt)
    ai, bi = inputs["ai"].to(device, tdt), inputs["bi"].to(device, tdt)

    exact = torch.matmul(ai, bi)
    if corrupt:
        _bump(exact)
    expected = inputs["expected"].to(device)  # int64, exact
    exact_bad = int((exact.double() != expected.double()).sum())

    c1 = torch.matmul(a, b)
    c2 = torch.matmul(a, b)
    if corrupt:
        _bump(c1)
        _bump(c2)
    if nondet:
        iv = c2.view(torch.int16 if tdt == torch.bfloat16 else torch.int32).view(-1)
        iv[0] ^= 1  # flip the last significand bit of one element: one ulp
    ity = torch.int16 if tdt == torch.bfloat16 else torch.int32
    repeat_bad = int((c1.view(ity) != c2.view(ity)).sum())

    # Reference on the inputs the GEMM was given: fp32 inputs for fp32/tf32, bf16-rounded ones for bf16.
    a64, b64 = a.double(), b.double()
    ref = a64 @ b64
    scale = a64.abs() @ b64.abs()  # |A||B| > 0 almost surely for Gaussian data
    rel = float(((c1.double() - ref).abs() / scale).max())
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    return {"rel_err": rel, "exact_mismatches": float(exact_bad), "repeat_mismatches": float(repeat_bad)}


def _planted(value: str | None, device: str) -> tuple[bool, str]:
    """Fault value 'IDX' or 'IDX:DTYPE' (IDX = GPU index, 0 on a CPU): (applies to this device?, dtype)."""
    if value is None:
        return False, ""
    idx, _, dt = value.partition(":")
    here = device.split(":", 1)[1] if ":" in device else "0"
    return idx.strip() == here, (dt.strip() or "bf16")


@register
class MatmulCheck(Check):
    name = "matmul"
    title = "Matmul in fp32/tf32/bf16 matches float64, exactly on integers, bitwise on repeat"
    level = Level.QUICK
    order = 20
    timeout_s = 120.0

    def run(self, ctx: CheckContext) -> Outcome:
        devices = local_devices()
        on_gpu = devices[0].startswith("cuda")
        inputs = inputs_for(N_GPU if on_gpu else N_CPU)
        dtypes = ["fp32", "tf32", "bf16"] if on_gpu else ["fp32", "bf16"]
        metrics: list[Metric] = []
        failures: list[str] = []
        for dtype in dtypes:
            with matmul_mode(dtype):
                runs = on_each_device(lambda d, dt=dtype: self._one(ctx, d, dt, inputs), devices)
            failures += self._judge(dtype, runs, metrics)
        note = "" if on_gpu else " (tf32: n/a on CPU)"
        where = f"{len(devices)} GPU(s)" if on_gpu else "cpu"
        if failures:
            return Outcome(
                Status.FAIL,
                "; ".join(failures[:6]) + (f" (+{len(failures) - 6} more)" if len(failures) > 6 else ""),
                tuple(metrics),
                remedy="Wrong or unrepeatable arithmetic: drain the named GPU, check `nvidia-smi -q -d ECC,PAGE_RETIREMENT` "
                "and dmesg for Xid 48/63/64/94/95, then run the vendor's field diagnostic (dcgmi diag -r 3).",
            )
        return Outcome(
            Status.PASS,
            f"{', '.join(dtypes)} on {where}: integer products exact, random products within bounds, repeats bitwise equal{note}",
            tuple(metrics),
        )

    def _one(self, ctx: CheckContext, device: str, dtype: str, inputs: dict[str, Any]) -> dict[str, float]:
        hit_c, dt_c = _planted(ctx.fault("matmul.corrupt"), device)
        hit_n, dt_n = _planted(ctx.fault("matmul.nondeterministic"), device)
        return matmul_on_device(device, dtype, inputs, hit_c and dt_c == dtype, hit_n and dt_n == dtype)

    @staticmethod
    def _judge(dtype: str, runs: list[DeviceRun[dict[str, float]]], metrics: list[Metric]) -> list[str]:
        tol = tolerance(dtype, K_RANDOM)
        t_rel = Threshold("<=", tol, "1", f"worst-case bound for a {K_RANDOM}-term {dtype} product (known_answer.tolerance)")
        t_zero = Threshold("==", 0.0, "elements", "exact by construction")
        bad: list[str] = []
        for r in runs:
            if r.error or r.value is None:
                bad.append(f"{r.where} {dtype}: {r.error}")
                continue
            v = r.value
            metrics.append(Metric.of("matmul_rel_err", v["rel_err"], "1", t_rel, dtype=dtype, **r.label))
            metrics.append(Metric.of("matmul_exact_mismatches", v["exact_mismatches"], "elements", t_zero, dtype=dtype, **r.label))
            metrics.append(Metric.of("matmul_repeat_mismatches", v["repeat_mismatches"], "elements", t_zero, dtype=dtype, **r.label))
            if v["exact_mismatches"]:
                bad.append(f"{r.where} {dtype}: integer product wrong in {v['exact_mismatches']:.0f} element(s)")
            if not v["rel_err"] <= tol:
                bad.append(f"{r.where} {dtype}: error {v['rel_err']:.3g} of |A||B| > bound {tol:.3g}")
            if v["repeat_mismatches"]:
                bad.append(f"{r.where} {dtype}: same product twice differs in {v['repeat_mismatches']:.0f} element(s)")
        return bad
