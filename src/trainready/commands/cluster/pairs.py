"""`trainready cluster pairs`: which node is slow, from rounds of disjoint node pairs (cluster/pairs/search.py).

Registered on the `cluster` group by commands/cluster/__init__.py; its Slurm options are those of commands/cluster/options.py."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from trainready.cluster.options import FleetOptions
from trainready.commands.cluster.attach import attach_option, wait_option
from trainready.commands.cluster.options import JOB, NODES, TOPOLOGY, fleet_options
from trainready.commands.cluster.pairs_search import attach_pairs, search
from trainready.commands.common import JSON_HELP, check_out_path, parse_plants
from trainready.errors import UsageError

if TYPE_CHECKING:
    from trainready.cluster.pairs.search import PairsOptions

# Default pair floors (x the reference busbw): NCCL pairs of healthy nodes vary ~5% (nccl-tests repeats), so 0.9
# catches a node 10% slow; gloo over a shared host's cores varied 0.19-0.56 GB/s between identical pairs on a
# 2-core x86 VM.
GPU_FLOOR, CPU_FLOOR = 0.9, 0.25


@fleet_options(JOB, NODES, TOPOLOGY, time_limit="10:00")  # a pair's step: one all_reduce sweep, not a node's acceptance
def pairs_cmd(
    fleet: FleetOptions,
    floor_fraction: float = typer.Option(None, "--floor-fraction", help="A pair passes at >= this x the reference busbw. "
                                         "Default 0.9 on GPUs (healthy pairs vary ~5%; a node 10% slow fails), 0.25 on "
                                         "CPU nodes (gloo over shared cores: identical pairs differed ~3x on a 2-core "
                                         "x86 VM)."),
    expected: float = typer.Option(None, "--expected-gbps", help="Reference pair busbw in GB/s (default: the spec's "
                                   "fleet.expected_busbw_gbps all_reduce, else the median of the upper half of the "
                                   "nodes' best pairs, measured)."),
    confirm: int = typer.Option(2, "--confirm", help="Failures against distinct proven-good partners that name a node."),
    max_rounds: int = typer.Option(8, "--max-rounds", help="Give up after this many rounds (the rest: undecided)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the round-1 random matching (same seed, same pairs)."),
    fabric: bool = typer.Option(False, "--fabric", help="NIC to NIC instead of the all_reduce: perftest's ib_write_bw "
                                "rail by rail (NIC i to NIC i), each rail held to --floor-fraction (default: the spec's "
                                "fabric.rail_fraction, 0.8) x the port's rate; names the slow NIC and node. A node "
                                "without perftest or an RDMA port is 'not tested (why)', never a pass."),
    json_path: str = typer.Option(None, "--json", help=JSON_HELP),
    attach: bool = attach_option(),
    controller_wait: float = wait_option(),
) -> None:
    """Name the slow nodes: all_reduce busbw in rounds of disjoint node pairs, each pair its own Slurm step.

    Round 1 pairs every node at random; a pair below the floor makes both nodes suspects; each later
    round re-pairs every suspect with a node already proven good, so the slow node fails again and its
    partner is cleared.  Two failures against distinct good partners name a node; a result that flips,
    or a suspect with no good partner left, is "undecided", never guessed.  Fewer than 6 nodes are
    first measured round-robin.  Writes RESULTS/pairs/pairs.json; --attach picks a stopped search up at
    the round it reached.  Exit 0 nobody named, 1 culprits or
    undecided nodes, 2 usage.

    Examples:

    \b
      trainready cluster pairs -p gpu -N 640 --results /lustre/acc \\
          --spec h200.toml
      trainready cluster pairs -w node[1-3] --results /tmp/acc \\
          --spec example:local-slurm
    """
    from trainready.cluster.pairs.pairing import PairingOptions

    check_out_path(json_path)
    console = Console(stderr=True)
    if attach:
        raise typer.Exit(attach_pairs(fleet.results, controller_wait, json_path, console))
    check_pairing(confirm, max_rounds, floor_fraction, expected)
    if fabric and expected is not None:
        raise UsageError("--expected-gbps with --fabric: each rail is held to its port's rate (sysfs), not one figure")
    from trainready.cluster.pairs import search as pr
    from trainready.spec import load_spec

    spec = load_spec(fleet.spec)[0]
    gpus = spec.gpu.count
    frac = floor_fraction if floor_fraction is not None else (spec.fabric.rail_fraction if fabric else GPU_FLOOR if gpus else CPU_FLOOR)
    expected = expected if expected is not None else spec.fleet.expected_busbw_gbps.get("all_reduce")
    opts = pr.PairsOptions(fleet, PairingOptions(frac, 1.0 if fabric else expected, confirm, max_rounds, seed), gpus,
                           fabric)
    names = started(opts, console)
    console.print(f"[dim]if this command stops, `trainready cluster pairs --attach --results {fleet.results}` picks "
                  "the search up at the round it reached[/]", highlight=False)
    raise typer.Exit(search(opts, names, controller_wait, json_path, console))


def started(opts: "PairsOptions", console: Console) -> list[str]:
    """The nodes selected (those Slurm cannot give: said, never paired), the search's state started; with --fabric
    the probe step run: the nodes that can test (the others: 'not tested (why)', kept in the state)."""
    from trainready.cluster.pairs import state as pairs_state
    from trainready.cluster.steps import select_nodes

    fleet = opts.fleet
    sel = select_nodes(fleet)
    sel.say_not_tested(lambda line: console.print(line, highlight=False))  # no pair, never blamed
    names = list(sel.nodes)
    if len(names) < 2:
        raise UsageError(f"cluster pairs: {len(names)} node(s) selected; a pair needs two")
    pairs_state.start(fleet, opts.pairing, opts.gpus_per_node, names)
    if opts.fabric:
        from trainready.cluster.pairs import fabric as fab

        names, not_tested = fab.probe(fleet, names, lambda line: console.print(f"[dim]{line}[/]", highlight=False))
        pairs_state.save(fleet.results, fabric=True, not_tested=not_tested, nodes=names)
    return names


def check_pairing(confirm: int, max_rounds: int, floor_fraction: float | None, expected: float | None) -> None:
    """The pairing options' bounds: one usage line (exit 2) for the first one out of them."""
    if confirm < 1 or max_rounds < 1:
        raise UsageError("--confirm and --max-rounds: expected at least 1")
    if floor_fraction is not None and not 0 < floor_fraction <= 1:
        raise UsageError(f"--floor-fraction {floor_fraction}: expected 0 < x <= 1")
    if expected is not None and not expected > 0:
        raise UsageError(f"--expected-gbps {expected}: expected GB/s > 0")


