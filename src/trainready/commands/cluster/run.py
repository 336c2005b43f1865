"""`trainready cluster run`, `attach` and `resume`: every node accepted, cross-node checks, fleet verdict, drains;
and the hidden node and cross-node tasks those runs start on the nodes."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from trainready.cluster.options import FleetOptions
from trainready.commands.cluster import attach as ca
from trainready.commands.cluster.attach import attach_option, wait_option
from trainready.commands.cluster.options import CHECKS, JOB, NODES, VERDICT, fleet_options
from trainready.commands.common import (JSON_HELP, check_out_path, evidence_outputs, parse_plants, split_names,
                                        write_evidence_outputs, write_json_doc)
from trainready.records import Level


def _finish(verdict, results: Path, json_path: str | None) -> int:  # type: ignore[no-untyped-def]
    from trainready.cluster.fleet import write_verdict
    from trainready.cluster.judge.render import print_verdict

    console = Console(stderr=json_path == "-")
    print_verdict(verdict, console)
    path = write_verdict(verdict, results)
    console.print(f"fleet verdict written to {Path(verdict.context['run']) / 'fleet.json'} (latest, with the "
                  f"earlier runs: {path})", highlight=False)
    if json_path:
        write_json_doc(verdict.to_json(), json_path, console, "fleet record")
    write_evidence_outputs(verdict.to_json(), path=str(path))
    return verdict.exit_code


@evidence_outputs  # --junit, --prometheus of the fleet record
@fleet_options(JOB, NODES, CHECKS, VERDICT)
def run_cmd(
    fleet: FleetOptions,
    json_path: str = typer.Option(None, "--json", help=JSON_HELP),
    attach: bool = attach_option(),
    detach: bool = typer.Option(False, "--detach", help="Submit the run, print its id and return; `cluster "
                                "attach` collects it later."),
    controller_wait: float = wait_option(),
) -> None:
    """Accept a fleet: every node's acceptance as a Slurm job array, cross-node checks, fleet verdict.

    Each node runs `trainready node` (at --level) as its own array task, pinned to it, and writes
    RESULTS/nodes/NODE.json; a node that dies, hangs or never starts is "no result" with Slurm's reason.
    Then one srun step over the nodes checks clocks, shared storage, ulimit -n, /etc/hosts and a
    multi-node all_reduce.  A node is rejected for a failed check, no result, drift from the reference,
    a slow GPU (below both fleet.slow_fraction x median and median - k x 1.4826 x MAD), or a cross-node
    failure.  Exit 0 all accepted, 1 any rejected, 2 usage or Slurm error, 3 a run with --plant (a test).

    Examples:

    \b
      trainready cluster run -p gpu -N 640 --results /lustre/acc/$(date +%F) \\
        --spec h200.toml --container-image nvcr.io#nvidia/pytorch:25.01-py3 \\
        --drain
      trainready cluster run -w gpu[001-008] --results /shared/acc \\
        --reference gpu001
      # the local test cluster (scripts/local-slurm.sh up):
      trainready cluster run -N 3 --results /tmp/acc --spec example:local-slurm \\
        --level quick --time 5:00
    """
    from trainready.cluster.fleet import attach_command, run_fleet
    from trainready.errors import UsageError

    check_out_path(json_path)
    console = Console(stderr=True)
    say = lambda s: console.print(f"[dim]{s}[/]", highlight=False)  # noqa: E731
    if attach and detach:
        raise UsageError("--attach and --detach: choose one")
    if attach:
        raise typer.Exit(ca.attach(fleet.results, None, controller_wait, say,
                                   lambda v, r: _finish(v, r, json_path)))
    with ca.patient(controller_wait, say):
        if detach:
            run_dir = ca.detach(fleet, say)
            print(run_dir.name)
            console.print(f"detached; collect it with: {attach_command(run_dir)}", highlight=False)
            raise typer.Exit(0)
        verdict = run_fleet(fleet, say)
    raise typer.Exit(_finish(verdict, fleet.results, json_path))


def attach_cmd(
    results: str = typer.Option(..., "--results", "-r", help="The --results of the run."),
    run_id: str = typer.Argument(None, help="RESULTS/runs/RUN_ID (default: the newest unfinished run); `pairs`: "
                                 "the `cluster pairs` search under RESULTS."),
    json_path: str = typer.Option(None, "--json", help=JSON_HELP),
    controller_wait: float = wait_option(),
) -> None:
    """Pick up a run in flight or finished: wait for its tasks, collect the records, run the cross-node step
    if it has not run, write the verdict.  Nothing is submitted again: a node with a record from the run
    is never run twice.  A finished run: its verdict file and exit code.  Exit codes as `cluster run`.
    `cluster resume`'s runs too (their nodes resumed or drained again, the reservation deleted), and with
    RUN_ID `pairs` the `cluster pairs` search at the round it reached.

    Examples:

    \b
      trainready cluster attach --results /lustre/acc
      trainready cluster attach --results /lustre/acc 20261203T210512Z-run
      trainready cluster attach --results /lustre/acc pairs
    """
    check_out_path(json_path)
    console = Console(stderr=True)
    if run_id == "pairs":  # `cluster pairs`' search (RESULTS/pairs/state.json), as `cluster pairs --attach`
        from trainready.commands.cluster.pairs_search import attach_pairs

        raise typer.Exit(attach_pairs(Path(results).resolve(), controller_wait, json_path, console))
    raise typer.Exit(ca.attach(Path(results).resolve(), run_id, controller_wait,
                               lambda s: console.print(f"[dim]{s}[/]", highlight=False),
                               lambda v, r: _finish(v, r, json_path)))


@evidence_outputs
@fleet_options(JOB, CHECKS)
def resume_cmd(
    fleet: FleetOptions,
    node_names: list[str] = typer.Argument(None, help="Nodes to re-validate (default: every node trainready drained)."),
    json_path: str = typer.Option(None, "--json", help=JSON_HELP),
    controller_wait: float = wait_option(),
) -> None:
    """Return nodes trainready drained to service, once they pass acceptance again.

    Only a node whose drain reason starts with 'trainready:' is touched; an administrator's drain (any
    other reason) is never undone nor overwritten.  The node is reserved, resumed, accepted inside the
    reservation, and drained again if it still fails.  Exit 0 all resumed, 1 any still failing.

    Examples:

    \b
      trainready cluster resume --results /shared/acc  # all trainready drained
      trainready cluster resume gpu017 gpu233 --results /shared/acc \\
        --spec h200.toml
    """
    from trainready.cluster.revalidate import resume_fleet

    check_out_path(json_path)
    names = [n for v in node_names or [] for n in v.split(",") if n.strip()]
    if names:
        from trainready.cluster.control.slurm import hostnames

        names = [h for n in names for h in hostnames(n)]
    console = Console(stderr=True)
    say = lambda s: console.print(f"[dim]{s}[/]", highlight=False)  # noqa: E731
    with ca.patient(controller_wait, say):
        verdict, plan = resume_fleet(fleet, names or None, say)
    if verdict is None:
        console.print("nothing to re-validate" + (f" ({len(plan.left)} node(s) left alone)" if plan.left else ""))
        raise typer.Exit(0)
    raise typer.Exit(_finish(verdict, fleet.results, json_path))


def node_task(
    results: str = typer.Option(..., "--results"),
    spec: str = typer.Option(None, "--spec"),
    level: Level = typer.Option(Level.STANDARD, "--level"),
    only: list[str] = typer.Option(None, "--only"),
    skip: list[str] = typer.Option(None, "--skip"),
    image: str = typer.Option(None, "--image"),
    plant: list[str] = typer.Option(None, "--plant"),
    duration: str = typer.Option(None, "--duration"),
) -> None:
    """One node's acceptance inside a Slurm array task (started by `cluster run`)."""
    from trainready.burnin import parse_duration
    from trainready.cluster.tasks.node import TaskOptions, accept

    o, s = split_names(only), split_names(skip)
    opts = TaskOptions(Path(results), spec, level, tuple(o) if o else None, tuple(s) if s else None,
                       parse_plants(plant, "cluster"), image, parse_duration(duration) if duration else None)
    raise typer.Exit(accept(opts))


def cross_task(
    results: str = typer.Option(..., "--results"),
    spec: str = typer.Option(None, "--spec"),
    plant: list[str] = typer.Option(None, "--plant"),
    collective: bool = typer.Option(True, "--collective/--no-collective"),
) -> None:
    """One task of the cross-node srun step (started by `cluster run`)."""
    from trainready.cluster.tasks.cross import CrossOptions, run

    raise typer.Exit(run(CrossOptions(Path(results), spec, parse_plants(plant, "cluster"), collective)))


def register(app: typer.Typer) -> None:
    """Add run, attach, resume and the node and cross-node tasks to the `cluster` group."""
    app.command("run")(run_cmd)
    app.command("attach")(attach_cmd)
    app.command("resume")(resume_cmd)
    app.command("node-task", hidden=True)(node_task)
    app.command("cross-task", hidden=True)(cross_task)
