"""`trainready cluster sweep`: the node acceptance again on idle nodes, at low priority, capped, with strikes."""

from __future__ import annotations

import dataclasses
import re
import shlex
import sys

import typer
from rich.console import Console

from trainready.cluster.options import FleetOptions
from trainready.commands.cluster.options import CHECKS, JOB, NODES, VERDICT, fleet_options
from trainready.commands.common import JSON_HELP, check_out_path
from trainready.errors import UsageError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def window_s(option: str, text: str) -> float:
    """'24h', '7d', '90m', '3600s' → seconds > 0; anything else one line naming the option (exit 2)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", text or "")
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"{option} '{text}': expected a time such as 24h, 7d or 90m")
    return float(m.group(1)) * _UNITS[m.group(2)]


def scrontab_line(schedule: str, argv: list[str]) -> str:
    """The scrontab(1) entry: '#SCRON' options for the collector's own job, then the schedule and the command."""
    fields = schedule.split()
    if (len(fields) != 5 or not all(re.fullmatch(r"[0-9A-Za-z*,/-]+", f) for f in fields)) and \
            not re.fullmatch(r"@[a-z]+", schedule):
        raise UsageError(f"--scrontab '{schedule}': expected a cron schedule of five fields (e.g. '0 3 * * 0') "
                         "or @daily/@weekly (scrontab(1))")
    for a in argv:  # scrontab(1) reads one entry a line: a line feed in an argument would start another entry
        if "\n" in a or "\r" in a:
            raise UsageError(f"--scrontab: the argument {a!r} holds a line break; a scrontab entry is one line")
    keep, it = [], iter(argv)
    for a in it:
        if a == "--scrontab":
            next(it, None)
        elif not a.startswith("--scrontab="):
            keep.append(a)
    cmd = shlex.join([sys.argv[0] if sys.argv[0].endswith("trainready") else "trainready", *keep])
    return f"#SCRON --job-name=trainready-sweep --time=1-00:00:00 --cpus-per-task=1\n{schedule} {cmd}"


def _check_bounds(max_nodes: int | None, max_fraction: float | None, strikes: int) -> None:
    if max_nodes is not None and max_nodes < 1:
        raise UsageError(f"--max-nodes {max_nodes}: expected at least 1")
    if max_fraction is not None and not 0 < max_fraction <= 1:
        raise UsageError(f"--max-fraction {max_fraction}: expected a fraction in (0, 1]")
    if strikes < 1:
        raise UsageError(f"--strikes {strikes}: expected at least 1")


def _with_licenses(fleet: FleetOptions, licenses: str | None) -> FleetOptions:
    """The fleet options of a sweep: no --nodes (it picks idle nodes itself), the tasks' --licenses checked."""
    if fleet.count is not None:
        raise UsageError("--nodes: the sweep picks idle nodes itself; cap it with --max-nodes (and name the "
                         "candidates with --nodelist)")
    if licenses is not None and not re.fullmatch(r"[A-Za-z0-9_.@-]+(:[1-9][0-9]*)?", licenses):
        raise UsageError(f"--licenses {licenses}: expected NAME or NAME:COUNT (a license slurm.conf names)")
    return dataclasses.replace(fleet, licenses=licenses)


@fleet_options(JOB, NODES, CHECKS, VERDICT)
def sweep_cmd(
    fleet: FleetOptions,
    qos: str = typer.Option(None, "--qos", help="The QOS of the sweep's tasks (the low tier; slurm.conf(5) "
                            "PreemptType=preempt/qos), through sbatch's SBATCH_QOS."),
    max_nodes: int = typer.Option(None, "--max-nodes", help="At most this many nodes under test at once."),
    licenses: str = typer.Option(None, "--licenses", metavar="NAME[:N]", help="Each sweep task holds these Slurm "
                                 "licenses while it runs (sbatch --licenses): with slurm.conf(5) Licenses=NAME:200, "
                                 "at most 200 nodes are under sweep at once, whatever runs the sweeps."),
    max_fraction: float = typer.Option(None, "--max-fraction", help="At most this fraction (0-1] of the "
                                       "partition's nodes under test at once."),
    skip_passed: str = typer.Option(None, "--skip-passed-within", metavar="TIME", help="Leave out nodes that "
                                    "passed a sweep within TIME (24h, 7d): a capped sweep walks the fleet over days."),
    strikes: int = typer.Option(2, "--strikes", help="Consecutive failing sweeps before a node is drained "
                                "(1: drain at the first failure)."),
    drain_window: str = typer.Option("24h", "--drain-window", metavar="TIME", help="The window --max-drain counts "
                                     "the sweep's drains in."),
    json_path: str = typer.Option(None, "--json", help=JSON_HELP),
    prometheus: str = typer.Option(None, "--prometheus", metavar="PATH", help="After each sweep, the fleet's "
                                   "health as a node_exporter textfile (per node: last sweep and verdict, strikes, "
                                   "figures, trend WARNs, drained by the sweep and why)."),
    scrontab: str = typer.Option(None, "--scrontab", metavar="SCHEDULE", help="Print the scrontab(1) lines that "
                                 "run this sweep on SCHEDULE ('0 3 * * 0', @daily) and exit."),
) -> None:
    """Sweep idle nodes: the node acceptance at --level, only where no job runs, preemptible by real jobs.

    Each sweep picks idle nodes of --partition (of --nodelist, where given): the low tier, a partition or
    --qos that real jobs preempt (slurm.conf(5) PreemptType/PreemptMode), the least recently swept first, at
    most --max-nodes / --max-fraction, and runs `cluster run`'s acceptance on them (no cross-node step).  Per
    node: pass, fail (its own checks failed) or unknown (preempted, busy, timed out, no record: never a
    failure, never drained).  A failure is a WARN until --strikes failing sweeps in a row; then, with --drain,
    the node is drained ('trainready:sweep/CLASS DATE: ...'; its RMA evidence in RESULTS/rma/NODE/), never
    over an administrator's drain, and at most --max-drain in --drain-window (past it: no more drains, said
    loudly).  Each node's figures are judged
    against its own history (trend WARNs; `cluster history NODE`).  `cluster resume` brings a drained node
    back after re-acceptance.  One sweep at a time per --results (a lock).  Exit 0 no failure, 1 a node
    failed, 2 usage or Slurm error, 3 planted.

    Examples:

    \b
      trainready cluster sweep -p sweep --results /lustre/sweep --level quick --max-fraction 0.1 \\
        --skip-passed-within 24h --drain
      trainready cluster sweep -p sweep --results /lustre/sweep --level burn-in --duration 30m \\
        --max-nodes 32 --drain --scrontab '0 3 * * 6'
    """
    from trainready.cluster.sweep.run import SweepOptions, sweep

    check_out_path(json_path)
    check_out_path(prometheus, "--prometheus")
    _check_bounds(max_nodes, max_fraction, strikes)
    fleet = _with_licenses(fleet, licenses)
    opts = SweepOptions(qos, max_nodes, max_fraction, window_s("--skip-passed-within", skip_passed)
                        if skip_passed else None, strikes, window_s("--drain-window", drain_window), json_path,
                        prometheus)
    if scrontab:
        print(scrontab_line(scrontab, sys.argv[1:]))
        raise typer.Exit(0)
    console = Console(stderr=True)
    raise typer.Exit(sweep(fleet, opts, lambda s: console.print(s, highlight=False, markup=False)))


