"""`trainready cluster`: the fleet on Slurm.  Each module of this package adds its commands to the group in
`register` below, in the order `--help` lists them: run.py (run, attach, resume, and the tasks they start),
sweep.py (sweep), pairs.py (pairs), rollout.py
(rollout).  options.py holds the Slurm options they share, attach.py the waiting
on a controller, pairs_search.py the pairs search's driver."""

from __future__ import annotations

import typer

from trainready.commands.cluster import pairs, rollout, run, sweep


def register(root: typer.Typer) -> None:
    """Build the `cluster` group and add it to the root command."""
    app = typer.Typer(
        help=(
            "The fleet on Slurm: per-node acceptance as a job array, cross-node checks, fleet verdict, NHC-style "
            "drain and resume (docs/cluster.md).\n\n"
            "Examples:\n\n\b\n"
            "  trainready cluster run -p gpu -N 640 --results /lustre/acc --drain\n"
            "  trainready cluster resume --results /lustre/acc\n"
            "  trainready cluster sweep -p sweep --results /lustre/sweep --drain\n"
            "  trainready node --health-check      # Slurm HealthCheckProgram"
        ),
        no_args_is_help=True,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    for module in (run, sweep, pairs, rollout):
        module.register(app)
    root.add_typer(app, name="cluster", short_help="The fleet on Slurm: every node's acceptance as a job array, "
                   "cross-node checks, fleet verdict, drain and resume.")
