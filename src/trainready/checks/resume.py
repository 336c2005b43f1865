"""Question 4: does training resume?  The resume-equivalence protocol, short default.

A runs 0→100, B runs 0→50 and saves, a fresh C loads 50 and runs to 100; C must
equal A bitwise (CPU; GPU in deterministic mode) in every parameter, optimizer
state, step, LR, data position, RNG state and per-step loss.
See `trainready resume` for the standalone command and docs/resume.md.
"""

from __future__ import annotations

from trainready.checks.base import Check, CheckContext, register
from trainready.records import Level, Outcome
from trainready.resume.protocol import run_protocol
from trainready.resume.setup import prepare


@register
class ResumeCheck(Check):
    name = "resume"
    title = "Training resumes from a checkpoint exactly (A vs B+C)"
    level = Level.STANDARD
    order = 40
    timeout_s = 1200.0  # three runs of up to 300 s each, plus start-up

    def run(self, ctx: CheckContext) -> Outcome:
        faults = {k: v for k, v in ctx.faults.items() if k.startswith("resume.")}
        pc = prepare(ctx.spec.resume, ctx.options.get("resume", {}), faults, ctx.workdir / "resume", ctx.spec)
        progress = ctx.options.get("resume.progress")
        return run_protocol(pc, progress if callable(progress) else None)
