"""The specs of the self-test's fleet cases: example:local-slurm with the deadlines their plants need."""

from __future__ import annotations

from pathlib import Path


# The cross-node collective cases' deadlines (cluster.vanish waits FLEET_TIMEOUT_S + FLEET_JOIN_S for the rank
# that never joins, cluster.silent FLEET_TIMEOUT_S on the one that stops): what 3 ranks on a 2-core host need
# (a 1 KiB-1 MiB gloo all_reduce step takes well under a second; each rank's torch start-up took 2-15 s at load
# average 1-20, examples/local-slurm.toml), not the 30 s + 20 s of the fleet's example spec.
FLEET_TIMEOUT_S = 12.0
FLEET_JOIN_S = 8.0
# Each node's wait for the others' storage probes (cross-node step): one srun starts every node's task within a
# second or two, and the probe is its first act after the clock exchange; cluster.vanish (a node that writes none)
# and cluster.storage (a node on another filesystem) wait this out.  The example spec's 20 s is for load average 20.
FLEET_STORAGE_WAIT_S = 6.0


def _local_slurm(root: Path, name: str, fleet_lines: str = "") -> str:
    """example:local-slurm with the fleet cases' deadlines (FLEET_TIMEOUT_S, FLEET_JOIN_S, FLEET_STORAGE_WAIT_S)
    and `fleet_lines` added to its [fleet] table, as NAME."""
    import re
    from importlib import resources

    text = resources.files("trainready.spec").joinpath("examples/local-slurm.toml").read_text(encoding="utf-8")
    text = re.sub(r"(?m)^timeout_s = .*$", f"timeout_s = {FLEET_TIMEOUT_S}", text)
    text = re.sub(r"(?m)^join_s = .*$", f"join_s = {FLEET_JOIN_S}", text)
    text = re.sub(r"(?m)^storage_wait_s = .*$", f"storage_wait_s = {FLEET_STORAGE_WAIT_S}", text)
    text = text.replace("\n[fleet]\n", f"\n[fleet]\n{fleet_lines}", 1)
    path = root / name
    path.write_text(text)
    return str(path)


def spec_fleet(root: Path, gpus: int, argv: list[str]) -> str:
    return _local_slurm(root, "spec_fleet.toml")


# cluster.decline plants its figures over two sweeps (the node's first recorded figure x 0.7 at the second): the
# trend judge is asked to judge from one earlier sweep, not the spec's default 3 (it proves the judge; the history
# rule itself is tested in tests/test_trend_noise.py)
DECLINE_MIN_RUNS = 1


def spec_trend(root: Path, gpus: int, argv: list[str]) -> str:
    return _local_slurm(root, "spec_trend.toml", f"trend_min_runs = {DECLINE_MIN_RUNS}\n")
