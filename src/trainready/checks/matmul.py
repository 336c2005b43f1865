"""Question 2, first step: does every device compute the right numbers?

Two products per dtype (fp32, tf32 on GPU, bf16), on every device at once:

1. Known answer.  A [M, 64] @ B [64, N] with integer entries in [-2, 2]: every
   input, product (|x| <= 4), partial sum and result (|x| <= 64*4 = 256) is an
   integer exactly representable in fp32, tf32 (11-bit significand) and bf16
   (8-bit significand: every integer |x| <= 2^8), so the answer must be EXACT.
2. Random data.  A [M, K] @ B [K, N], entries N(0, 1) made exactly representable in
   the GEMM's input format, against a float64 product of the same inputs; every
   element judged against the statistical bound of `numerics/bounds.py` (√K growth, false
   alarm ≤ 1e-9 per product), the worst-case K·u bound reported beside it.  The
   product is computed twice and the two results must be bitwise equal.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from trainready.devices.parallel import DeviceRun, local_devices, on_each_device
from trainready.numerics.bounds import FALSE_ALARM, bits_view, element_bounds, flip_bit, to_tf32_values, top_bit
from trainready.records import Level, Metric, Outcome, Status, Threshold
from trainready.suite.base import Check, CheckContext, register
from trainready.util.listing import first_of

K_RANDOM = 1024  # inner dimension of the random product (the bounds scale with it)
K_EXACT = 64  # inner dimension of the integer product: 64 * 2 * 2 = 256 = 2^8, exact in bf16
N_GPU = 4096  # M = N on a GPU: 4096x1024x4096 fp64 reference is ~0.1 TFLOP, milliseconds on an H100
N_CPU = 512  # M = N on a CPU: keeps the check well under a second on 2 cores


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


def flip_target(ref: Any, k: int) -> int:
    """The element a planted bit flip hits: the first whose |C| is at least 0.5·√K (about 62% of the
    elements of a product of N(0, 1) data are; the flip's size scales with |C|)."""
    return int((ref.abs().view(-1) >= 0.5 * k**0.5).nonzero()[0])


def matmul_on_device(device: str, dtype: str, inputs: dict[str, Any], corrupt: bool, nondet: bool,
                     flip: bool = False, size: tuple[int, int, int] | None = None) -> dict[str, float]:
    """One dtype's two products on one device: rel_err (max |Ĉ−C|/|A||B|), bound_ratio (max |Ĉ−C| / the
    statistical bound), worst_ratio (… / the worst-case bound), exact_mismatches, repeat_mismatches.
    `size` (M, N, K): the product size the bound's confidence is for (default: this product's)."""
    import torch

    tdt = torch.bfloat16 if dtype == "bf16" else torch.float32
    a, b = inputs["a"].to(device, tdt), inputs["b"].to(device, tdt)
    if dtype == "tf32":  # tf32-representable values: the GEMM's conversion is exact, the reference sees the same
        a, b = to_tf32_values(a), to_tf32_values(b)
    ai, bi = inputs["ai"].to(device, tdt), inputs["bi"].to(device, tdt)

    exact = torch.matmul(ai, bi)
    if corrupt:
        _bump(exact)
    expected = inputs["expected"].to(device)  # int64, exact
    exact_bad = int((exact.double() != expected.double()).sum())

    c1 = torch.matmul(a, b)
    c2 = torch.matmul(a, b)
    a64, b64 = a.double(), b.double()
    ref = a64 @ b64  # the exact product of the very inputs the GEMM was given, up to ~K·2^-53
    if corrupt:
        _bump(c1)
        _bump(c2)
    if flip:  # the same element in both products: only the bound can catch it, not the repeat
        for c in (c1, c2):
            flip_bit(c, flip_target(ref, a.shape[1]), top_bit(dtype))
    if nondet:
        flip_bit(c2, 0, 0)  # the last significand bit of one element: one ulp
    repeat_bad = int((bits_view(c1) != bits_view(c2)).sum())

    m, k = a.shape
    mm, nn, kk = size or (m, b.shape[1], k)
    s = a64.abs() @ b64.abs()  # |A||B| > 0 almost surely for Gaussian data
    stat, worst = element_bounds(dtype, ref, s, mm, nn, kk)
    err = (c1.double() - ref).abs()
    out = {"rel_err": float((err / s).max()), "bound_ratio": float((err / stat).max()),
           "worst_ratio": float((err / worst).max())}
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    return {**out, "exact_mismatches": float(exact_bad), "repeat_mismatches": float(repeat_bad)}


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
        devices = local_devices(ctx.spec)
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
                first_of(failures, 6),
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
        hit_f, dt_f = _planted(ctx.fault("matmul.bitflip"), device)
        return matmul_on_device(device, dtype, inputs, hit_c and dt_c == dtype, hit_n and dt_n == dtype,
                                hit_f and dt_f == dtype)

    @staticmethod
    def _judge(dtype: str, runs: list[DeviceRun[dict[str, float]]], metrics: list[Metric]) -> list[str]:
        t_bound = Threshold("<=", 1.0, "1", f"Higham & Mary 2019 probabilistic bound for a {K_RANDOM}-term {dtype} "
                            f"product, false alarm <= {FALSE_ALARM:g} (numerics/bounds.py)")
        t_zero = Threshold("==", 0.0, "elements", "exact by construction")
        bad: list[str] = []
        for r in runs:
            if r.error or r.value is None:
                bad.append(f"{r.where} {dtype}: {r.error}")
                continue
            v = r.value
            metrics.append(Metric.of("matmul_err_vs_bound", v["bound_ratio"], "1", t_bound, dtype=dtype, **r.label))
            metrics.append(Metric.of("matmul_err_vs_worst_case", v["worst_ratio"], "1", None, dtype=dtype, **r.label))
            metrics.append(Metric.of("matmul_rel_err", v["rel_err"], "1", None, dtype=dtype, **r.label))
            metrics.append(Metric.of("matmul_exact_mismatches", v["exact_mismatches"], "elements", t_zero, dtype=dtype, **r.label))
            metrics.append(Metric.of("matmul_repeat_mismatches", v["repeat_mismatches"], "elements", t_zero, dtype=dtype, **r.label))
            if v["exact_mismatches"]:
                bad.append(f"{r.where} {dtype}: integer product wrong in {v['exact_mismatches']:.0f} element(s)")
            if not v["bound_ratio"] <= 1.0:
                worst = "beyond even the worst-case K·u bound" if not v["worst_ratio"] <= 1.0 else \
                    f"{v['worst_ratio']:.2g}x the worst-case K·u bound"
                bad.append(f"{r.where} {dtype}: random product off by {v['bound_ratio']:.3g}x the statistical error "
                           f"bound (false alarm <= {FALSE_ALARM:g}; {worst})")
            if v["repeat_mismatches"]:
                bad.append(f"{r.where} {dtype}: same product twice differs in {v['repeat_mismatches']:.0f} element(s)")
        return bad
