"""The command lines of the self-test's cases (selftest/cases.py): one builder per kind of run, each filled
with the placeholders selftest/prepare.py provides."""

from __future__ import annotations

import re
from typing import Protocol, Sequence


class Case(Protocol):
    """What a share group needs of a self-test case (selftest/cases.py Case)."""

    @property
    def name(self) -> str: ...

    @property
    def share(self) -> str: ...

    @property
    def argv(self) -> tuple[str, ...]: ...


def node(check: str, plant: str, *extra: str) -> tuple[str, ...]:
    return ("node", "--spec", "{spec}", "--only", check, "--plant", plant, *extra)


def burnin(plant: str) -> tuple[str, ...]:
    """An 8 s burn-in alone, under the CPU profile's [burnin] thresholds (a 98% fall is the planted slowdown;
    spec/examples/cpu-default.toml says why 90% on shared cores)."""
    return ("node", "--spec", "example:cpu-default", "--only", "burnin", "--duration", "8s", "--plant", plant)


def comm(*plants: str, spec: str = "{spec}") -> tuple[str, ...]:
    out = ["comm", "--spec", spec, "--ops", "all_reduce", "-b", "1K", "-e", "16K", "-f", "4", "-w", "1", "-n", "2",
           "--timeout", "20", "--pair-bytes", "64K", "--quiet"]
    for p in plants:
        out += ["--plant", p]
    return tuple(out)


def resume(plant: str) -> tuple[str, ...]:
    return ("resume", "--spec", "{spec}", "--steps", "10", "--checkpoint-step", "5", "--batch-size", "2",
            "--plant", plant)


def cluster(name: str, plant: str, checks: str = "versions", collective: bool = False,
            time: str = "") -> tuple[str, ...]:
    """`cluster run` on the first 3 usable nodes of the default partition ({node1} {node2} {node3}: node1..node3
    on the local cluster, scripts/local-slurm.sh up), each case its own --results; {node1} is the versions
    reference and stays unplanted (the run's own control), under {spec_fleet} (example:local-slurm with the
    deadlines the plants need, prepare.spec_fleet).  `collective`: the multi-node all_reduce too; `time`: --time
    (default 2:00 with the collective, 1:00 without: what 3 nodes sharing 2 cores need)."""
    return ("cluster", "run", "--nodelist", "{node1},{node2},{node3}", "--results", f"{{cluster_results}}/{name}",
            "--spec", "{spec_fleet}", "--only", checks,
            "--reference", "{node1}", "--time", time or ("2:00" if collective else "1:00"),
            *(() if collective else ("--no-collective",)), "--plant", plant)


def pairs_fabric(name: str, plant: str) -> tuple[str, ...]:
    """`cluster pairs --fabric` over {node1} {node2} {node3}: every node's RDMA probe reads the replayed HGX B200
    server's sysfs ({fabric_node}, cluster.sysfs: 8 x NDR 400 ports) and each rail's figure is planted
    (cluster.rails: no ib_write_bw, every rail at 98% of its rate), so the fault is the judge's to find."""
    return ("cluster", "pairs", "--fabric", "--nodelist", "{node1},{node2},{node3}", "--results",
            f"{{cluster_results}}/{name}", "--spec", "{spec_fleet}", "--time", "2:00", "--plant",
            "cluster.sysfs={fabric_node}", "--plant", "cluster.rails=400", "--plant", plant)


def sweep(name: str, plant: str) -> tuple[str, ...]:
    """`cluster sweep` over {node1} {node2} {node3} of the default partition (idle ones), train_step's figure,
    judged from one earlier sweep ({spec_trend}: prepare.DECLINE_MIN_RUNS)."""
    return ("cluster", "sweep", "--nodelist", "{node1},{node2},{node3}", "--results", f"{{cluster_results}}/{name}",
            "--spec", "{spec_trend}", "--only", "train_step", "--time", "2:00", "--plant", plant)


def data(prefix: str) -> tuple[str, ...]:
    """A short resume on the token files at `prefix` (its control: the same files intact)."""
    return ("resume", "--spec", "{spec}", "--steps", "4", "--checkpoint-step", "2", "--batch-size", "2",
            "--data", prefix)


# The cluster cases that need a throughput figure (train_step's tokens/s) or a failing check (matmul).
TRAINING = "versions,matmul,train_step"


def compat_save(name: str, plant: str) -> tuple[str, ...]:
    return ("resume", "--steps", "4", "--checkpoint-step", "2", "--save-only", f"{{scratch}}/{name}", "--plant", plant)


def share_key(case: Case) -> str:
    """The run a fleet case belongs to: its `share`, else its own."""
    return case.share or case.name


def shared_argv(group: Sequence[Case]) -> tuple[str, ...]:
    """The one command of a share group: the first case's, its --results the group's own folder, with every
    case's --plant in table order.  The cases' commands must be the same but for their plants and --results.  A
    group of one is its case's command."""
    if len(group) == 1:
        return group[0].argv

    def parts(c: Case) -> tuple[list[str], list[str]]:
        rest: list[str] = []
        plants: list[str] = []
        it = iter(c.argv)
        for a in it:
            if a == "--plant":
                plants += ["--plant", next(it)]
            else:
                rest.append(a)
        return [re.sub(r"^\{cluster_results\}/[\w.-]+$", f"{{cluster_results}}/share-{share_key(c)}", a)
                for a in rest], plants

    base, _ = parts(group[0])
    plants: list[str] = []
    for c in group:
        rest, mine = parts(c)
        if rest != base:
            raise ValueError(f"self-test case {c.name}: its command differs from {group[0].name}'s, beyond its plants")
        plants += mine
    return (*base, *plants)
