"""Checkpoint compatibility across environments (images, torch versions): the two checks.

Run by `trainready resume --save-only DIR` (old environment) and `--load-from DIR` (new one);
not part of `trainready node`, so not registered.  The logic is resume/compat.py's.
"""

from __future__ import annotations

from trainready.errors import UsageError
from trainready.records import Level, Outcome
from trainready.resume.options import CompatOptions
from trainready.suite.base import Check, CheckContext


def _compat(ctx: CheckContext) -> CompatOptions:
    if ctx.options.compat is None:  # a command that runs these checks always says where
        raise UsageError("checkpoint compatibility: no --save-only/--load-from directory given")
    return ctx.options.compat


class CompatSaveCheck(Check):
    name = "ckpt_compat_save"
    title = "Checkpoint + reference continuation for another environment"
    level = Level.STANDARD
    timeout_s = 900.0

    def run(self, ctx: CheckContext) -> Outcome:
        from trainready.resume.compat import planted, save_only

        return save_only(ctx.spec, _compat(ctx), planted(ctx.faults))


class CompatLoadCheck(Check):
    name = "ckpt_compat"
    title = "Another environment's checkpoint loads and continues here"
    level = Level.STANDARD
    timeout_s = 900.0

    def run(self, ctx: CheckContext) -> Outcome:
        from trainready.resume.compat import load_from

        return load_from(_compat(ctx))
