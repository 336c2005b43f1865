"""The planner's inputs: parallel layout, training setup, hardware; validated.

All sizes are in bytes internally; the CLI takes GiB/GB/minutes and says so.
Every impossible combination is a `UsageError` (one line, exit 2) naming the
flag and what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainready.errors import UsageError
from trainready.plan.model import ModelSpec
from trainready.util.strict import doc_field


@dataclass(frozen=True)
class Precision:
    """Bytes per parameter of each model state and how activations are stored."""

    name: str
    weight: int  # bytes/param of the working weights
    grad: int  # bytes/param of the gradients
    optim: int  # K: bytes/param of optimizer state (FP32 master + Adam m, v for mixed precision)
    act: int  # bytes per activation element
    autocast_copy: int  # bytes/param of per-step low-precision copies of matmul weights (torch.autocast)
    ckpt_full: int  # bytes/param in a full checkpoint (weights + master + moments)
    source: str


PRECISIONS: dict[str, Precision] = {
    # ZeRO paper §3.1 (Rajbhandari et al. 2020): fp16/bf16 params 2Ψ + grads 2Ψ + K=12 (fp32 master, momentum,
    # variance) = 16Ψ.  DeepSpeed's own ZeRO docs and estimators use the same 2 + 2 + 12.
    "bf16": Precision("bf16", 2, 2, 12, 2, 0, 14, "ZeRO paper §3.1 / DeepSpeed: 2 + 2 + 12 = 16 bytes/param"),
    # Megatron-LM docs (distrib_optimizer.md): bf16 params, fp32 main grads: 2 + 4 + 12 = 18 bytes/param.
    "bf16-fp32grad": Precision("bf16-fp32grad", 2, 4, 12, 2, 0, 14, "Megatron-LM distrib_optimizer.md: 18 bytes/param"),
    # Plain fp32 training with Adam: weights 4 + grads 4 + m, v 8 = 16 bytes/param, fp32 activations.
    "fp32": Precision("fp32", 4, 4, 8, 4, 0, 12, "fp32 Adam: 4 + 4 + 8 = 16 bytes/param"),
    # fp32 weights under torch.autocast(bf16): states as fp32, plus bf16 copies of matmul weights
    # cached by autocast for the step (torch.amp docs, 'weight cast cache'), bf16 activations.
    "amp": Precision("amp", 4, 4, 8, 2, 2, 12, "torch.autocast: fp32 states 16 bytes/param + 2 bytes/matmul param"),
}

RECOMPUTE = ("none", "selective", "full")
ATTENTION = ("flash", "classic")


@dataclass(frozen=True)
class Parallel:
    tp: int = doc_field(1, "Tensor-parallel degree t.")
    pp: int = doc_field(1, "Pipeline-parallel degree p.")
    cp: int = doc_field(1, "Context-parallel degree (splits the sequence).")
    dp: int = doc_field(0, "Data-parallel degree d; 0 = gpus / (tp·pp·cp).")
    gpus: int = doc_field(0, "World size; 0 = tp·pp·cp·dp.")
    zero: int = doc_field(0, "ZeRO stage 0-3 over the data-parallel group (FSDP full shard = 3, grad-op = 2).")
    sp: bool = doc_field(False, "Megatron sequence parallelism (needs tp > 1).")
    distributed_optimizer: bool = doc_field(False, "Megatron distributed optimizer (= ZeRO-1 accounting).")
    gpus_per_node: int = doc_field(8, "GPUs per server; the search keeps tp within a node.")

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def stage(self) -> int:
        """Effective ZeRO stage (the distributed optimizer shards optimizer states only)."""
        return max(self.zero, 1 if self.distributed_optimizer else 0)

    @property
    def shard(self) -> int:
        """Ranks a ZeRO/distributed-optimizer shard is spread over: dp × cp (Megatron shards over both)."""
        return self.dp * self.cp


@dataclass(frozen=True)
class Training:
    precision: str = doc_field("bf16", f"One of: {', '.join(PRECISIONS)}.")
    micro_batch: int = doc_field(1, "Micro-batch size b (sequences per GPU per forward).")
    global_batch: int = doc_field(0, "Global batch (sequences per step); 0 = micro_batch · dp.")
    recompute: str = doc_field("none", "Activation recomputation: none, selective, full.")
    attention: str = doc_field("flash", "flash (no s² term) or classic (softmax stored, Korthikanti Table 2).")
    tokens: float = doc_field(0.0, "Training tokens D for the compute estimate (0 = skip).")
    mfu: float = doc_field(0.40, "Model FLOPs utilisation assumed for time estimates (0-1).")


@dataclass(frozen=True)
class Hardware:
    gpu: str = doc_field("H100", "GPU name, looked up in trainready.hardware.gpus (H100, H200, B200, ...).")
    gpu_mem_gib: float = doc_field(0.0, "GPU memory in GiB; 0 = from the table.")
    peak_tflops: float = doc_field(0.0, "Dense BF16 peak TFLOP/s per GPU; 0 = from the table.")
    storage_gbps: float = doc_field(10.0, "Sustained aggregate checkpoint write bandwidth, GB/s (10^9 B/s).")
    ckpt_interval_min: float = doc_field(60.0, "Minutes of training between checkpoints.")
    runtime_gib: float = doc_field(2.0, "Allowance per GPU outside PyTorch's allocator (CUDA context, NCCL, cuBLAS), GiB.")
    fragmentation: float = doc_field(0.10, "Allowance for allocator fragmentation, fraction of the allocated peak.")
    headroom: float = doc_field(0.05, "Below this free fraction of GPU memory the verdict is 'tight'.")


@dataclass(frozen=True)
class PlanInput:
    model: ModelSpec = doc_field(default_factory=ModelSpec, doc="The model.")
    parallel: Parallel = doc_field(default_factory=Parallel, doc="Parallel layout.")
    training: Training = doc_field(default_factory=Training, doc="Batch, precision, recompute.")
    hardware: Hardware = doc_field(default_factory=Hardware, doc="GPU and checkpoint storage.")

    @property
    def precision(self) -> Precision:
        return PRECISIONS[self.training.precision]

    @property
    def microbatches(self) -> int:
        """m = global / (b · d): micro-batches per step per pipeline."""
        return self.training.global_batch // (self.training.micro_batch * self.parallel.dp)


def validate(inp: PlanInput) -> PlanInput:
    """Check and complete (dp, gpus, global batch) the inputs; raise one clear line."""
    from dataclasses import replace

    m = inp.model.validate()
    p, t, h = inp.parallel, inp.training, inp.hardware
    for k in ("tp", "pp", "cp", "gpus_per_node"):
        if getattr(p, k) < 1:
            raise UsageError(f"--{k.replace('_', '-')} = {getattr(p, k)}: expected an integer >= 1")
    if p.dp < 0 or p.gpus < 0:
        raise UsageError(f"--dp/--gpus must be >= 0 (got dp={p.dp}, gpus={p.gpus})")
    if p.zero not in (0, 1, 2, 3):
        raise UsageError(f"--zero {p.zero}: expected a ZeRO stage 0, 1, 2 or 3")
    mp = p.tp * p.pp * p.cp
    dp = p.dp
    if dp == 0:
        gpus = p.gpus or mp
        if gpus % mp:
            raise UsageError(f"--gpus {gpus} is not a multiple of tp·pp·cp = {p.tp}·{p.pp}·{p.cp} = {mp}")
        dp = gpus // mp
    if p.gpus and p.gpus != mp * dp:
        raise UsageError(f"--gpus {p.gpus} is not tp·pp·cp·dp = {p.tp}·{p.pp}·{p.cp}·{dp} = {mp * dp}")
    if p.sp and p.tp == 1:
        raise UsageError("--sp (sequence parallel) needs --tp > 1")
    if m.has_shape:
        _check_shape(m, p)
    if t.precision not in PRECISIONS:
        raise UsageError(f"--precision '{t.precision}': expected one of {', '.join(PRECISIONS)}")
    if t.precision == "amp" and (p.tp > 1 or p.pp > 1 or p.cp > 1):
        raise UsageError("--precision amp models a plain PyTorch module: use it with --tp 1 --pp 1 --cp 1")
    if t.recompute not in RECOMPUTE:
        raise UsageError(f"--recompute '{t.recompute}': expected one of {', '.join(RECOMPUTE)}")
    if t.attention not in ATTENTION:
        raise UsageError(f"--attention '{t.attention}': expected one of {', '.join(ATTENTION)}")
    if t.micro_batch < 1:
        raise UsageError(f"--micro-batch {t.micro_batch}: expected an integer >= 1")
    if t.global_batch < 0:
        raise UsageError(f"--global-batch {t.global_batch}: expected an integer > 0 (sequences per step; "
                         f"unset = micro_batch·dp)")
    gb = t.global_batch or t.micro_batch * dp
    if gb % (t.micro_batch * dp):
        raise UsageError(f"--global-batch {gb} is not a multiple of micro_batch·dp = {t.micro_batch}·{dp}")
    if t.tokens < 0 or not 0 < t.mfu <= 1:
        raise UsageError(f"--tokens must be >= 0 and --mfu in (0, 1] (got tokens={t.tokens}, mfu={t.mfu})")
    _check_hardware(h)
    return PlanInput(m, replace(p, dp=dp, gpus=mp * dp), replace(t, global_batch=gb), h)


def _check_shape(m: ModelSpec, p: Parallel) -> None:
    """The parallel degrees against the model's shape: TP divides the heads (and the KV heads, or is divided by
    them), PP the layers, CP the sequence."""
    if m.heads % p.tp:
        raise UsageError(f"--tp {p.tp} must divide the number of heads ({m.heads})")
    if m.kv % p.tp and p.tp % m.kv:
        raise UsageError(f"--tp {p.tp} and kv_heads ({m.kv}) must divide one another")
    if m.layers % p.pp:
        raise UsageError(f"--pp {p.pp} must divide the number of layers ({m.layers})")
    if m.seq_len % p.cp:
        raise UsageError(f"--cp {p.cp} must divide the sequence length ({m.seq_len})")


def _check_hardware(h: Hardware) -> None:
    """Hardware and allowance figures in range."""
    for k in ("gpu_mem_gib", "peak_tflops", "runtime_gib", "fragmentation", "headroom"):
        if getattr(h, k) < 0:
            raise UsageError(f"--{k.replace('_', '-')} = {getattr(h, k)}: expected a number >= 0")
    if not 0 <= h.headroom < 1:
        raise UsageError(f"--headroom {h.headroom:g}: expected a fraction of GPU memory in [0, 1), e.g. 0.05")
    if not 0 <= h.fragmentation <= 1:
        raise UsageError(f"--fragmentation {h.fragmentation:g}: expected a fraction of the allocated peak in [0, 1], "
                         "e.g. 0.10")
    if h.storage_gbps <= 0 or h.ckpt_interval_min <= 0:
        raise UsageError("--storage-gbps and --ckpt-interval-min must be > 0")


def warnings(inp: PlanInput) -> list[str]:
    """Legal but probably unintended inputs, one line each (shown in the output and the JSON)."""
    p = inp.parallel
    out: list[str] = []
    if p.tp > p.gpus_per_node or p.gpus_per_node % p.tp:
        out.append(f"--tp {p.tp} with {p.gpus_per_node} GPUs per node: tensor-parallel groups cross nodes, so their "
                   "all-reduces leave NVLink for the inter-node network (Narayanan et al. 2021 §3.3 keeps t ≤ GPUs "
                   "per node); the memory figures still hold, step times will not")
    return out
