"""What `trainready node` starts before and beside its checks so that none of them waits for an import: the rank
processes' forkserver (it imports torch while this process imports the checks' registry), and the modules an
in-process check would import at its first use (imported while another check runs in rank processes)."""

from __future__ import annotations

from trainready.records import Level

# The checks that run in rank processes (Check.launches_ranks) and their levels, known before the checks'
# registry is imported (it imports torch); tests/test_node_startup.py holds this table to the registry.
RANK_CHECKS = {"fingerprint": Level.QUICK, "allreduce": Level.QUICK, "comm": Level.STANDARD,
               "resume": Level.STANDARD, "burnin": Level.BURN_IN}


def rank_checks(only: list[str] | None, skip: list[str] | None, level: Level) -> list[str]:
    """The RANK_CHECKS that `select(only, skip, level)` will choose."""
    return [n for n, lv in RANK_CHECKS.items()
            if (n in only if only else lv.depth <= level.depth) and not (skip and n in skip)]


def start_forkserver(only: list[str] | None, skip: list[str] | None, level: Level) -> None:
    """Start the rank processes' forkserver now, when checks will launch ranks: it imports torch (and the resume
    ranks' modules) while this process imports torch for the checks' registry and runs the in-process checks, so
    the first launch forks at once instead of waiting for those imports (measured: 6.4 s on a 1x H100 VM)."""
    names = rank_checks(only, skip, level)
    if names:
        from trainready.ranks.forkserver import RESUME_RANKS, warm_up

        warm_up((RESUME_RANKS,) if "resume" in names else ())


# Imported by train_step (in this process) only at its first use, and costly: the first optimizer step imports
# torch._dynamo (torch/_compile.py wraps Optimizer.step): train_step took 9.3 s cold, 1.9 s with it imported
# before (1x H100 VM, docs/measurements.md).
IN_PROCESS_LATER = ("torch._dynamo",)


def import_behind(modules: tuple[str, ...]) -> None:
    """Import `modules` on a daemon thread while a check runs in rank processes (this process waits on them:
    imported beside the in-process checks instead, it slowed them by 4.6 s); torch is already imported here
    (the checks' registry), so the thread only adds to it.  An import that fails here fails again, and is
    reported, where the check imports it."""
    import importlib
    import threading

    def work() -> None:
        for m in modules:
            try:
                importlib.import_module(m)
            except Exception:  # noqa: BLE001 - the check's own import reports it
                return

    threading.Thread(target=work, name="trainready-import", daemon=True).start()
