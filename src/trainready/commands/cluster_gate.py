"""`trainready cluster pairs` and `trainready cluster rollout`: which node is slow, and a new image wave by wave.

Registered on the `cluster` command group of commands/cluster.py (same options, same --results layout)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from trainready.commands.cluster import RESULTS_HELP, TIME_HELP, app
from trainready.commands.common import JSON_HELP, SPEC_HELP, check_out_path, parse_plants, write_json_doc
from trainready.errors import UsageError
from trainready.records import Level

# Default pair floors (x the reference busbw): NCCL pairs of healthy nodes vary ~5% (nccl-tests repeats), so 0.9
# catches a node 10% slow; gloo over a shared host's cores varied 0.19-0.56 GB/s between identical pairs here.
GPU_FLOOR, CPU_FLOOR = 0.9, 0.25


@app.command("pairs")
def pairs_cmd(
    results: str = typer.Option(..., "--results", "-r", help=RESULTS_HELP),
    nodes: int = typer.Option(None, "--nodes", "-N", help="Test the first N usable nodes of the partition."),
    nodelist: str = typer.Option(None, "--nodelist", "-w", help="Test these nodes (Slurm hostlist, e.g. gpu[001-640])."),
    partition: str = typer.Option(None, "--partition", "-p", help="Slurm partition."),
    spec: str = typer.Option(None, "--spec", "-s", help=SPEC_HELP),
    floor_fraction: float = typer.Option(None, "--floor-fraction", help="A pair passes at >= this x the reference busbw. "
                                         "Default 0.9 on GPUs (healthy pairs vary ~5%; a node 10% slow fails), 0.25 on "
                                         "CPU nodes (gloo over shared cores: identical pairs differed ~3x here)."),
    expected: float = typer.Option(None, "--expected-gbps", help="Reference pair busbw in GB/s (default: the median "
                                   "over nodes of each node's best pair, measured)."),
    confirm: int = typer.Option(2, "--confirm", help="Failures against distinct proven-good partners that name a node."),
    max_rounds: int = typer.Option(8, "--max-rounds", help="Give up after this many rounds (the rest: undecided)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the round-1 random matching (same seed, same pairs)."),
    time_limit: str = typer.Option("10:00", "--time", "-t", help=TIME_HELP),
    image: str = typer.Option(None, "--container-image", help="Run every pair's tasks inside this image (Pyxis)."),
    mounts: list[str] = typer.Option(None, "--container-mounts", help="Pyxis mounts SRC:DST[:FLAGS] (comma-separated)."),
    json_path: str = typer.Option(None, "--json", help=JSON_HELP),
    plant: list[str] = typer.Option(None, "--plant", hidden=True, help="Plant a fault cluster.slow=NODE (tests)."),
) -> None:
    """Name the slow nodes: all_reduce busbw in rounds of disjoint node pairs, each pair its own Slurm step.

    Round 1 pairs every node at random; a pair below the floor makes both nodes suspects; each later
    round re-pairs every suspect with a node already proven good, so the slow node fails again and its
    partner is cleared.  Two failures against distinct good partners name a node; a result that flips,
    or a suspect with no good partner left, is "undecided", never guessed.  Fewer than 6 nodes are
    first measured round-robin.  Writes RESULTS/pairs/pairs.json.  Exit 0 nobody named, 1 culprits or
    undecided nodes, 2 usage.

    Examples:

    \b
      trainready cluster pairs -p gpu -N 640 --results /lustre/acc \\
          --spec h200.toml
      trainready cluster pairs -w node[1-3] --results /tmp/acc \\
          --spec example:local-slurm
    """
    from trainready.cluster import pairs as pr
    from trainready.cluster.pairing import PairingOptions
    from trainready.cluster.run import select_nodes
    from trainready.commands.cluster import _options
    from trainready.spec import load_spec

    check_out_path(json_path)
    fo = _options(results, nodes, nodelist, partition, spec, Level.QUICK, None, None, time_limit, 64, None, False,
                  image, mounts, False, plant)
    if confirm < 1 or max_rounds < 1:
        raise UsageError("--confirm and --max-rounds: expected at least 1")
    if floor_fraction is not None and not 0 < floor_fraction <= 1:
        raise UsageError(f"--floor-fraction {floor_fraction}: expected 0 < x <= 1")
    if expected is not None and not expected > 0:
        raise UsageError(f"--expected-gbps {expected}: expected GB/s > 0")
    gpus = load_spec(spec)[0].gpu.count
    frac = floor_fraction if floor_fraction is not None else (GPU_FLOOR if gpus else CPU_FLOOR)
    opts = pr.PairsOptions(fo, PairingOptions(frac, expected, confirm, max_rounds, seed), gpus)
    console = Console(stderr=True)
    names = select_nodes(fo)
    if len(names) < 2:
        raise UsageError(f"cluster pairs: {len(names)} node(s) selected; a pair needs two")
    (fo.results / "pairs").mkdir(parents=True, exist_ok=True)
    out, why = pr.run_pairs(opts, names, lambda s: console.print(f"[dim]{s}[/]", highlight=False))
    doc = pr.to_json(out, opts, names, why)
    path = pr.write(doc, fo.results)
    print_pairs(doc, Console(stderr=json_path == "-"))
    console.print(f"pairs record written to {path}")
    if json_path:
        write_json_doc(doc, json_path, console, "pairs record")
    raise typer.Exit(1 if out.culprits or out.undecided else 0)


def print_pairs(doc: dict, console: Console) -> None:
    from rich.table import Table

    t = Table(title=f"cluster pairs: {doc['nodes_tested']} nodes, {doc['rounds']} round(s) "
                    f"(round-robin: {doc['round_robin_rounds']}); floor {doc['floor_gbps']:.3g} GB/s")
    for col in ("node", "status", "passed/pairs", "evidence"):
        t.add_column(col, overflow="fold")
    style = {"bad": "bold red", "undecided": "yellow", "good": "green"}
    for n in doc["nodes"]:
        t.add_row(n["node"], f"[{style.get(n['status'], '')}]{n['status']}[/]", f"{n['passes']}/{n['passes'] + n['fails']}",
                  n["reason"])
    console.print(t)
    culprits = ", ".join(doc["culprits"]) or "none"
    undecided = f"; undecided: {', '.join(doc['undecided'])}" if doc["undecided"] else ""
    console.print(f"culprits: {culprits}{undecided}", highlight=False)


@app.command("pair-task", hidden=True)
def pair_task(
    results: str = typer.Option(..., "--results"),
    rnd: int = typer.Option(..., "--round"),
    pair: str = typer.Option(..., "--pair"),
    spec: str = typer.Option(None, "--spec"),
    plant: list[str] = typer.Option(None, "--plant"),
) -> None:
    """One task of a pair's srun step (started by `cluster pairs`)."""
    from trainready.cluster.pairtask import run_pair_task

    raise typer.Exit(run_pair_task(Path(results), rnd, pair, spec, parse_plants(plant, "cluster")))


