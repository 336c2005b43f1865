"""Planted faults of `trainready cluster`, each keyed by the node it plants on (`--plant cluster.slow=node3:0.5`).

Names and their meaning live in suite/plants.py (CLUSTER_PLANTS).  Every node task gets the whole set and
keeps what names its own node; a run with plants is marked in every record and never accepted as evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from trainready.errors import UsageError

SLOW_FACTOR_DEFAULT = 0.5  # like throughput.slow_gpu: half the figures
# cluster.fail=NODE[:CHECK]: the node check that fails, and the node plant (suite/plants.py) that fails it
FAIL_PLANTS = {"matmul": ("matmul.corrupt", "0"), "train_step": ("train_step.nan", "loss"),
               "fingerprint": ("fingerprint.bitflip", "0")}
FAIL_DEFAULT = "matmul"


def _split(name: str, value: str, number: str | None) -> tuple[str, float | None]:
    """'node3' or 'node3:0.5' → (node, number or None); a bad value is one usage line."""
    node, _, num = value.partition(":")
    if not node.strip():
        raise UsageError(f"--plant {name}={value}: expected NODE{'[:' + number + ']' if number else ''}")
    if not num:
        return node.strip(), None
    if number is None:
        raise UsageError(f"--plant {name}={value}: expected just a node name")
    try:
        return node.strip(), float(num)
    except ValueError:
        raise UsageError(f"--plant {name}={value}: {number} must be a number") from None


@dataclass(frozen=True)
class NodeFaults:
    """What is planted on one node (all off: a healthy node)."""

    fail: str | None = None  # the check planted to fail (a FAIL_PLANTS key)
    drift: bool = False
    slow_factor: float | None = None
    hang: bool = False
    kill: bool = False
    clock_ahead_s: float = 0.0
    storage: bool = False
    nofile: int | None = None
    silent: bool = False  # its rank joins the collective, then stops (the others must blame it, not themselves)
    vanish: bool = False  # its cross-node task ends at once: no cross record, its rank never joins
    text: bool = False  # its matmul fails and its record's messages start with NUL, a lone surrogate, ESC and BEL
    forge: str | None = None  # the node whose record this node's task overwrites with a failing one (a rogue node)
    slow_link: bool = False  # its network link is slow: its ranks in a pair's all_reduce sleep (as cluster.slow there)
    switch_down: bool = False  # its leaf switch is down: its ranks' process-group set-up fails (no interface to reach)

    @property
    def any(self) -> bool:
        return self != NodeFaults()


def validate(faults: Mapping[str, str]) -> None:
    """Every cluster plant's value parses (exit 2 before any job is submitted)."""
    for node in nodes_planted(faults):
        for_node(faults, node)
        decline(faults, node)
        nic_factor(faults, node, 0)
    rails_gbps(faults)
    tree = faults.get("cluster.sysfs")
    if tree is not None and not Path(tree).is_dir():
        raise UsageError(f"--plant cluster.sysfs={tree}: expected a folder (a sysfs tree, or `env --capture-fabric`'s)")


def decline(faults: Mapping[str, str], node: str) -> float | None:
    """cluster.decline=NODE:PCT → PCT when NODE is `node` (read by the sweep's trend, cluster/sweep/trend.py)."""
    value = faults.get("cluster.decline")
    if value is None:
        return None
    who, pct = _split("cluster.decline", value, "PCT")
    if pct is None or not 0 < pct < 100:
        raise UsageError(f"--plant cluster.decline={value}: expected NODE:PCT, PCT in (0, 100)")
    return pct if who == node else None


def failing_check(value: str | None, node: str) -> str | None:
    """cluster.fail=NODE[:CHECK] → CHECK (matmul by default) when NODE is `node`."""
    if value is None:
        return None
    who, _, check = value.partition(":")
    check = check.strip() or FAIL_DEFAULT
    if not who.strip() or check not in FAIL_PLANTS:
        raise UsageError(f"--plant cluster.fail={value}: expected NODE[:CHECK], CHECK one of {', '.join(FAIL_PLANTS)}")
    return check if who.strip() == node else None


def forged(value: str | None, node: str) -> str | None:
    """cluster.forge=NODE:VICTIM → VICTIM when NODE is `node`."""
    if value is None:
        return None
    who, _, victim = (x.strip() for x in value.partition(":"))
    if not who or not victim or who == victim:
        raise UsageError(f"--plant cluster.forge={value}: expected NODE:VICTIM, two different nodes")
    return victim if who == node else None


def check_plants(nf: NodeFaults) -> dict[str, str]:
    """The node-check plants (suite/plants.py) that carry this node's cluster plants: cluster.fail's (cluster.text's
    failing check too), and for cluster.drift the fingerprint's key drift on every rank of the node
    (fingerprint.drift=all)."""
    fail = nf.fail or (FAIL_DEFAULT if nf.text else None)
    out = dict([FAIL_PLANTS[fail]]) if fail else {}
    return {**out, "fingerprint.drift": "all"} if nf.drift else out


