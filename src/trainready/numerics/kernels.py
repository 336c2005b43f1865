"""Kernel cross-checks used by the train-step check (not a check module itself).

SDPA: each fused backend against the math backend run in float64, judged the way
the FlashAttention test suite judges its kernels (Dao et al., flash-attention
tests/test_flash_attn.py: a fused result may be at most 2x as far from the
float64 reference as a plain attention written with ops in the low precision,
their `attention_ref(upcast=False)`; ours is `naive_attention`).  We allow 3x
plus a floor of 4 ulps of the largest reference element, because on small
problems the naive error can be ~0 and a legitimate kernel then differs by ulps.

AdamW: `fused=True` against `foreach=True` from the same parameters and the
same gradients.  Both evaluate the same formula (Loshchilov & Hutter 2019) in
fp32 in a different order, so they may differ by a few ulps per step.
"""

from __future__ import annotations

import threading
from typing import Any

# `sdpa_kernel` flips process-global backend flags: with one thread per GPU, one
# thread's MATH reference would silently switch another's FLASH run to MATH (a
# comparison that cannot fail).  Backend-pinned forwards are serialised here.
_SDPA_BACKEND_LOCK = threading.Lock()

SDPA_FACTOR = 3.0  # x the math backend's own error (FlashAttention tests use 2x)
SDPA_FLOOR_ULPS = 4.0  # floor, in ulps of max|reference|
ADAMW_STEPS = 4
ADAMW_LR = 1e-3
ADAMW_ULPS_PER_STEP = 16.0  # per step, in ulps of (max|p| + 3·lr): Adam's step is ≤ ~3·lr for default betas
#                             (Kingma & Ba 2015 §2.1: |Δ| ≤ lr·(1−β1)/sqrt(1−β2) = 3.16·lr when (1−β1) > sqrt(1−β2))


def eps_of(dtype: Any) -> float:
    import torch

    return float(torch.finfo(dtype).eps) / 2  # unit roundoff u = eps/2 (round to nearest)


def sdpa_inputs(device: str, on_gpu: bool) -> dict[str, Any]:
    """q, k, v [B, H, T, D] and a gradient for the output; seeded on CPU, identical everywhere."""
    import torch

    b, h, t, d = (2, 8, 256, 64) if on_gpu else (2, 4, 64, 16)
    g = torch.Generator().manual_seed(25)
    return {k: torch.randn(b, h, t, d, generator=g).to(device) for k in ("q", "k", "v", "dout")}


def naive_attention(q: Any, k: Any, v: Any) -> Any:
    """Causal softmax(q kᵀ / sqrt(d)) v with every op in q's dtype (no upcast): the low-precision yardstick."""
    import torch

    t, d = q.shape[-2], q.shape[-1]
    s = (q @ k.transpose(-2, -1)) * (d**-0.5)  # [B, H, T, T]
    future = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(s.masked_fill(future, float("-inf")), dim=-1) @ v


def sdpa_run(inputs: dict[str, Any], dtype: Any, backend: Any | None) -> list[Any]:
    """[out, dq, dk, dv] for a causal attention in `dtype`: SDPA under `backend`, or `naive_attention` if None."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    q, k, v = (inputs[n].to(dtype).detach().requires_grad_(True) for n in ("q", "k", "v"))
    if backend is None:
        out = naive_attention(q, k, v)
    else:
        with _SDPA_BACKEND_LOCK, sdpa_kernel([backend]):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), inputs["dout"].to(dtype))
    return [t.detach().double() for t in (out, dq, dk, dv)]


def sdpa_compare(
    inputs: dict[str, Any], dtype: Any, backend: Any, perturb: bool = False
) -> dict[str, dict[str, float]]:
    """{tensor: {err, tol, naive_err}} for out/dq/dk/dv of `backend` vs the float64 math-backend reference."""
    import torch
    from torch.nn.attention import SDPBackend

    ref = sdpa_run(inputs, torch.float64, SDPBackend.MATH)
    low = sdpa_run(inputs, dtype, None)
    got = sdpa_run(inputs, dtype, backend)
    if perturb:  # planted fault: one element of the fused output is off by 1
        got[0].view(-1)[0] += 1.0
    u = eps_of(dtype)
    res = {}
    for name, r, lo, g in zip(("out", "dq", "dk", "dv"), ref, low, got):
        naive_err = float((lo - r).abs().max())
        tol = SDPA_FACTOR * naive_err + SDPA_FLOOR_ULPS * 2 * u * float(r.abs().max())
        res[name] = {"err": float((g - r).abs().max()), "tol": tol, "naive_err": naive_err}
    return res


def adamw_compare(params: list[Any], device: str, perturb: bool = False) -> dict[str, float] | None:
    """max |p_fused − p_foreach| after ADAMW_STEPS steps, and its tolerance; None if fused is unsupported here."""
    import torch

    pa = [p.detach().to(device, torch.float32).clone().requires_grad_(True) for p in params]
    pb = [p.detach().clone().requires_grad_(True) for p in pa]
    try:
        fused = torch.optim.AdamW(pa, lr=ADAMW_LR, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return None  # fused AdamW needs torch >= 2.4 on CPU
    plain = torch.optim.AdamW(pb, lr=ADAMW_LR, foreach=True)
    g = torch.Generator(device=device).manual_seed(26)  # gradients made on the device: no host work per GPU
    for _ in range(ADAMW_STEPS):
        grads = [torch.randn(p.shape, generator=g, device=device) for p in pa]
        for p, q, gr in zip(pa, pb, grads):
            p.grad = gr.clone()
            q.grad = gr.clone()
        fused.step()
        plain.step()
    if perturb:
        with torch.no_grad():
            pa[0].view(-1)[0] += 1e-2  # planted fault: one fused-updated element off by 10·lr
    diff = max(float((a.detach() - b.detach()).abs().max()) for a, b in zip(pa, pb))
    pmax = max(float(p.detach().abs().max()) for p in pb)
    tol = ADAMW_STEPS * ADAMW_ULPS_PER_STEP * 2 * eps_of(torch.float32) * (pmax + 3 * ADAMW_LR)
    return {"err": diff, "tol": tol}
