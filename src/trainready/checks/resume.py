"""Question 4: does training resume?  The resume-equivalence protocol, short default.

A runs 0→100, B runs 0→50 and saves, a fresh C loads 50 and runs to 100; C must
equal A bitwise (CPU; GPU in deterministic mode) in every parameter, optimizer
state, step, LR, data position, RNG state and per-step loss.
See `trainready resume` for the standalone command and docs/resume.md.
"""

from __future__ import annotations

import dataclasses

from trainready.errors import GpuUnusable, UsageError
from trainready.records import Level, Outcome
from trainready.resume.protocol import run_protocol
from trainready.resume.setup import prepare
from trainready.spec.model import NodeSpec
from trainready.suite.base import Check, CheckContext, register


@register
class ResumeCheck(Check):
    name = "resume"
    launches_ranks = True
    title = "Training resumes from a checkpoint exactly (A vs B+C)"
    level = Level.STANDARD
    order = 40
    timeout_s = 1200.0  # three runs of up to 300 s each, plus start-up

    def run(self, ctx: CheckContext) -> Outcome:
        opts = ctx.options
        pc = opts.protocol or prepare(ctx.spec.resume, opts.resume, ctx.faults, ctx.workdir / "resume", ctx.spec)
        out = run_protocol(pc, ctx.progress)
        # `trainready resume` runs on the ranks it was given; `trainready node` says when they differ.
        note = "" if opts.resume.standalone else ranks_note(ctx.spec, pc.world_size, pc.backend)
        return dataclasses.replace(out, message=out.message + note) if note else out


def ranks_note(spec: NodeSpec, world: int, backend: str) -> str:
    """Said in the result when resume ran on fewer/other ranks than the node's collective checks."""
    from trainready.devices.world import local_world

    try:
        others, be = local_world(spec)
    except (UsageError, GpuUnusable):  # not these ranks' business: the collective checks say it themselves
        return ""
    if (others, be) == (world, backend):
        return ""
    return (f" [resume ran on {world} {backend} rank{'s' if world > 1 else ''} (spec resume.ranks), not on the "
            f"{others} {be} ranks of the collective checks; set [resume] ranks = {others} to run it there]")