@app.command("rollout")
def rollout_cmd(
    results: str = typer.Option(..., "--results", "-r", help=RESULTS_HELP + " Holds the rollout ledger (rollout.json)."),
    waves: str = typer.Option("1,8,64,all", "--waves", help="Wave sizes in order; the first wave is the canary; 'all' = the rest."),
    max_reject: float = typer.Option(0.0, "--max-reject", help="Stop when a wave rejects more than this fraction of its nodes (0-1)."),
    revalidate: bool = typer.Option(False, "--revalidate", help="First re-run acceptance on nodes trainready drained; "
                                    "resume those that pass."),
    drain: bool = typer.Option(False, "--drain", help="Drain rejected nodes (reason 'trainready: ...'); never an "
                               "administrator's drain. Without it nothing in Slurm changes."),
    nodes: int = typer.Option(None, "--nodes", "-N", help="Roll out to the first N usable nodes of the partition."),
    nodelist: str = typer.Option(None, "--nodelist", "-w", help="Roll out to these nodes, in this order (Slurm hostlist)."),
    partition: str = typer.Option(None, "--partition", "-p", help="Slurm partition."),
    spec: str = typer.Option(None, "--spec", "-s", help=SPEC_HELP),
    level: Level = typer.Option(Level.STANDARD, "--level", "-l", help="Node checks per node: light (versions + manifest: orchestration tests), quick or standard (all)."),
    only: list[str] = typer.Option(None, "--only", help="Node checks to run on each node (comma-separated)."),
    skip: list[str] = typer.Option(None, "--skip", help="Node checks to leave out."),
    time_limit: str = typer.Option("30:00", "--time", "-t", help=TIME_HELP),
    concurrency: int = typer.Option(64, "--max-parallel", help="Array tasks running at once within a wave."),
    image: str = typer.Option(None, "--container-image", help="The new image: every task runs inside it (Pyxis)."),
    mounts: list[str] = typer.Option(None, "--container-mounts", help="Pyxis mounts SRC:DST[:FLAGS] (comma-separated)."),
    json_path: str = typer.Option(None, "--json", help=JSON_HELP),
    plant: list[str] = typer.Option(None, "--plant", hidden=True, help="Plant a fault cluster.NAME=NODE (tests)."),
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
    from trainready.cluster.run import select_nodes
    from trainready.commands.cluster import _options

    check_out_path(json_path)
    if not 0 <= max_reject <= 1:
        raise UsageError(f"--max-reject {max_reject}: expected a fraction 0 <= R <= 1")
    sizes = parse_waves(waves)
    fo = _options(results, nodes, nodelist, partition, spec, level, only, skip, time_limit, concurrency, None, drain,
                  image, mounts, False, plant)
    console = Console(stderr=True)
    doc = run_rollout(RolloutOptions(fo, sizes, max_reject, revalidate), select_nodes(fo),
                      lambda s: console.print(f"[dim]{s}[/]", highlight=False))
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


def register(root: typer.Typer) -> None:
    """The commands above are on commands/cluster.py's group, which that module registers."""
