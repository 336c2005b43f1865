"""`trainready cluster rollout`: a new image or driver reaches the fleet wave by wave (cluster/rollout.py).

Registered on the `cluster` group by commands/cluster/__init__.py; its Slurm options are those of commands/cluster/options.py."""

from __future__ import annotations

import typer
from rich.console import Console

from trainready.cluster.options import FleetOptions
from trainready.commands.cluster.attach import patient, wait_option
from trainready.commands.cluster.options import CHECKS, JOB, NODES, VERDICT, fleet_options
from trainready.commands.common import JSON_HELP, check_out_path, write_json_doc
from trainready.errors import UsageError


@fleet_options(JOB, NODES, CHECKS, VERDICT)
def rollout_cmd(
    fleet: FleetOptions,
    waves: str = typer.Option("1,8,64,all", "--waves", help="Wave sizes in order; the first wave is the canary; 'all' = the rest."),
    max_reject: float = typer.Option(0.0, "--max-reject", help="Stop when a wave rejects more than this fraction of its nodes (0-1)."),
    revalidate: bool = typer.Option(False, "--revalidate", help="First re-run acceptance on nodes trainready drained; "
                                    "resume those that pass."),
    json_path: str = typer.Option(None, "--json", help=JSON_HELP),
    controller_wait: float = wait_option(),
) -> None:
    """Accept a new image or driver wave by wave: canary first, then growing waves, never all at once.

    Each wave is `cluster run` over its nodes (RESULTS/waves/wave-K/); later waves also reject drift
    from the canary's versions.  A wave whose rejected fraction exceeds --max-reject stops the rollout
    with the reasons.  The ledger RESULTS/rollout.json makes it resumable: run the same command again
    and finished waves are not redone.  Exit 0 every wave done, 1 stopped, 2 usage.

    Examples:

    \b
      trainready cluster rollout -p gpu --waves 1,8,64,all \\
          --max-reject 0.05 --drain --results /lustre/rollout/25.03 \\
          --container-image nvcr.io#nvidia/pytorch:25.03-py3
      trainready cluster rollout -w node[1-3] --waves 1,2,all \\
          --max-reject 0.4 --results /tmp/roll --spec example:local-slurm
    """
    from trainready.cluster.rollout import RolloutOptions, parse_waves, run_rollout
    from trainready.cluster.steps import select_nodes

    check_out_path(json_path)
    if not 0 <= max_reject <= 1:
        raise UsageError(f"--max-reject {max_reject}: expected a fraction 0 <= R <= 1")
    sizes = parse_waves(waves)
    console = Console(stderr=True)
    say = lambda s: console.print(f"[dim]{s}[/]", highlight=False)  # noqa: E731
    with patient(controller_wait, say):
        doc = run_rollout(RolloutOptions(fleet, sizes, max_reject, revalidate), list(select_nodes(fleet).order), say)
    print_rollout(doc, Console(stderr=json_path == "-"))
    if json_path:
        write_json_doc(doc, json_path, console, "rollout ledger")
    raise typer.Exit(0 if doc["status"] == "done" else 1)


def print_rollout(doc: dict, console: Console) -> None:
    from rich.table import Table

    t = Table(title=f"cluster rollout: {doc['status']}")
    for col in ("wave", "nodes", "state", "accepted", "rejected (reason)"):
        t.add_column(col, overflow="fold")
    for w in doc["waves"]:
        rej = "; ".join(f"{n}: {r[0] if r else '?'}" for n, r in (w.get("rejected") or {}).items())
        t.add_row(str(w["index"]) + (" (canary)" if w["index"] == 1 else ""), ", ".join(w["nodes"][:6]) +
                  (" ..." if len(w["nodes"]) > 6 else ""), w["state"], str(len(w.get("accepted") or [])), rej)
    console.print(t)
    if doc.get("stopped_reason"):
        console.print(f"stopped: {doc['stopped_reason']}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add rollout to the `cluster` group."""
    app.command("rollout")(rollout_cmd)
