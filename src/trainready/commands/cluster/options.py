"""The options of the `cluster` commands that submit Slurm jobs, declared once with one help text each.

`@fleet_options(...)` gives a command the options of the groups it names and hands it ONE value, the
`FleetOptions` (cluster/options.py) that `FleetArgs.build` checks and builds before anything is submitted:

    JOB      every command that submits jobs: --results --partition --spec --time --container-image
             --container-mounts --container-mount-home (and the hidden --plant)
    NODES    which nodes: --nodes --nodelist
    CHECKS   the node acceptance each node runs: --level --only --skip --max-parallel, and whether the
             cross-node step runs the all_reduce: --collective/--no-collective
    VERDICT  what a rejection does: --reference --drain --max-drain --topology
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import typer

from trainready.cluster.options import FleetOptions
from trainready.commands.common import parse_plants, split_names
from trainready.errors import UsageError
from trainready.records import Level

CLUSTER_SPEC_HELP = (
    "Node spec (TOML) every node is held to. Default: the CPU profile. Shipped examples: example:local-slurm "
    "(the local test cluster of scripts/local-slurm.sh), example:cpu-default, example:h200-8x, "
    "example:b200-reference."
)


@dataclass(frozen=True)
class FleetArgs:
    """The cluster options as given on the command line; `build` checks them into a `FleetOptions`."""

    results: str
    """--results: the shared directory of records, logs, ledgers and verdicts."""
    nodes: int | None = None
    """--nodes N: the first N usable nodes of the partition."""
    nodelist: str | None = None
    """--nodelist: a Slurm hostlist expression."""
    partition: str | None = None
    """--partition: the Slurm partition (None: the cluster's default)."""
    spec: str | None = None
    """--spec: a node spec path or example:NAME."""
    level: Level = Level.STANDARD
    """--level: the node checks each node runs."""
    only: tuple[str, ...] = ()
    """--only: node checks to run (names)."""
    skip: tuple[str, ...] = ()
    """--skip: node checks to leave out (names)."""
    duration: str | None = None
    """--duration: the burn-in's length on each node (--level burn-in); each task's time limit is --time plus it."""
    time_limit: str = "30:00"
    """--time: Slurm time limit of each task and step."""
    concurrency: int = 64
    """--max-parallel: array tasks running at once (%K)."""
    collective: bool = True
    """--collective/--no-collective: the multi-node all_reduce in the cross-node step."""
    reference: str | None = None
    """--reference: the node whose versions every node must match."""
    drain: bool = False
    """--drain: drain rejected nodes."""
    max_drain: str = "10%"
    """--max-drain: the most nodes one run drains, a count or a percentage of the nodes tested (cluster/judge/guard.py)."""
    topology: str | None = None
    """--topology: a topology.conf(5) file (default: `scontrol show topology`), for the switch rule."""
    image: str | None = None
    """--container-image: the Pyxis image every task runs in."""
    mounts: tuple[str, ...] = ()
    """--container-mounts: Pyxis mounts SRC:DST[:FLAGS]."""
    mount_home: bool = False
    """--container-mount-home: mount $HOME in the container."""
    image_record: str | None = None
    """--image-record: the image record (trainready image import) every node's copy is held to."""
    plant: tuple[str, ...] = ()
    """--plant: faults planted for tests (cluster.NAME=NODE[:X])."""

    def build(self) -> FleetOptions:
        """Every check that can fail without Slurm, in the order a user fixes them; UsageError (exit 2)."""
        from trainready.cluster.judge.guard import parse_max_drain
        from trainready.cluster.options import Container, parse_mounts, time_seconds
        from trainready.cluster.plants import faults
        from trainready.spec import load_spec

        if self.nodes is not None and self.nodelist:
            raise UsageError("--nodes and --nodelist: give one (a count from the partition, or the nodes by name)")
        if self.nodes is not None and self.nodes < 1:
            raise UsageError(f"--nodes {self.nodes}: expected at least 1")
        if self.concurrency < 1:
            raise UsageError(f"--max-parallel {self.concurrency}: expected at least 1")
        limit_s = time_seconds(self.time_limit)
        spec = load_spec(self.spec)[0]  # a bad spec is exit 2 here, not N failed tasks
        limit, burnin_s = burnin_time(self.level, self.only, self.duration, limit_s, spec.burnin.duration_s)
        if self.mounts and not self.image:
            raise UsageError("--container-mounts needs --container-image (Pyxis mounts into a container)")
        from trainready.image.fleet import record_facts

        facts = record_facts(self.image, self.image_record)
        planted = parse_plants(list(self.plant), "cluster")
        faults.validate(planted)
        return FleetOptions(results=writable_results(self.results), nodelist=self.nodelist, count=self.nodes,
                            partition=self.partition, spec=self.spec, level=self.level,
                            only=tuple(split_names(list(self.only)) or ()) or None,
                            skip=tuple(split_names(list(self.skip)) or ()) or None, time_limit=limit or self.time_limit,
                            burnin_s=burnin_s,
                            concurrency=self.concurrency, collective=self.collective, reference=self.reference,
                            drain=self.drain,
                            container=Container(self.image, parse_mounts(list(self.mounts)), self.mount_home, facts)
                            if self.image else None, plants=planted, max_drain=parse_max_drain(self.max_drain),
                            topology=topology_file(self.topology))


def topology_file(text: str | None) -> Path | None:
    """--topology FILE, read now: a bad file is one line, exit 2, before Slurm is asked."""
    if text is None:
        return None
    from trainready.cluster.control.topology import read_file

    read_file(Path(text))
    return Path(text).resolve()


def burnin_time(level: Level, only: tuple[str, ...], duration: str | None, limit_s: int,
                default_s: float) -> tuple[str, float | None]:
    """(the task time limit as Slurm's H:MM:SS, the burn-in's seconds) when the nodes run the burn-in: --time
    (the other checks' allowance) plus its duration (--duration, else the spec's burnin.duration_s); ('', None)
    when they do not.  --duration without the burn-in is a usage error."""
    from trainready.burnin import parse_duration

    runs = "burnin" in (split_names(list(only)) or []) if only else level == Level.BURN_IN
    if not runs:
        if duration is not None:
            raise UsageError("--duration: only the burn-in uses it (--level burn-in, or --only burnin)")
        return "", None
    seconds = parse_duration(duration) if duration is not None else default_s
    total = limit_s + int(seconds + 0.999)
    return f"{total // 3600}:{total % 3600 // 60:02d}:{total % 60:02d}", (seconds if duration is not None else None)


def writable_results(text: str) -> Path:
    """--results as an absolute directory this process can write (created; its parent must exist): checked
    with a probe file, so a read-only or virtual filesystem is one line, exit 2, before Slurm is asked."""
    res = Path(text).expanduser().resolve()
    if not res.parent.is_dir():
        raise UsageError(f"--results {text}: directory {res.parent} does not exist (create it first)")
    try:
        res.mkdir(exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".trainready-probe-", dir=res)
        os.close(fd)
        os.unlink(probe)
    except FileExistsError:
        raise UsageError(f"--results {text}: not a directory") from None
    except OSError as exc:
        raise UsageError(f"--results {text}: cannot write there ({exc.strerror})") from None
    return res


JOB = ("results", "partition", "spec", "time_limit", "image", "mounts", "mount_home", "image_record", "plant")
NODES = ("nodes", "nodelist")
CHECKS = ("level", "only", "skip", "duration", "concurrency", "collective")
VERDICT = ("reference", "drain", "max_drain", "topology")
TOPOLOGY = ("topology",)

_TIME_HELP = "Slurm time limit of each task and step (sbatch/srun --time: M, M:S, H:M:S, D-H:M)."
# name -> (type, the typer option without its default); the default comes from FleetArgs or the command
_DECLARED: dict[str, tuple[Any, Callable[[Any], Any]]] = {
    "results": (str, lambda d: typer.Option(d, "--results", "-r", help="Directory on a filesystem every node mounts "
                                            "at the same path: records, logs, ledgers, verdicts (docs/cluster.md).")),
    "nodes": (int, lambda d: typer.Option(d, "--nodes", "-N", help="The first N usable nodes of the partition.")),
    "nodelist": (str, lambda d: typer.Option(d, "--nodelist", "-w", help="These nodes, in this order (Slurm "
                                             "hostlist, e.g. gpu[001-640]).")),
    "partition": (str, lambda d: typer.Option(d, "--partition", "-p", help="Slurm partition (default: the "
                                              "cluster's default).")),
    "spec": (str, lambda d: typer.Option(d, "--spec", "-s", help=CLUSTER_SPEC_HELP)),
    "level": (Level, lambda d: typer.Option(d, "--level", "-l", help="Node checks per node: light (versions + manifest: orchestration tests), quick, standard (all but the burn-in) or burn-in (all, then --duration of sustained load).")),
    "only": (list[str], lambda d: typer.Option(d, "--only", help="Node checks to run on each node (comma-separated).")),
    "skip": (list[str], lambda d: typer.Option(d, "--skip", help="Node checks to leave out (comma-separated).")),
    "duration": (str, lambda d: typer.Option(d, "--duration", help="With --level burn-in: the burn-in's length on each "
                                             "node (15m, 1h; default: the spec's burnin.duration_s); each task's "
                                             "time limit becomes --time plus this (docs/burn-in.md).")),
    "time_limit": (str, lambda d: typer.Option(d, "--time", "-t", help=_TIME_HELP)),
    "concurrency": (int, lambda d: typer.Option(d, "--max-parallel", help="Array tasks running at once (sbatch "
                                                "--array=...%K): bounded so a large fleet does not flood slurmctld.")),
    "collective": (bool, lambda d: typer.Option(d, "--collective/--no-collective", help="The multi-node all_reduce "
                                                "of the cross-node step (clocks, storage, ulimit and /etc/hosts are "
                                                "checked either way). --no-collective: where `cluster pairs` or "
                                                "nccl-tests burn in the fabric on their own.")),
    "reference": (str, lambda d: typer.Option(d, "--reference", help="Node whose versions every node must match "
                                              "(default: the spec's software pins, else the fleet's most common "
                                              "versions).")),
    "drain": (bool, lambda d: typer.Option(d, "--drain", help="Drain rejected nodes (reason 'trainready: ...'); never "
                                           "touches an administrator's drain. Without it nothing in Slurm changes.")),
    "max_drain": (str, lambda d: typer.Option(d, "--max-drain", help="With --drain, drain at most this many nodes "
                                              "(a count, or a percentage of the nodes tested); more rejected, or "
                                              "most rejected for one cause, drain none (a fleet-wide cause; cf. "
                                              "draino --max-simultaneous-cordon).")),
    "topology": (str, lambda d: typer.Option(d, "--topology", help="The network's leaf switches in topology.conf(5)'s "
                                             "syntax (default: `scontrol show topology`, where slurm.conf sets "
                                             "TopologyPlugin=topology/tree): most of one switch's nodes rejected for "
                                             "a cross-node or bandwidth cause name the switch, and drain none of "
                                             "them for it (spec fleet.switch_fraction).")),
    "image": (str, lambda d: typer.Option(d, "--container-image", help="Run every task inside this image (Pyxis).")),
    "mounts": (list[str], lambda d: typer.Option(d, "--container-mounts", help="Pyxis mounts SRC:DST[:FLAGS] "
                                                 "(comma-separated); --results is always mounted at its own path.")),
    "mount_home": (bool, lambda d: typer.Option(d, "--container-mount-home", help="Mount $HOME in the container "
                                                "(Pyxis mounts it by default; trainready does not).")),
    "image_record": (str, lambda d: typer.Option(d, "--image-record", help="The image record of the --container-image "
                                                 "file (trainready image import; default: FILE.sqsh.json beside it): "
                                                 "every node's copy must have its sha256.")),
    "plant": (list[str], lambda d: typer.Option(d, "--plant", hidden=True, help="Plant a fault cluster.NAME=NODE[:X] "
                                                "(tests).")),
}


def _default(name: str, overrides: dict[str, Any]) -> Any:
    if name in overrides:
        return overrides[name]
    f = next(f for f in dataclasses.fields(FleetArgs) if f.name == name)
    if f.default is dataclasses.MISSING:
        return ...  # required
    return None if f.default == () else f.default


def fleet_options(*groups: tuple[str, ...], **defaults: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command whose first parameter is `fleet: FleetOptions`: the options of `groups` replace it in
    the command line, and the command receives them built.  `defaults` change a default (pairs: time_limit)."""
    names = [n for n in _DECLARED if any(n in g for g in groups)]  # --help lists them in _DECLARED's order

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(command, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != "fleet"]
        extra = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=_DECLARED[n][0],
                                   default=_DECLARED[n][1](_default(n, defaults))) for n in names]

        @functools.wraps(command)
        def wrapper(*args: Any, **kw: Any) -> Any:
            given = {n: kw.pop(n) for n in names}
            args_ = FleetArgs(**{n: tuple(v) if isinstance(v, list) else v for n, v in given.items()
                                 if v is not None or n == "results"})
            return command(args_.build(), *args, **kw)

        wrapper.__signature__ = sig.replace(parameters=[*extra, *own])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {**{p.name: p.annotation for p in own}, **{n: _DECLARED[n][0] for n in names}}
        return wrapper

    return wrap
