"""`trainready cluster`: the fleet on Slurm — every node accepted, cross-node checks, fleet verdict, drains."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from trainready.commands.common import (JSON_HELP, SPEC_HELP, check_out_path, evidence_outputs, parse_plants, split_names,
                                        write_evidence_outputs, write_json_doc)
from trainready.errors import UsageError
from trainready.records import Level

app = typer.Typer(
    help=(
        "The fleet on Slurm: per-node acceptance as a job array, cross-node checks, fleet verdict, NHC-style "
        "drain and resume (docs/cluster.md).\n\n"
        "Examples:\n\n\b\n"
        "  trainready cluster run -p gpu -N 640 --results /lustre/acc --drain\n"
        "  trainready cluster resume --results /lustre/acc\n"
        "  trainready node --health-check      # Slurm HealthCheckProgram"
    ),
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)

RESULTS_HELP = "Directory on a filesystem every node mounts at the same path: records, logs, ledger, fleet.json."
TIME_HELP = "Slurm time limit of each node's task and of the cross-node step (sbatch --time: M, M:S, H:M:S, D-H:M)."


def _options(results: str, nodes: int | None, nodelist: str | None, partition: str | None, spec: str | None,
             level: Level, only: list[str] | None, skip: list[str] | None, time_limit: str, concurrency: int,
             reference: str | None, drain: bool, image: str | None, mounts: list[str] | None, mount_home: bool,
             plant: list[str] | None, cross: bool = True):  # type: ignore[no-untyped-def]
    from trainready.cluster import faults
    from trainready.cluster.options import Container, FleetOptions, parse_mounts, time_seconds
    from trainready.spec import load_spec

    if nodes is not None and nodelist:
        raise UsageError("--nodes and --nodelist: give one (a count from the partition, or the nodes by name)")
    if nodes is not None and nodes < 1:
        raise UsageError(f"--nodes {nodes}: expected at least 1")
    if concurrency < 1:
        raise UsageError(f"--max-parallel {concurrency}: expected at least 1")
    time_seconds(time_limit)
    load_spec(spec)  # a bad spec is exit 2 here, not N failed tasks
    if mounts and not image:
        raise UsageError("--container-mounts needs --container-image (Pyxis mounts into a container)")
    res = Path(results).expanduser().resolve()
    if not res.parent.is_dir():
        raise UsageError(f"--results {results}: directory {res.parent} does not exist (create it first)")
    planted = parse_plants(plant, "cluster")
    faults.validate(planted)
    return FleetOptions(results=res, nodelist=nodelist, count=nodes, partition=partition, spec=spec, level=level,
                        only=tuple(split_names(only) or ()) or None, skip=tuple(split_names(skip) or ()) or None,
                        time_limit=time_limit, concurrency=concurrency, reference=reference, drain=drain,
                        container=Container(image, parse_mounts(mounts), mount_home) if image else None,
                        plants=planted, cross=cross)


def _finish(verdict, results: Path, json_path: str | None) -> int:  # type: ignore[no-untyped-def]
    from trainready.cluster.fleet import write_verdict
    from trainready.cluster.render import print_verdict

    console = Console(stderr=json_path == "-")
    print_verdict(verdict, console)
    path = write_verdict(verdict, results)
    console.print(f"fleet verdict written to {path}")
    if json_path:
        write_json_doc(verdict.to_json(), json_path, console, "fleet record")
    write_evidence_outputs(verdict.to_json(), path=str(path))
    return verdict.exit_code


@app.command("run")
@evidence_outputs  # --junit, --prometheus of the fleet record
def run_cmd(
    results: str = typer.Option(..., "--results", "-r", help=RESULTS_HELP),
    nodes: int = typer.Option(None, "--nodes", "-N", help="Accept the first N usable nodes of the partition."),
    nodelist: str = typer.Option(None, "--nodelist", "-w", help="Accept these nodes (Slurm hostlist, e.g. gpu[001-640])."),
    partition: str = typer.Option(None, "--partition", "-p", help="Slurm partition (default: the cluster's default)."),
    spec: str = typer.Option(None, "--spec", "-s", help=SPEC_HELP),
    level: Level = typer.Option(Level.STANDARD, "--level", "-l", help="Node checks per node: light (versions + manifest: orchestration tests), quick or standard (all)."),
    only: list[str] = typer.Option(None, "--only", help="Node checks to run on each node (comma-separated)."),
    skip: list[str] = typer.Option(None, "--skip", help="Node checks to leave out."),
    time_limit: str = typer.Option("30:00", "--time", "-t", help=TIME_HELP),
    concurrency: int = typer.Option(64, "--max-parallel", help="Array tasks running at once (sbatch --array=...%K)."),
    reference: str = typer.Option(None, "--reference", help="Node whose versions every node must match (default: "
                                  "the spec's software pins, else the fleet's most common versions)."),
    drain: bool = typer.Option(False, "--drain", help="Drain rejected nodes (reason 'trainready: ...'); never touches "
                               "an administrator's drain. Without it nothing in Slurm changes."),
    image: str = typer.Option(None, "--container-image", help="Run every task inside this image (Pyxis)."),
    mounts: list[str] = typer.Option(None, "--container-mounts", help="Pyxis mounts SRC:DST[:FLAGS] (comma-separated)."),
    mount_home: bool = typer.Option(False, "--container-mount-home", help="Mount $HOME in the container (Pyxis default is on; trainready turns it off)."),
    json_path: str = typer.Option(None, "--json", help=JSON_HELP),
    plant: list[str] = typer.Option(None, "--plant", hidden=True, help="Plant a fault cluster.NAME=NODE[:X] (tests)."),
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
    from trainready.cluster.fleet import run_fleet

    check_out_path(json_path)
    opts = _options(results, nodes, nodelist, partition, spec, level, only, skip, time_limit, concurrency, reference,
                    drain, image, mounts, mount_home, plant)
    console = Console(stderr=True)
    verdict = run_fleet(opts, lambda s: console.print(f"[dim]{s}[/]"))
    raise typer.Exit(_finish(verdict, opts.results, json_path))


@app.command("resume")
@evidence_outputs
def resume_cmd(
    node_names: list[str] = typer.Argument(None, help="Nodes to re-validate (default: every node trainready drained)."),
    results: str = typer.Option(..., "--results", "-r", help=RESULTS_HELP),
    partition: str = typer.Option(None, "--partition", "-p", help="Slurm partition."),
    spec: str = typer.Option(None, "--spec", "-s", help=SPEC_HELP),
    level: Level = typer.Option(Level.STANDARD, "--level", "-l", help="Node checks: light, quick or standard."),
    only: list[str] = typer.Option(None, "--only", help="Node checks to run (comma-separated)."),
    skip: list[str] = typer.Option(None, "--skip", help="Node checks to leave out."),
    time_limit: str = typer.Option("30:00", "--time", "-t", help=TIME_HELP),
    image: str = typer.Option(None, "--container-image", help="Run every task inside this image (Pyxis)."),
    mounts: list[str] = typer.Option(None, "--container-mounts", help="Pyxis mounts SRC:DST[:FLAGS]."),
    json_path: str = typer.Option(None, "--json", help=JSON_HELP),
    plant: list[str] = typer.Option(None, "--plant", hidden=True, help="Plant a fault (tests)."),
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
    from trainready.cluster.fleet import resume_fleet

    check_out_path(json_path)
    names = [n for v in node_names or [] for n in v.split(",") if n.strip()]
    if names:
        from trainready.cluster.slurm import hostnames

        names = [h for n in names for h in hostnames(n)]
    opts = _options(results, None, None, partition, spec, level, only, skip, time_limit, 64, None, False, image,
                    mounts, False, plant)
    console = Console(stderr=True)
    verdict, plan = resume_fleet(opts, names or None, lambda s: console.print(f"[dim]{s}[/]"))
    if verdict is None:
        console.print("nothing to re-validate" + (f" ({len(plan.left)} node(s) left alone)" if plan.left else ""))
        raise typer.Exit(0)
    raise typer.Exit(_finish(verdict, opts.results, json_path))


@app.command("node-task", hidden=True)
def node_task(
    results: str = typer.Option(..., "--results"),
    spec: str = typer.Option(None, "--spec"),
    level: Level = typer.Option(Level.STANDARD, "--level"),
    only: list[str] = typer.Option(None, "--only"),
    skip: list[str] = typer.Option(None, "--skip"),
    image: str = typer.Option(None, "--image"),
    plant: list[str] = typer.Option(None, "--plant"),
) -> None:
    """One node's acceptance inside a Slurm array task (started by `cluster run`)."""
    from trainready.cluster.task import TaskOptions, accept

    o, s = split_names(only), split_names(skip)
    opts = TaskOptions(Path(results), spec, level, tuple(o) if o else None, tuple(s) if s else None,
                       parse_plants(plant, "cluster"), image)
    raise typer.Exit(accept(opts))


@app.command("cross-task", hidden=True)
def cross_task(
    results: str = typer.Option(..., "--results"),
    spec: str = typer.Option(None, "--spec"),
    plant: list[str] = typer.Option(None, "--plant"),
) -> None:
    """One task of the cross-node srun step (started by `cluster run`)."""
    from trainready.cluster.cross import CrossOptions, run

    raise typer.Exit(run(CrossOptions(Path(results), spec, parse_plants(plant, "cluster"))))


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="cluster", short_help="The fleet on Slurm: every node's acceptance as a job array, "
                   "cross-node checks, fleet verdict, drain and resume.")
