"""The process entry point (`trainready`, `python -m trainready`).

Signals are caught from the first instruction (util/signals.py), so an interrupt while modules
load (torch takes seconds) is the same one line; then the command line (cli.py) runs.
"""

from __future__ import annotations

import sys

from trainready.errors import Interrupted, missing_dependency
from trainready.util.signals import exit_after_interrupt, handled, interrupts_raise


def run_main(argv: list[str] | None = None) -> None:
    """The process entry point (`trainready`, `python -m trainready`): signals are caught from the
    first instruction, so an interrupt while modules load (torch takes seconds) is the same one line."""
    with interrupts_raise():
        try:
            from trainready.healthfast import run as health_fast

            code = health_fast(sys.argv[1:] if argv is None else argv)  # Slurm's HealthCheckProgram: its start-up
            if code is not None:
                sys.exit(code)
            try:
                from trainready.cli import main
            except ModuleNotFoundError as exc:  # a checkout run with PYTHONPATH=src on a host without the deps
                line = missing_dependency(exc)
                if line is None:
                    raise
                sys.stderr.write(line + "\n")
                sys.exit(2)
            main(argv)
        except Interrupted as exc:  # only while loading: cli.main handles the rest itself
            handled()
            exit_after_interrupt(f"trainready: interrupted ({exc.signame}) during start-up", exc.exit_code)
