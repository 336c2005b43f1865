"""Search the parallel layouts that fit, and rank them.

For the same model, GPU count G, global batch, precision and attention, enumerates

    t   tensor parallel: divides heads, ≤ GPUs per node (TP stays on NVLink: Narayanan et al. 2021 §3.3,
        takeaway #1 — "tensor model parallelism up to degree g for g-GPU servers, then pipeline")
    p   pipeline parallel: divides layers
    cp  context parallel: 1, 2, 4, 8 dividing the sequence
    d   data parallel: G / (t·p·cp)
    sp  sequence parallel on/off (with t > 1)
    b   micro-batch: 1, 2, 4, 8 dividing global / d
    ZeRO stage 0–3 (ZeRO-2/3 only without pipeline parallelism, as DeepSpeed's pipeline engine)
    recompute none / full (and selective with classic attention, where it drops the s² terms)

minus any of sp, cp, b, recompute the caller holds (the user gave it), keeps the layouts whose
memory verdict is not 'does not fit', and ranks them: every layout that fits before any that is tight
(headroom below `hardware.headroom`, 5% by default), then by a *heuristic* relative cost (lower is
better; 1.000 = no recompute, no pipeline bubble, no TP/CP/ZeRO-3 traffic; not a time):

    cost = (1 + recompute extra) · (1 + bubble) · (1 + comm)
    recompute extra: none 0, selective 0.02 (Korthikanti et al. 2022 Table 4: 2-4 %), full 0.33 (a 4th pass of 3)
    bubble = (p − 1)/m, m = global / (b·d) micro-batches (1F1B, Narayanan et al. 2021 §2.2.1)
    comm = 0.02·(t − 1) + 0.02·(cp − 1) + 0.5·[ZeRO-3]
           (0.02 per extra TP/CP rank: our assumption; ZeRO-3 moves 1.5× the data of DP, Rajbhandari
           et al. 2020 §7.2.2).  Sequence parallelism moves the same volume as TP's all-reduce
           (Korthikanti et al. 2022 §4.2.2) and ZeRO-1/2 the same as DP (ZeRO §7.2.1): no extra cost.

Ties go to the layout with more free memory.  A tight layout is listed (it may run) but never
chosen over one that fits, whatever its cost: below the tight line the allocator's fragmentation
on a long run, not the heuristic, decides whether it trains.  Kernel efficiency (larger micro-batches, wider
GEMMs) is not modelled, so the cost never prefers a larger micro-batch.
A count-only model (no shape: no activations) varies the ZeRO stage only.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Iterator

from trainready.plan.inputs import PlanInput, validate
from trainready.plan.memory import plan_memory
from trainready.plan.planner import gpu_figures

RECOMPUTE_EXTRA = {"none": 0.0, "selective": 0.02, "full": 0.33}
COMM_PER_RANK = 0.02  # per extra TP or CP rank (assumption, see above)
ZERO3_COMM = 0.5  # ZeRO-3: 1.5× DP traffic (Rajbhandari et al. 2020 §7.2.2)
SMALL = (1, 2, 4, 8)  # context-parallel degrees and micro-batch sizes tried
HOLDABLE = ("sp", "cp", "micro_batch", "recompute")
COST_NOTE = ("cost: relative heuristic, lower is better, 1.000 = no recompute, no pipeline bubble, no TP/CP/ZeRO-3 "
             "traffic; = (1 + recompute: full 0.33, selective 0.02) × (1 + bubble (pp−1)/m, m = global/(b·dp)) × "
             "(1 + 0.02 per extra tp/cp rank + 0.5 for ZeRO-3); not a step time")


@dataclass(frozen=True)
class Layout:
    """One combination of parallel degrees and memory savers worth a memory estimate."""

    tp: int
    pp: int
    cp: int
    dp: int
    sp: bool
    micro_batch: int
    zero: int
    recompute: str


@dataclass(frozen=True)
class Candidate(Layout):
    """A layout that fits, with its memory and its heuristic cost."""

    total_bytes: float  # peak + allowance per GPU
    free: float  # (capacity − total) / capacity: the headroom, a fraction of GPU memory
    verdict: str
    cost: float  # heuristic, relative

    def to_json(self) -> dict[str, object]:
        return {"tp": self.tp, "pp": self.pp, "cp": self.cp, "dp": self.dp, "sp": self.sp,
                "micro_batch": self.micro_batch, "zero": self.zero, "recompute": self.recompute,
                "total_bytes": self.total_bytes, "headroom": self.free, "verdict": self.verdict,
                "cost": round(self.cost, 4)}

    def apply(self, inp: PlanInput) -> PlanInput:
        """`inp` with this layout (the global batch and everything else unchanged)."""
        return replace(inp, parallel=replace(inp.parallel, tp=self.tp, pp=self.pp, cp=self.cp, dp=self.dp, gpus=0,
                                             sp=self.sp, zero=self.zero),
                       training=replace(inp.training, micro_batch=self.micro_batch, recompute=self.recompute))


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _layouts(base: PlanInput, hold: frozenset[str], want_sp: bool) -> Iterator[Layout]:
    """Every layout worth a memory estimate, in (tp, pp, cp, sp, b, zero, recompute) order; a held sp is
    `want_sp`."""
    m, par, tr = base.model, base.parallel, base.training
    shaped = m.has_shape and tr.precision != "amp"
    tps = ([t for t in _divisors(m.heads) if t <= par.gpus_per_node and (m.kv % t == 0 or t % m.kv == 0)]
           if shaped else [1])
    pps = _divisors(m.layers) if shaped else [1]
    cps = [par.cp] if "cp" in hold or not shaped else [c for c in SMALL if m.seq_len % c == 0]
    rcs = ([tr.recompute] if "recompute" in hold or not m.has_shape else
           ["none", "full"] if tr.attention == "flash" else ["none", "selective", "full"])  # flash: no s² to drop
    for tp, pp, cp in itertools.product(tps, pps, cps):
        if par.world % (tp * pp * cp) == 0:
            yield from _savers(base, hold, want_sp, tp, pp, cp, rcs)


def _savers(base: PlanInput, hold: frozenset[str], want_sp: bool, tp: int, pp: int, cp: int,
            rcs: list[str]) -> Iterator[Layout]:
    """The layouts of one (tp, pp, cp): sequence parallel, micro-batch, ZeRO stage and recompute."""
    par, tr = base.parallel, base.training
    gb, dp = tr.global_batch, par.world // (tp * pp * cp)
    sps = [want_sp and tp > 1] if "sp" in hold else ([False, True] if tp > 1 else [False])
    bs = [b for b in ([tr.micro_batch] if "micro_batch" in hold else SMALL) if gb % (b * dp) == 0]
    # ZeRO-2/3 do not combine with pipeline parallelism (DeepSpeed pipeline docs: ZeRO-1 only);
    # with one shard every stage is the same layout.
    zeros = (0,) if dp * cp == 1 else ((0, 1) if pp > 1 else (0, 1, 2, 3))
    if par.distributed_optimizer:  # stage ≥ 1 already: list each effective stage once
        zeros = tuple(sorted({max(z, 1) for z in zeros}))
    for sp, b, zero, rc in itertools.product(sps, bs, zeros, rcs):
        yield Layout(tp, pp, cp, dp, sp, b, zero, rc)


def search(inp: PlanInput, limit: int = 10, hold: frozenset[str] = frozenset()) -> list[Candidate]:
    """Layouts for the same model, GPU count, global batch and precision that fit, best first.

    `hold`: names from HOLDABLE kept at `inp`'s value instead of searched (what the user gave)."""
    base = validate(replace(inp, parallel=replace(inp.parallel, sp=inp.parallel.sp and inp.parallel.tp > 1)))
    _, capacity, _ = gpu_figures(base)
    dist_opt = base.parallel.distributed_optimizer
    found: list[Candidate] = []
    for lay in _layouts(base, hold, inp.parallel.sp):
        cand = replace(base, parallel=replace(base.parallel, tp=lay.tp, pp=lay.pp, cp=lay.cp, dp=lay.dp,
                                              zero=lay.zero, sp=lay.sp),
                       training=replace(base.training, micro_batch=lay.micro_batch, recompute=lay.recompute))
        mem = plan_memory(cand, capacity)
        if mem.verdict == "does not fit":
            continue
        bubble = (lay.pp - 1) / cand.microbatches
        zero3 = max(lay.zero, 1 if dist_opt else 0) >= 3
        comm = COMM_PER_RANK * (lay.tp - 1 + lay.cp - 1) + (ZERO3_COMM if zero3 else 0.0)
        cost = (1 + RECOMPUTE_EXTRA[lay.recompute]) * (1 + bubble) * (1 + comm)
        found.append(Candidate(lay.tp, lay.pp, lay.cp, lay.dp, lay.sp, lay.micro_batch, lay.zero, lay.recompute,
                               mem.total, 1 - mem.total / capacity, mem.verdict, cost))
    found.sort(key=rank)
    return found[:limit] if limit > 0 else found


def rank(c: Candidate) -> tuple[bool, float, float]:
    """The search's order: every layout that fits before any that is tight (headroom under the tight line:
    one allocator spike from an out-of-memory error), then the lower heuristic cost, then more free memory."""
    return c.verdict != "fits", round(c.cost, 6), c.total_bytes


def choose(inp: PlanInput, hold: frozenset[str] = frozenset()) -> tuple[PlanInput, list[Candidate]]:
    """(the best layout that fits — `inp` itself, validated, when none does —, every layout that fits, best first).

    A sequence-parallel request with tp = 1 means 'with every tp > 1' here, as in `search`."""
    base = validate(replace(inp, parallel=replace(inp.parallel, sp=inp.parallel.sp and inp.parallel.tp > 1)))
    found = search(inp, 0, hold)
    return (found[0].apply(base) if found else base), found
