"""External-launcher detection (torchrun / Slurm) and Slurm hostlist expansion."""

from __future__ import annotations

import pytest

from trainready.ranks.env import detect, expand_hostlist
from trainready.errors import UsageError


@pytest.mark.parametrize(
    "text,hosts",
    [
        ("gpu5", ["gpu5"]),
        ("node[01-03,7],gpu5", ["node01", "node02", "node03", "node7", "gpu5"]),
        ("dgx-h200-[098-101]", ["dgx-h200-098", "dgx-h200-099", "dgx-h200-100", "dgx-h200-101"]),
        ("rack[1-2]-n[1,3]", ["rack1-n1", "rack1-n3", "rack2-n1", "rack2-n3"]),
        ("a[9-10],b", ["a9", "a10", "b"]),
    ],
)
def test_expand_hostlist(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("bad", ["node[1-", "node]1[", "node[a-b]", "node[5-3]", ","])
def test_expand_hostlist_rejects(bad: str) -> None:
    with pytest.raises(UsageError):
        expand_hostlist(bad)


def test_detect_torchrun() -> None:
    e = detect({"RANK": "3", "WORLD_SIZE": "16", "LOCAL_RANK": "3", "MASTER_ADDR": "n1", "MASTER_PORT": "29400"})
    assert e is not None and (e.rank, e.world_size, e.local_rank, e.master_addr, e.master_port, e.source) == (
        3, 16, 3, "n1", 29400, "torchrun")
    assert e.torch_env()["WORLD_SIZE"] == "16"


def test_detect_slurm_first_host_is_rendezvous() -> None:
    env = {"SLURM_PROCID": "9", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1",
           "SLURM_JOB_NODELIST": "dgx[07-08]", "SLURM_JOB_ID": "123456"}
    e = detect(env)
    assert e is not None
    assert (e.rank, e.world_size, e.local_rank, e.master_addr, e.source) == (9, 16, 1, "dgx07", "slurm")
    assert e.master_port == 20000 + 123456 % 10000


def test_torchrun_wins_over_slurm_and_salloc_is_local() -> None:
    env = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "x", "SLURM_PROCID": "5", "SLURM_NTASKS": "8",
           "SLURM_JOB_NODELIST": "n1"}
    assert detect(env).source == "torchrun"  # type: ignore[union-attr]
    assert detect({"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_JOB_NODELIST": "n1"}) is None
    assert detect({}) is None


@pytest.mark.parametrize(
    "env,msg",
    [
        ({"RANK": "x", "WORLD_SIZE": "2", "MASTER_ADDR": "h"}, "RANK='x'"),
        ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "h"}, "RANK=2 must be < WORLD_SIZE=2"),
        ({"RANK": "0", "WORLD_SIZE": "2"}, "MASTER_ADDR"),
        ({"SLURM_PROCID": "0", "SLURM_NTASKS": "4"}, "SLURM_JOB_NODELIST"),
        ({"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_NODELIST": "node[1-"},
         r"^slurm launch: SLURM_JOB_NODELIST: hostlist 'node\[1-': unbalanced '\['$"),
    ],
)
def test_detect_bad_env_is_one_line(env: dict[str, str], msg: str) -> None:
    with pytest.raises(UsageError, match=msg):
        detect(env)