def history_cmd(
    node: str = typer.Argument(None, help="The node (leave out with --coverage)."),
    results: str = typer.Option(..., "--results", "-r", help="The --results of the sweeps and runs."),
    coverage: bool = typer.Option(False, "--coverage", help="Name every node whose last passing active or passive "
                                  "check is older than the spec's fleet.coverage_days (default 7), or never passed, "
                                  "and every node the sweep could not judge fleet.unjudged_sweeps times in a row."),
    spec: str = typer.Option(None, "--spec", "-s", help="The spec whose fleet.coverage_days applies (--coverage)."),
    partition: str = typer.Option(None, "--partition", "-p", help="With --coverage: every node of this partition "
                                  "(one sinfo), so a node no record names is named as never passed."),
) -> None:
    """A node's state first (drained by the sweep and why, strikes, trend WARNs, last pass), then its sweeps as a
    table: when, verdict, its figures (per device); under a failing sweep the check that failed, its one-line
    reason and the strike count; the trend WARNs (and figures too noisy to judge); then the jobs Slurm accounting
    says ran on it between its last pass and its latest rejection.

    Read from RESULTS/sweep/trend/NODE.json (`trainready.sweeptrend/1`) and RESULTS/runs/*/fleet.json.
    `--coverage`: the nodes past the coverage window (cluster/repair/coverage.py).  Exit 0; 1 when --coverage names a
    node; 2 when the node has no history there."""
    from pathlib import Path

    from trainready.cluster.repair import coverage as cov
    from trainready.cluster.sweep import trend

    if coverage:
        from trainready.spec import load_spec

        fs = load_spec(spec)[0].fleet
        names = list(slurm_nodes(partition)) if partition else []
        late = cov.stale(cov.with_nodes(cov.last_passes(Path(results)), names), fs.coverage_days)
        blind = cov.unjudged(Path(results), fs.unjudged_sweeps)
        for line in [*cov.lines(Path(results), fs.coverage_days, nodes=names), *blind]:
            print(line)
        raise typer.Exit(1 if late or blind else 0)
    if not node:
        raise UsageError("cluster history: give a NODE, or --coverage")
    runs = trend.load(Path(results), node)
    impact = latest_impact(Path(results), node)
    if not runs and impact is None:
        raise UsageError(f"{node}: no sweep history under --results {results} (expected "
                         f"{trend.path(Path(results), node)})")
    from trainready.report.node_state import node_state, text

    for row in [*text(node_state({"node": node, "runs": runs}, str(trend.path(Path(results), node)))), "",
                *trend.table(runs)]:
        print(row)
    if impact is not None:
        print(impact)


def slurm_nodes(partition: str) -> list[str]:
    from trainready.cluster.control import slurm

    return list(slurm.nodes(None, partition))


def latest_impact(results: "Path", node: str) -> str | None:
    """The job-impact line of the latest run (or sweep) that rejected `node` (its fleet record's context)."""
    import json

    for f in sorted([*results.glob("runs/*/fleet.json"), *results.glob("sweep/runs/*/fleet.json")],
                    key=lambda p: p.parent.name, reverse=True):
        try:
            imp = (json.loads(f.read_text(encoding="utf-8")).get("context") or {}).get("job_impact") or {}
        except (OSError, ValueError):
            continue
        if node in imp:
            return f"job impact ({f.parent.name}): {imp[node].get('text', '')}"
    return None


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_cmd)
    app.command("history")(history_cmd)
