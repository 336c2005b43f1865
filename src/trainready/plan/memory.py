"""Memory per GPU: model states (weights, gradients, optimizer) under ZeRO /
FSDP / the distributed optimizer, activations, and the allowance; verdict.

Model-state accounting, Rajbhandari et al. 2020 (ZeRO), §5.1 / Figure 1, with
Ψ parameters per model-parallel rank, N_d data-parallel ranks and bytes per
parameter w (weights), g (gradients), K (optimizer: FP32 master + Adam m, v):

    stage 0 (DDP)          (w + g + K)·Ψ              ZeRO: 2Ψ + 2Ψ + 12Ψ = 16Ψ
    stage 1 (P_os)         (w + g)·Ψ + K·Ψ/N_d
    stage 2 (P_os+g)       w·Ψ + (g + K)·Ψ/N_d
    stage 3 (P_os+g+p)     (w + g + K)·Ψ/N_d

The default precision 'bf16' uses the ZeRO/DeepSpeed figure 2 + 2 + 12 = 16
bytes/param; 'bf16-fp32grad' uses Megatron-LM's 18 (fp32 main grads).
Ψ per GPU = parameters of the largest pipeline stage / t.

Megatron's distributed optimizer (Megatron-LM docs/source/api-guide/
dist_optimizer.md, bytes/param with d data-parallel ranks): 16-bit params +
16-bit grads 4 + 16/d, bf16 params + fp32 grads 6 + 12/d, fp32 8 + 8/d.  The
16/d is the fp32 master weights 4 + Adam m, v 8 + an fp32 *main-grad* shard 4
(the optimizer steps on fp32 grads; the docs' "fp16 grads, 20 non-distributed"
row): a separate line `memory.main_grad_shard` for precision bf16.

AdamW also keeps a `step` counter per parameter *tensor* (torch.optim.AdamW:
a 0-dim fp32 tensor, on the CPU by default, on the GPU when capturable or
fused): 4 B × tensors, line `memory.optimizer_step`; an upper bound for
optimizers that step flat shards (DeepSpeed ZeRO, Megatron's distributed
optimizer keep one per shard/group).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainready.plan.activations import activation_quantities
from trainready.plan.inputs import PlanInput
from trainready.plan.quantity import GIB, Quantity

ZERO = "Rajbhandari et al. 2020 (ZeRO) §5.1"
MEGATRON_DO = "Megatron-LM docs/source/api-guide/dist_optimizer.md"
# The lines that add up to the allocated peak (per_layer is already inside activations.layers).
ADDITIVE = ("memory.weights", "memory.grads", "memory.optimizer", "memory.main_grad_shard", "memory.optimizer_step",
            "memory.autocast_copies", "memory.zero3_gather",
            "activations.layers", "activations.extra", "activations.transient")


@dataclass(frozen=True)
class MemoryPlan:
    items: tuple[Quantity, ...]  # every line, states first
    peak: float  # bytes PyTorch's allocator holds at the peak (compare with max_memory_allocated)
    total: float  # peak + allowance, bytes
    capacity: float  # GPU memory, bytes
    verdict: str  # "fits" | "tight" | "does not fit"
    has_activations: bool

    @property
    def headroom(self) -> float:
        return self.capacity - self.total

    def get(self, key: str) -> float:
        return next(q.value for q in self.items if q.key == key)


def params_per_gpu(inp: PlanInput) -> float:
    """Ψ: parameters one model-parallel rank holds (largest pipeline stage, split by t)."""
    n = inp.model.stage_params(inp.parallel.pp)
    return n if inp.parallel.tp == 1 else n / inp.parallel.tp


def linear_params_per_gpu(inp: PlanInput) -> float:
    """Weights of the Linear layers, which autocast copies to bf16 and autograd keeps until backward.

    (Bias copies live only in autocast's cache and are gone once the forward leaves the autocast context.)
    """
    m, p = inp.model, inp.parallel
    if not m.has_shape:
        return params_per_gpu(inp)
    head = 0 if m.tied_embeddings else m.vocab * m.hidden
    return (m.layers // p.pp * m.matmul_layer_params() + head) / p.tp


def state_quantities(inp: PlanInput) -> list[Quantity]:
    pr, par = inp.precision, inp.parallel
    psi, st, d = params_per_gpu(inp), par.stage, par.shard
    w = pr.weight * psi / (d if st >= 3 else 1)
    g = pr.grad * psi / (d if st >= 2 else 1)
    o = pr.optim * psi / (d if st >= 1 else 1)
    how = {0: "(w+g+K)Ψ", 1: "(w+g)Ψ + KΨ/N_d", 2: "wΨ + (g+K)Ψ/N_d", 3: "(w+g+K)Ψ/N_d"}[st]
    src = f"{ZERO}; {pr.source}"
    nd = f"N_d = dp·cp = {d}"
    out = [
        Quantity("memory.params_per_gpu", "Ψ parameters per model-parallel rank", psi, "params",
                 "params(largest pipeline stage) / t", "exact count from the shape (plan/model.py)"),
        Quantity("memory.weights", f"weights ({pr.weight} B/param)", w, "B",
                 f"w·Ψ{'/N_d' if st >= 3 else ''}, w = {pr.weight}, {nd}", src),
        Quantity("memory.grads", f"gradients ({pr.grad} B/param)", g, "B",
                 f"g·Ψ{'/N_d' if st >= 2 else ''}, g = {pr.grad}", src),
        Quantity("memory.optimizer", f"optimizer states (K = {pr.optim} B/param)", o, "B",
                 f"K·Ψ{'/N_d' if st >= 1 else ''}, K = {pr.optim}; stage {st}: {how}", src),
    ]
    if par.distributed_optimizer and pr.grad == 2:
        out.append(Quantity("memory.main_grad_shard", "fp32 main-grad shard (distributed optimizer)", 4 * psi / d, "B",
                            f"4·Ψ/N_d: with w + g + K/N_d = {pr.weight} + {pr.grad} + (12 + 4)/d",
                            MEGATRON_DO + ": 16-bit grads 4 + 16/d"))
    n_tensors = inp.model.stage_tensors(par.pp)
    if n_tensors:
        out.append(Quantity("memory.optimizer_step", f"AdamW step counters ({n_tensors:,} tensors × 4 B)",
                            4.0 * n_tensors, "B", "4 B × parameter tensors of the stage",
                            "torch.optim.AdamW state['step']: 0-dim fp32 per tensor (CPU unless capturable/fused)"))
    if pr.autocast_copy:
        out.append(Quantity("memory.autocast_copies", "bf16 copies of Linear weights (autocast)",
                            pr.autocast_copy * linear_params_per_gpu(inp), "B",
                            "2 · Linear weights", "torch.amp autocast: bf16 weight casts saved for backward"))
    if st >= 3 and inp.model.has_shape:  # gathered full layers while computing (current + prefetched)
        out.append(Quantity("memory.zero3_gather", "ZeRO-3 gathered layers (current + prefetch)",
                            2 * pr.weight * inp.model.layer_params() / par.tp, "B", "2 · w · layer params / t",
                            "assumption: DeepSpeed/FSDP gather one layer ahead"))
    return out


def plan_memory(inp: PlanInput, capacity_bytes: float) -> MemoryPlan:
    items = state_quantities(inp) + activation_quantities(inp)
    peak = sum(q.value for q in items if q.key in ADDITIVE)
    hw = inp.hardware
    allowance = hw.fragmentation * peak + hw.runtime_gib * GIB
    items.append(Quantity("memory.allocated_peak", "allocated peak (PyTorch allocator)", peak, "B",
                          "weights + grads + optimizer (+ main-grad shard, step counters) + activations + transient",
                          "sum of the lines above; compare with torch.cuda.max_memory_allocated"))
    items.append(Quantity("memory.allowance", "allowance: fragmentation + runtime", allowance, "B",
                          f"{hw.fragmentation:g} · peak + {hw.runtime_gib:g} GiB",
                          "assumption: caching-allocator fragmentation and CUDA context/NCCL/cuBLAS buffers; "
                          "set with --fragmentation / --runtime-gib"))
    total = peak + allowance
    items.append(Quantity("memory.total", "total per GPU", total, "B", "peak + allowance", ""))
    items.append(Quantity("memory.capacity", "GPU memory", capacity_bytes, "B", "", "GPU table or --gpu-mem-gib"))
    free = (capacity_bytes - total) / capacity_bytes if capacity_bytes else -1.0
    verdict = "does not fit" if free < 0 else ("tight" if free < hw.headroom else "fits")
    items.append(Quantity("memory.headroom", "headroom (free share of GPU memory)", free, "1", "(capacity − total) / capacity",
                          f"'tight' below {hw.headroom:.0%}"))
    return MemoryPlan(tuple(items), peak, total, capacity_bytes, verdict, inp.model.has_shape)
