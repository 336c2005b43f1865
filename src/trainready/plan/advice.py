"""Whether the layout the search chose follows the framework advice printed under the plan, and why not.

The advice (planner.framework_advice) is a size rule: up to ~13 B parameters, sharded data parallelism
without model parallelism (ZeRO, Rajbhandari et al. 2020); above, Megatron's tensor + pipeline
parallelism with the distributed optimizer (ZeRO-1) for the optimizer states (Narayanan et al. 2021 §3).
The search ranks by memory fit and a heuristic cost instead, so its best layout can fall outside the rule
(a 500 B model on 5,120 B200s: ZeRO-2 without pipeline stages).  Then the plan says so, with the reason
and the best layout that does follow the rule, so the reader can plan either.
"""

from __future__ import annotations

from trainready.plan.quantity import percent
from trainready.plan.search import Candidate

SHARDED_DP_LIMIT = 13e9  # parameters: ZeRO's "up to ~13 B without model parallelism" (planner.ZERO_RULE)


def follows(c: Candidate, params: float) -> bool:
    """Up to 13 B: no tensor or pipeline parallelism.  Above: optimizer states sharded by ZeRO-1 / the
    distributed optimizer at most (stage ≤ 1), as Megatron-LM and DeepSpeed's pipeline engine run."""
    if params <= SHARDED_DP_LIMIT:
        return c.tp == 1 and c.pp == 1
    return c.zero <= 1


def flags(c: Candidate, global_batch: int) -> str:
    """The plan flags that give exactly this layout (dp follows from --gpus) at the same global batch."""
    out = [f"--tp {c.tp}", f"--pp {c.pp}", f"--cp {c.cp}", f"--zero {c.zero}", f"--global-batch {global_batch}"]
    out += ["--sp"] if c.sp else []
    out += [f"--micro-batch {c.micro_batch}"] if c.micro_batch != 1 else []
    out += [f"--recompute {c.recompute}"] if c.recompute != "none" else []
    return " ".join(out)


def _how(c: Candidate, params: float) -> str:
    if params <= SHARDED_DP_LIMIT:
        return f"tp {c.tp} × pp {c.pp}: model parallelism, which the ZeRO rule avoids up to 13 B"
    shards = "the gradients and the weights" if c.zero >= 3 else "the gradients"
    fit = "without pipeline parallelism" if c.pp == 1 else f"with pp {c.pp}"
    return (f"ZeRO stage {c.zero} instead of ZeRO-1: it also shards {shards} over dp·cp = {c.dp * c.cp:,} ranks, "
            f"so the model fits {fit} (ZeRO-2 moves the same volume as data parallelism, Rajbhandari et al. 2020 "
            "§7.2.1; ZeRO-2/3 do not combine with pipeline parallelism in DeepSpeed)")


def departure(chosen: Candidate, found: list[Candidate], params: float, global_batch: int) -> str:
    """'' when the chosen layout follows the advice; else one paragraph: how it departs, why the search
    chose it (the rank of --search), and the best layout that follows the advice, with its flags."""
    if follows(chosen, params):
        return ""
    text = (f"the chosen layout departs from this advice — {_how(chosen, params)}; the search chose it as the "
            f"best of those that fit (heuristic cost {chosen.cost:.3f}, headroom {percent(chosen.free)}).")
    best = next(((i, c) for i, c in enumerate(found, 1) if follows(c, params)), None)
    if best is None:
        return text + " No layout that follows the advice fits."
    i, c = best
    tight = " (tight)" if c.verdict == "tight" else ""
    return (text + f" The best layout that follows it is #{i} of --search: tp {c.tp} × pp {c.pp} × cp {c.cp} × "
            f"dp {c.dp:,}, ZeRO stage {c.zero}, cost {c.cost:.3f}, headroom {percent(c.free)}{tight}; "
            f"plan it with {flags(c, global_batch)}.")