FLEET_WIDE = ("cluster.rails", "cluster.sysfs")  # plants whose value names no node


def nodes_planted(faults: Mapping[str, str]) -> set[str]:
    return {v.partition(":")[0].strip() for k, v in faults.items() if k.startswith("cluster.")
            and k not in FLEET_WIDE}


def for_node(faults: Mapping[str, str], node: str) -> NodeFaults:
    """The plants that name `node`."""

    def on(name: str, value: str | None, number: str | None = None) -> float | None | bool:
        if value is None:
            return False
        who, num = _split(name, value, number)
        if node not in who.split("+"):  # NODE or NODE+NODE...: every node named (a switch's nodes)
            return False
        return True if num is None else num

    slow = on("cluster.slow", faults.get("cluster.slow"), "FACTOR")
    if slow is False:  # slow in the acceptance array only: the re-measurement drops it (cluster/remeasure.py)
        slow = on("cluster.slow_once", faults.get("cluster.slow_once"), "FACTOR")
    clock_text, nofile_text = faults.get("cluster.clock"), faults.get("cluster.nofile")
    clock = on("cluster.clock", clock_text, "SECONDS")
    nofile = on("cluster.nofile", nofile_text, "N")
    if clock is True:
        raise UsageError(f"--plant cluster.clock={clock_text}: expected NODE:SECONDS")
    if nofile is True:
        raise UsageError(f"--plant cluster.nofile={nofile_text}: expected NODE:N")
    return NodeFaults(
        fail=failing_check(faults.get("cluster.fail"), node),
        drift=bool(on("cluster.drift", faults.get("cluster.drift"))),
        slow_factor=(SLOW_FACTOR_DEFAULT if slow is True else float(slow)) if slow is not False else None,
        hang=bool(on("cluster.hang", faults.get("cluster.hang"))),
        kill=bool(on("cluster.kill", faults.get("cluster.kill"))),
        clock_ahead_s=float(clock) if clock is not False else 0.0,
        storage=bool(on("cluster.storage", faults.get("cluster.storage"))),
        nofile=int(nofile) if nofile is not False else None,
        silent=bool(on("cluster.silent", faults.get("cluster.silent"))),
        vanish=bool(on("cluster.vanish", faults.get("cluster.vanish"))),
        text=bool(on("cluster.text", faults.get("cluster.text"))),
        forge=forged(faults.get("cluster.forge"), node),
        slow_link=node in linked(faults.get("cluster.slow_link")),
        switch_down=node in linked(faults.get("cluster.switch_down"), "cluster.switch_down"),
    )


def linked(value: str | None, name: str = "cluster.slow_link") -> list[str]:
    """cluster.slow_link=NODE[+NODE...] (or cluster.switch_down) -> the nodes (every node of one leaf switch, for
    the switch rule)."""
    if value is None:
        return []
    nodes = [n.strip() for n in value.split("+")]
    if not all(nodes) or ":" in value:
        raise UsageError(f"--plant {name}={value}: expected NODE[+NODE...]")
    return nodes


def rails_gbps(faults: Mapping[str, str]) -> float | None:
    """cluster.rails=GBPS -> GBPS (every rail's planted rate where sysfs gives none); None when not planted."""
    value = faults.get("cluster.rails")
    if value is None:
        return None
    try:
        gbps = float(value)
    except ValueError:
        raise UsageError(f"--plant cluster.rails={value}: expected GBPS, a number > 0") from None
    if not gbps > 0:
        raise UsageError(f"--plant cluster.rails={value}: expected GBPS, a number > 0")
    return gbps


def nic_factor(faults: Mapping[str, str], node: str, rail: int) -> float:
    """cluster.nic_slow=NODE:RAIL[:FACTOR] -> FACTOR (default 0.5) on that node's rail RAIL, else 1.0."""
    value = faults.get("cluster.nic_slow")
    if value is None:
        return 1.0
    parts = [p.strip() for p in value.split(":")]
    try:
        who, idx, factor = parts[0], int(parts[1]), float(parts[2]) if len(parts) > 2 else SLOW_FACTOR_DEFAULT
    except (IndexError, ValueError):
        raise UsageError(f"--plant cluster.nic_slow={value}: expected NODE:RAIL[:FACTOR]") from None
    if not who or len(parts) > 3 or idx < 0 or not 0 < factor <= 1:
        raise UsageError(f"--plant cluster.nic_slow={value}: expected NODE:RAIL[:FACTOR], RAIL >= 0, 0 < FACTOR <= 1")
    return factor if who == node and idx == rail else 1.0
