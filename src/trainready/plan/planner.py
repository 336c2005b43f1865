"""Put the parts together: inputs → `Plan` (memory, checkpoint, compute, advice) → JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from trainready.plan.checkpoint import checkpoint_quantities
from trainready.plan.compute import compute_quantities
from trainready.plan.gpus import lookup
from trainready.plan.inputs import PlanInput, validate, warnings
from trainready.plan.memory import MemoryPlan, plan_memory
from trainready.plan.quantity import GIB, Quantity

SCHEMA = "trainready.plan/1"
SEED_RULE = "seed 003's rule of thumb (advice, not fact)"


@dataclass(frozen=True)
class Plan:
    inputs: PlanInput
    gpu_name: str
    memory: MemoryPlan
    checkpoint: tuple[Quantity, ...]
    compute: tuple[Quantity, ...]
    advice: str
    warnings: tuple[str, ...] = ()  # legal but probably unintended inputs (plan.inputs.warnings)
    mfu_kind: str = "assumed"  # or "measured" (--mfu-from a node report)
    sources: tuple[str, ...] = ()  # where the GPU / MFU came from, one line each (--spec, --mfu-from)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "inputs": asdict(self.inputs),
            "gpu": self.gpu_name,
            "params": self.inputs.model.total_params,
            "memory": {"verdict": self.memory.verdict, "items": [q.to_json() for q in self.memory.items]},
            "checkpoint": [q.to_json() for q in self.checkpoint],
            "compute": [q.to_json() for q in self.compute],
            "advice": self.advice,
            "warnings": list(self.warnings),
            "mfu": {"value": self.inputs.training.mfu, "kind": self.mfu_kind},
            "sources": list(self.sources),
        }


def gpu_figures(inp: PlanInput) -> tuple[str, float, float]:
    """(name, memory bytes, dense BF16 peak TFLOP/s): flags override the table."""
    hw = inp.hardware
    if hw.gpu_mem_gib and hw.peak_tflops:
        return hw.gpu or "custom", hw.gpu_mem_gib * GIB, hw.peak_tflops
    info = lookup(hw.gpu)
    return info.name, (hw.gpu_mem_gib or info.memory_gib) * GIB, hw.peak_tflops or info.bf16_tflops


def framework_advice(params: float, gpus: int) -> str:
    """Seed 003: ≤ 13 B on ≤ 64 GPUs → DeepSpeed ZeRO-2/3; ≥ 70 B or ~1,000 GPUs → Megatron TP + PP."""
    if params >= 70e9 or gpus >= 1000:
        return (f"{SEED_RULE}: ≥ 70 B parameters or ~1,000 GPUs → Megatron-style tensor + pipeline parallelism "
                "(Megatron-LM, or Megatron-DeepSpeed with ZeRO for the optimizer states).")
    if params <= 13e9 and gpus <= 64:
        return f"{SEED_RULE}: ≤ 13 B parameters on ≤ 64 GPUs → DeepSpeed ZeRO-2/3 (or FSDP) is the simplest fit."
    return (f"{SEED_RULE}: between its two cases (13–70 B, or 64–1,000 GPUs) → DeepSpeed ZeRO or Megatron both "
            "work; let the layout search and a short memory test decide.")


def make_plan(inp: PlanInput, mfu_kind: str = "assumed", sources: tuple[str, ...] = ()) -> Plan:
    inp = validate(inp)
    name, capacity, peak = gpu_figures(inp)
    mem = plan_memory(inp, capacity)
    return Plan(
        inputs=inp,
        gpu_name=name,
        memory=mem,
        checkpoint=tuple(checkpoint_quantities(inp)),
        compute=tuple(compute_quantities(inp, peak, mfu_kind)),
        advice=framework_advice(inp.model.total_params, inp.parallel.world),
        warnings=tuple(warnings(inp)),
        mfu_kind=mfu_kind,
        sources=sources,
    )
