"""The thread settings of local ranks are the launcher's own (ranks/launch.py, ranks/omp.py), so a user's run
and a test's run are the same program: intra-op threads = usable cores / local ranks, passive OpenMP waits in
every rank process and in no other, a policy the user gave kept."""

from __future__ import annotations

import importlib
import os

import pytest

from trainready.devices import world as devices

launch_mod = importlib.import_module("trainready.ranks.launch")  # the module (trainready.ranks exports the function)


def rank_threads(ctx) -> tuple[str | None, int]:  # type: ignore[no-untyped-def]
    """Run in each rank: what OpenMP and torch were given."""
    import torch

    return os.environ.get("OMP_WAIT_POLICY"), torch.get_num_threads()


@pytest.mark.parametrize("cores,world,threads", [(6, 2, 3), (2, 8, 1)])
def test_each_rank_gets_its_share_of_the_usable_cores_and_waits_passively(monkeypatch, cores, world, threads) -> None:
    before = os.environ.get("OMP_WAIT_POLICY")
    monkeypatch.setattr(launch_mod, "usable_cores", lambda: cores)
    res = launch_mod.launch("test_rank_threads:rank_threads", world, "gloo", timeout_s=60)
    assert res.ok, res.describe()
    # the forkserver read the policy when it started (this process's environment then, as now)
    assert res.values == [(before or "PASSIVE", threads)] * world
    assert os.environ.get("OMP_WAIT_POLICY") == before  # the launching process's own environment: untouched


def test_usable_cores_are_the_affinity_set_not_every_core_of_the_host(monkeypatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 7}, raising=False)  # `taskset -c 3,7`, a Slurm task
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert devices.usable_cores() == 2 and devices.gloo_rank_limit() == 8
