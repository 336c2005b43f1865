"""Planner prediction vs measured peak GPU memory for the reference workload.

Trains three configurations of `trainready.workload.model.GPT` (bf16 autocast,
fp32 parameters, fused AdamW, gradients kept between steps, SDPA forced to the
flash kernel) and prints predicted ÷ measured peak memory, where measured is
`torch.cuda.max_memory_allocated()` over steady-state steps and predicted is the
planner's 'allocated peak' for precision=amp (target: within ±10 %).

On a machine without a GPU it prints the predictions and says that measuring
needs a GPU (exit 0).

    PYTHONPATH=src python3 benchmarks/plan_vs_measured.py
"""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from typing import Any

import torch

from trainready.plan.inputs import Hardware, Parallel, PlanInput, Training, validate
from trainready.plan.memory import plan_memory
from trainready.plan.model import from_reference
from trainready.plan.quantity import GIB
from trainready.workload.model import GPT, PRESETS, ModelConfig

# (label, model config, micro-batch): activation-heavy, logits-heavy and state-heavy.
CONFIGS: list[tuple[str, ModelConfig, int]] = [
    ("small b=64 (activations + logits)", PRESETS["small"], 64),
    ("L12 h1024 V32k s1024 b=8 (logits)",
     ModelConfig(vocab_size=32768, seq_len=1024, n_layer=12, n_head=16, d_model=1024, d_ff=4096), 8),
    ("L24 h2048 s512 b=2 (model states)",
     ModelConfig(vocab_size=16384, seq_len=512, n_layer=24, n_head=16, d_model=2048, d_ff=8192), 2),
]
WARMUP, MEASURE = 3, 3  # steps: AdamW states exist after step 1; peak taken over steps 4-6


def predict(cfg: ModelConfig, b: int) -> tuple[float, dict[str, float]]:
    inp = validate(PlanInput(from_reference(cfg), Parallel(dp=1), Training(precision="amp", micro_batch=b,
                                                                            attention="flash"),
                             Hardware(gpu_mem_gib=141, peak_tflops=989)))
    mp = plan_memory(inp, 141 * GIB)
    return mp.peak, {q.key.split(".")[-1]: q.value for q in mp.items if q.unit == "B"}


def _flash_only() -> Any:
    try:  # torch >= 2.3
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    except Exception:  # noqa: BLE001
        return nullcontext()


def measure(cfg: ModelConfig, b: int) -> tuple[float, float]:
    dev = torch.device("cuda")
    torch.manual_seed(0)
    with dev:  # build on the GPU (torch >= 2.0 device context)
        model = GPT(cfg)
    model.train()
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, cfg.vocab_size, (b, cfg.seq_len), device=dev)
    y = torch.randint(0, cfg.vocab_size, (b, cfg.seq_len), device=dev)
    t0 = 0.0
    with _flash_only():
        for step in range(WARMUP + MEASURE):
            if step == WARMUP:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                t0 = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x, y)[1]  # the logits are not kept (as in a training loop)
            assert loss is not None
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=False)  # gradients stay allocated, as with DDP buckets
            del loss
    torch.cuda.synchronize()
    peak = float(torch.cuda.max_memory_allocated())
    step_s = (time.perf_counter() - t0) / MEASURE
    del model, opt, x, y
    torch.cuda.empty_cache()
    return peak, step_s


def main() -> int:
    has_gpu = torch.cuda.is_available()
    print(f"torch {torch.__version__}, device: {torch.cuda.get_device_name(0) if has_gpu else 'CPU only'}")
    ratios = []
    for label, cfg, b in CONFIGS:
        pred, parts = predict(cfg, b)
        top = ", ".join(f"{k} {v / GIB:.2f}" for k, v in parts.items()
                        if k not in ("per_layer", "allocated_peak", "allowance", "total", "capacity") and v)
        print(f"\n{label}: {GPT.__name__} {from_reference(cfg).total_params / 1e6:.1f} M params")
        print(f"  predicted peak {pred / GIB:.3f} GiB  [{top}] GiB")
        if not has_gpu:
            continue
        peak, step_s = measure(cfg, b)
        ratio = pred / peak
        ratios.append(ratio)
        ok = "within ±10%" if abs(ratio - 1) <= 0.10 else "OUTSIDE ±10%"
        print(f"  measured peak  {peak / GIB:.3f} GiB (torch.cuda.max_memory_allocated, {step_s * 1e3:.0f} ms/step)")
        print(f"  predicted ÷ measured = {ratio:.3f}  {ok}")
    if not has_gpu:
        print("\nmeasuring needs a CUDA GPU: predictions only (exit 0)")
        return 0
    print("\nsummary: " + ", ".join(f"{r:.3f}" for r in ratios)
          + ("  (all within ±10%)" if all(abs(r - 1) <= 0.10 for r in ratios) else "  (NOT all within ±10%)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
