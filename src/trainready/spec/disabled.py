"""What a valid spec switches off: settings the loader accepts on purpose that leave a check, or part of one,
unable to fail.  `spec check` lists them, and the check they switch off says so in its own result, so a
PASS never hides a judgement the spec turned off:

  resume.rtol >= 1    |a - b| <= atol + rtol x |b| then holds for every a from 0 to (1 + rtol) x b: a
                      parameter, optimizer state, LR or loss reset to zero matches (resume/verdict.py says it,
                      WARN);
  fleet.nofile_min 0  every open-files limit passes (cluster/tasks/crosschecks.py: the limits result is SKIP);
  compare.metrics.NAME.direction = "info"
                      that metric is never judged by `trainready compare` (compare/judge.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainready.spec.model import CompareSpec, NodeSpec

# The largest relative tolerance that still tells a value from zero: at rtol >= 1, |0 - b| <= rtol x |b|.
RTOL_BLIND = 1.0


def tolerance_disables(atol: float, rtol: float) -> str:
    """Why the declared resume tolerance cannot fail a numeric comparison, else ''."""
    if rtol >= RTOL_BLIND:
        return (f"rtol {rtol:g} >= {RTOL_BLIND:g} disables the numeric comparisons (parameters, optimizer state, LR, "
                f"loss): any value from 0 to {1 + rtol:g}x run A's matches, one reset to zero included")
    return ""


def disabled(spec: NodeSpec) -> list[str]:
    """One line per setting of `spec` that switches a judgement off, each naming its key."""
    out = []
    why = tolerance_disables(spec.resume.atol, spec.resume.rtol)
    if why:
        out.append(f"resume: {why} (step, data position and RNG are still compared exactly)")
    if spec.fleet.nofile_min == 0:
        out.append("fleet.nofile_min = 0: every open-files limit passes (cluster.limits is not judged)")
    return out + compare_disabled(spec.compare)


def compare_disabled(table: CompareSpec) -> list[str]:
    """The metrics a [compare] table tells `trainready compare` never to judge."""
    return [f"compare.metrics.{name}.direction = \"info\": `trainready compare` never judges {name}"
            for name, tol in table.metrics.items() if tol.direction == "info"]
