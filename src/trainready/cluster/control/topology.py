"""Slurm's network topology as the tree plugin knows it (topology.conf(5), `TopologyPlugin=topology/tree`):
which leaf switch each node hangs off.

Read from `scontrol show topology` (slurmctld's own view: one `SwitchName=... Level=0 ... Nodes=...` line per
leaf switch) or from a file in topology.conf's syntax (`cluster run --topology FILE`).  A switch whose line
names `Nodes=` and no `Switches=` is a leaf; the spine's lines are kept out.  Hostlist expressions are expanded here,
as Slurm's hostlist does (`node[01-04,7]`), so a 640-node tree costs no call per switch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from trainready.errors import UsageError


@dataclass(frozen=True)
class Topology:
    leaves: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # leaf switch -> its nodes
    source: str = ""  # where it was read ("scontrol show topology", a file), or why there is none

    def leaf_of(self, node: str) -> str | None:
        return next((s for s, nodes in self.leaves.items() if node in nodes), None)


def expand(expr: str) -> list[str]:
    """A Slurm hostlist expression's names, in Slurm's order (`scontrol show hostnames`): every bracket group of a
    name, the first outermost: 'rack[1-2]-n[1-2],gpu7' -> rack1-n1 rack1-n2 rack2-n1 rack2-n2 gpu7."""
    out: list[str] = []
    for part in re.split(r",(?![^\[]*\])", expr.strip()):  # commas outside brackets
        if part:
            out += _names(part, expr)
    return out


def _names(part: str, expr: str) -> list[str]:
    m = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
    if m is None:
        return [part]
    head, ranges, tail = m.groups()
    rest = _names(tail, expr) if "[" in tail else [tail]
    out: list[str] = []
    for r in ranges.split(","):
        lo, _, hi = r.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise UsageError(f"hostlist '{expr}': '{r}' is not a number or a range N-M")
        width = len(lo) if lo.startswith("0") else 0
        out += [f"{head}{k:0{width}d}{t}" for k in range(int(lo), int(hi or lo) + 1) for t in rest]
    return out


def parse(text: str, source: str) -> Topology:
    """topology.conf(5) lines (or `scontrol show topology`'s) -> the leaf switches and their nodes."""
    leaves: dict[str, tuple[str, ...]] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        kv = dict(w.split("=", 1) for w in line.split() if "=" in w)
        name = kv.get("SwitchName")
        if not name:
            raise UsageError(f"{source}: line {n}: expected SwitchName=NAME (topology.conf(5)), got '{line[:80]}'")
        if kv.get("Nodes") and not kv.get("Switches"):  # a leaf; scontrol lists the spine's nodes too
            leaves[name] = tuple(expand(kv["Nodes"]))
    return Topology(leaves, source)


def read_file(path: Path) -> Topology:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--topology {path}: cannot read it ({e.strerror or e})") from None
    return parse(text, str(path))


def read_slurm() -> Topology:
    """slurmctld's tree (one `scontrol show topology` call); none where no topology plugin is configured."""
    from trainready.cluster.control import slurm
    from trainready.errors import SlurmError

    try:
        text = slurm.call(["scontrol", "show", "topology"])
    except SlurmError as e:
        return Topology({}, f"no topology ({e})")
    if "SwitchName=" not in text:
        return Topology({}, "no topology (slurm.conf sets no TopologyPlugin=topology/tree)")
    return parse(text, "scontrol show topology")


def read(path: Path | None) -> Topology:
    return read_file(path) if path is not None else read_slurm()
