"""`--plant cluster.switch_down=NODE+NODE`: those nodes' ranks of the cross-node all_reduce fail at process-group
set-up for real (gloo told to use a network interface no host has), as on nodes whose leaf switch is down.  The
fleet verdict on it runs in the accuracy campaign (tests/test_accuracy_campaign.py, benchmarks/accuracy.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from trainready.cluster.plants import faults
from trainready.cluster.tasks.cross import DOWN_IFNAME
from trainready.errors import UsageError

INIT = """
import datetime, os, socket, torch.distributed as dist
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
store = dist.TCPStore("127.0.0.1", port, 1, True, datetime.timedelta(seconds=20))
try:
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    print("JOINED")
except RuntimeError as e:
    print("FAILED", e)
"""


def test_the_plant_names_every_node_of_the_switch_and_no_other() -> None:
    plants = {"cluster.switch_down": "acc5+acc6"}
    assert not faults.for_node(plants, "acc7").switch_down
    assert faults.for_node(plants, "acc5").switch_down and faults.for_node(plants, "acc6").switch_down
    assert faults.for_node(plants, "acc5").any
    with pytest.raises(UsageError, match=r"cluster\.switch_down=acc5:3: expected NODE\[\+NODE\.\.\.\]"):
        faults.validate({"cluster.switch_down": "acc5:3"})


def test_its_interface_makes_gloo_set_up_fail_for_real() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")}
    healthy = subprocess.run([sys.executable, "-c", INIT], env=env, capture_output=True, text=True, timeout=120)
    assert "JOINED" in healthy.stdout, healthy.stderr[-2000:]
    down = subprocess.run([sys.executable, "-c", INIT], env={**env, "GLOO_SOCKET_IFNAME": DOWN_IFNAME},
                          capture_output=True, text=True, timeout=120)
    assert "FAILED" in down.stdout and f"Unable to find address for: {DOWN_IFNAME}" in down.stdout, down.stderr[-2000:]