def pair_task(
    results: str = typer.Option(..., "--results"),
    rnd: int = typer.Option(..., "--round"),
    pair: str = typer.Option(..., "--pair"),
    spec: str = typer.Option(None, "--spec"),
    plant: list[str] = typer.Option(None, "--plant"),
    fabric: bool = typer.Option(False, "--fabric"),
) -> None:
    """One task of a pair's srun step (started by `cluster pairs`)."""
    from trainready.cluster.tasks.pair import pair_record, run_pair_task

    plants = parse_plants(plant, "cluster")
    if fabric:
        from trainready.cluster.tasks.rails import run_rail_pair

        a, _, b = pair.partition(",")
        raise typer.Exit(run_rail_pair(Path(results), pair_record(Path(results), rnd, a, b), rnd, a, b, plants))
    raise typer.Exit(run_pair_task(Path(results), rnd, pair, spec, plants))


def rail_probe(
    results: str = typer.Option(..., "--results"),
    spec: str = typer.Option(None, "--spec"),
    plant: list[str] = typer.Option(None, "--plant"),
) -> None:
    """One task of `cluster pairs --fabric`'s probe step: this node's RDMA ports and perftest."""
    from trainready.cluster.tasks.rails import run_probe_task

    raise typer.Exit(run_probe_task(Path(results), parse_plants(plant, "cluster"), spec))


def register(app: typer.Typer) -> None:
    """Add pairs and its pair task to the `cluster` group."""
    app.command("pairs")(pairs_cmd)
    app.command("pair-task", hidden=True)(pair_task)
    app.command("rail-probe", hidden=True)(rail_probe)
