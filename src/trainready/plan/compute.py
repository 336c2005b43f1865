"""Training compute: total FLOPs, wall time and GPU-hours at an assumed or measured MFU.

Two totals, both *model* FLOPs (what MFU is quoted against):

    C_6ND  = 6·N·D                    Kaplan et al. 2020, "Scaling Laws for Neural Language Models", §2.1
                                      (leaves out attention's s² work)
    C_attn = (6N + 12·L·h·s)·D        Chowdhery et al. 2022 (PaLM), Appendix B; the same attention term as
                                      Narayanan et al. 2021 eq. (3): 72·B·s·L·h²·s/(6h) = 12·L·h·s per token
    time   = C / (G · peak · MFU)     MFU as defined by PaLM Appendix B

The wall time, step time and GPU-hours use C_attn when the shape is known (else
C_6ND, the only figure a count-only model has); the 'time' line names the one.
Full recomputation runs the forward twice: hardware FLOPs ≈ 8·N·D
(Narayanan et al. 2021, §3.5: four passes instead of three), but MFU is quoted
against model FLOPs, so the time uses the model figure.
"""

from __future__ import annotations

from trainready.plan.inputs import PlanInput
from trainready.plan.model import ModelSpec
from trainready.plan.quantity import Quantity

PALM = "Chowdhery et al. 2022 (PaLM), Appendix B"


def model_flops_per_token(m: ModelSpec) -> float:
    """Model FLOPs per trained token (forward + backward), FLOP/token.

    6N + 12·L·h·s with a shape (PaLM Appendix B), 6N for a count-only model (Kaplan et al. 2020 §2.1).
    N is every parameter the model holds (`total_params`, embeddings included), the same N the plan's
    totals use, so a measured MFU and the plan's time are computed against the same FLOPs.
    """
    return 6.0 * m.total_params + (12.0 * m.layers * m.hidden * m.seq_len if m.has_shape else 0.0)


def mfu(flops_per_token: float, tokens_per_s: float, peak_tflops: float) -> float:
    """Model FLOPs utilisation, fraction 0-1: FLOP/token × token/s / (peak TFLOP/s × 1e12) (PaLM Appendix B)."""
    if peak_tflops <= 0:
        raise ValueError(f"peak {peak_tflops} TFLOP/s: expected > 0")
    return flops_per_token * tokens_per_s / (peak_tflops * 1e12)


def compute_quantities(inp: PlanInput, peak_tflops: float, mfu_kind: str = "assumed") -> list[Quantity]:
    """`mfu_kind` ('assumed' or 'measured') only labels the time line."""
    m, t, par = inp.model, inp.training, inp.parallel
    n = m.total_params
    per_token = model_flops_per_token(m)
    pt_formula = "6N + 12·L·h·s" if m.has_shape else "6N"
    out = [Quantity("compute.flops_per_token", "model FLOPs per token", per_token, "FLOP", pt_formula,
                    PALM if m.has_shape else "Kaplan et al. 2020 §2.1")]
    rate = par.world * peak_tflops * 1e12 * t.mfu  # FLOP/s the whole job sustains
    if m.has_shape and rate > 0:
        step_tokens = t.global_batch * m.seq_len
        out.append(Quantity("compute.step_time", f"step time ({step_tokens:,} tokens)", per_token * step_tokens / rate,
                            "s", "per_token · global_batch · s / (G · peak · MFU)", PALM))
    if t.tokens > 0:
        total_6nd = 6.0 * n * t.tokens
        out.append(Quantity("compute.total_flops", f"model FLOPs 6·N·D for {t.tokens / 1e9:,.6g} B tokens", total_6nd,
                            "FLOP", "6·N·D", "Kaplan et al. 2020 §2.1"))
        if m.has_shape:
            out.append(Quantity("compute.total_flops_attn", "model FLOPs incl. attention (used for the time)",
                                per_token * t.tokens, "FLOP", "(6N + 12·L·h·s)·D",
                                PALM + "; Narayanan et al. 2021 eq. (3)"))
        basis = "(6N + 12·L·h·s)·D" if m.has_shape else "6·N·D"  # the total the time is computed from
        if t.recompute == "full":
            out.append(Quantity("compute.hardware_flops", "hardware FLOPs with full recompute", 8.0 * n * t.tokens,
                                "FLOP", "8·N·D", "Narayanan et al. 2021 §3.5"))
        if rate > 0:
            secs = per_token * t.tokens / rate
            out.append(Quantity("compute.time", f"wall time on {par.world:,} GPUs at {mfu_kind} MFU {t.mfu * 100:.3g}% (from {basis})",
                                secs, "s", f"{basis} / (G · peak · MFU)", PALM))
            out.append(Quantity("compute.gpu_hours", "GPU-hours", secs * par.world / 3600.0, "GPU-h",
                                "time · G / 3600", ""))
    return out
