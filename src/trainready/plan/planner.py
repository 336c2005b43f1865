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
# The framework rule and its public sources (also in --explain's formula table).
ZERO_RULE = ("ZeRO trains models of up to ~13 B parameters without model parallelism (Rajbhandari et al. 2020, "
             "abstract)")
MEGATRON_RULE = ("Megatron-LM's guidance: tensor parallelism up to the GPUs of one server (NVLink), pipeline "
                 "parallelism across servers until the model fits, data parallelism over the remaining GPUs "
                 "(Narayanan et al. 2021 §3, takeaways #1 and #2; NeMo trains on the same Megatron Core)")


@dataclass(frozen=True)
class Layout:
    """How the planned layout was chosen, and what was implied rather than given."""

    chosen_by: str = "given"  # "given" (flags / plan file) or "search" (best of the layouts that fit)
    layouts_fit: int = -1  # layouts the search found that fit; -1 = no search ran
    global_batch_note: str = ""  # why the global batch is what it is, when --global-batch was not given
    departure: str = ""  # how and why a searched layout departs from the framework advice ('' = it follows it)

    def to_json(self) -> dict[str, Any]:
        return {"chosen_by": self.chosen_by, "layouts_fit": None if self.layouts_fit < 0 else self.layouts_fit,
                "global_batch_implied": bool(self.global_batch_note), "global_batch_note": self.global_batch_note,
                "departs_from_advice": self.departure}


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
    layout: Layout = Layout()

    def to_json(self) -> dict[str, Any]:
        inputs = asdict(self.inputs)
        inputs["parallel"]["zero"] = self.inputs.parallel.stage  # the stage the text shows (distributed optimizer = 1)
        inputs["model"]["params"] = self.inputs.model.total_params  # the exact count, also for a shaped model
        return {
            "schema": SCHEMA,
            "inputs": inputs,
            "layout": self.layout.to_json(),
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


def framework_advice(params: float) -> str:
    """Which family of frameworks the model size points to, with the public rule it comes from."""
    if params <= 13e9:
        return (f"framework: {params / 1e9:,.3g} B parameters ≤ 13 B → sharded data parallelism (DeepSpeed ZeRO-2/3 "
                f"or PyTorch FSDP) is the simplest fit: {ZERO_RULE}.")
    return (f"framework: {params / 1e9:,.3g} B parameters > 13 B → Megatron-style tensor + pipeline parallelism "
            f"(Megatron-LM / NeMo, or DeepSpeed with ZeRO-1 for the optimizer states): {MEGATRON_RULE}.")


def make_plan(inp: PlanInput, mfu_kind: str = "assumed", sources: tuple[str, ...] = (), layout: Layout = Layout()) -> Plan:
    inp = validate(inp)
    name, capacity, peak = gpu_figures(inp)
    mem = plan_memory(inp, capacity)
    return Plan(
        inputs=inp,
        gpu_name=name,
        memory=mem,
        checkpoint=tuple(checkpoint_quantities(inp)),
        compute=tuple(compute_quantities(inp, peak, mfu_kind)),
        advice=framework_advice(inp.model.total_params),
        warnings=tuple(warnings(inp)),
        mfu_kind=mfu_kind,
        sources=sources,
        layout=layout,
    )
