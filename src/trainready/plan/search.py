"""Search the parallel layouts that fit, and rank them.

Enumerates t (divides heads, ≤ GPUs per node: tensor parallelism stays on
NVLink, Narayanan et al. 2021 §3.3 takeaway #1), p (divides layers), d =
G / (t·p·cp), ZeRO stage 0–3 and recompute none/selective/full, keeps the
layouts whose memory verdict is not 'does not fit' and whose global batch
splits into micro-batches (ZeRO-2/3 only without pipeline parallelism; selective
recompute only with classic attention, where it drops the s² terms), and ranks them by a *heuristic* relative step-time
cost (lower is better; not a throughput prediction):

    cost = (1 + recompute extra) · (1 + bubble) · (1 + comm)
    recompute extra: none 0, selective 0.02 (Korthikanti Table 4: 2-4 %), full 0.33 (one extra forward)
    bubble = (p − 1)/m        (1F1B pipeline bubble, Narayanan et al. 2021 §2.2.1)
    comm: 0.02·(t − 1) for tensor-parallel collectives + ZeRO-3 0.5
          (ZeRO-3 moves 1.5× the data of DP, Rajbhandari et al. 2020 §7.2.2)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainready.errors import UsageError
from trainready.plan.inputs import PlanInput, validate
from trainready.plan.memory import plan_memory
from trainready.plan.planner import gpu_figures

RECOMPUTE_EXTRA = {"none": 0.0, "selective": 0.02, "full": 0.33}


@dataclass(frozen=True)
class Candidate:
    tp: int
    pp: int
    dp: int
    zero: int
    recompute: str
    total_bytes: float  # peak + allowance per GPU
    verdict: str
    cost: float  # heuristic, relative

    def to_json(self) -> dict[str, object]:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "zero": self.zero, "recompute": self.recompute,
                "total_bytes": self.total_bytes, "verdict": self.verdict, "cost": round(self.cost, 4)}


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def search(inp: PlanInput, limit: int = 10) -> list[Candidate]:
    """Layouts for the same model, GPU count, micro/global batch and precision that fit, best first."""
    want_sp = inp.parallel.sp  # applied to every candidate with tp > 1
    base = validate(replace(inp, parallel=replace(inp.parallel, sp=inp.parallel.sp and inp.parallel.tp > 1)))
    m, par = base.model, base.parallel
    if not m.has_shape:
        raise UsageError("--search needs a model shape (activations depend on it); give a preset or --layers/--hidden/...")
    _, capacity, _ = gpu_figures(base)
    gpus, cp = par.world, par.cp
    amp = base.training.precision == "amp"
    found: list[Candidate] = []
    for tp in [t for t in _divisors(m.heads) if t <= par.gpus_per_node and (m.kv % t == 0 or t % m.kv == 0)]:
        for pp in _divisors(m.layers):
            if gpus % (tp * pp * cp) or (amp and (tp > 1 or pp > 1)):
                continue
            dp = gpus // (tp * pp * cp)
            if base.training.global_batch % (base.training.micro_batch * dp):
                continue
            # ZeRO-2/3 do not combine with pipeline parallelism (DeepSpeed pipeline docs: ZeRO-1 only);
            # with one shard every stage is the same layout.
            zeros = (0,) if dp * cp == 1 else ((0, 1) if pp > 1 else (0, 1, 2, 3))
            # With flash attention selective recompute saves nothing (no s² scores to drop).
            rcs = ("none", "full") if base.training.attention == "flash" else ("none", "selective", "full")
            for zero in zeros:
                for rc in rcs:
                    cand = replace(base, parallel=replace(par, tp=tp, pp=pp, dp=dp, zero=zero, sp=want_sp and tp > 1),
                                   training=replace(base.training, recompute=rc))
                    mem = plan_memory(cand, capacity)
                    if mem.verdict == "does not fit":
                        continue
                    bubble = (pp - 1) / cand.microbatches
                    comm = 0.02 * (tp - 1) + (0.5 if max(zero, 1 if par.distributed_optimizer else 0) >= 3 else 0.0)
                    cost = (1 + RECOMPUTE_EXTRA[rc]) * (1 + bubble) * (1 + comm)
                    found.append(Candidate(tp, pp, dp, zero, rc, mem.total, mem.verdict, cost))
    found.sort(key=lambda c: (round(c.cost, 6), c.verdict != "fits", c.total_bytes))
    return found[:limit] if limit > 0 else found
