"""The cross-node collective (cluster/collective.py) measures a busbw below its bound again, in the same step,
before it fails: two real gloo ranks with torchrun's env, the fleet's expectation set from a healthy run of the
same two ranks.  A planted slow fabric (`comm.slow_pct`, every collective 10x longer) fails both measurements;
the same fault in the first measurement only (`comm.once`, a burst of another job's traffic) is cleared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from trainready.ranks.launch import free_port

SRC = str(Path(__file__).resolve().parents[1] / "src")
WAIT_S = 120.0  # two ranks, two torch imports and up to two sweeps on a loaded 2-core machine
RANK = """
import dataclasses, json, sys
from trainready.cluster.collective import cross_node_options, fleet_spec, sweep_to_record
from trainready.ranks.env import detect
from trainready.spec import load_spec

spec, source = load_spec("example:cpu-default")
spec = dataclasses.replace(spec, fleet=dataclasses.replace(spec.fleet, expected_busbw_gbps={"all_reduce": float(sys.argv[1])}))
ext = detect()
opts = cross_node_options(spec, ext.world_size, faults=json.loads(sys.argv[3]))
sweep_to_record(opts, ext, fleet_spec(spec), source, sys.argv[2], {"fleet": True}, "test collective", measure_again=True)
"""


def collective(tmp_path: Path, expect_gbps: float, faults: dict[str, Any]) -> dict[str, Any]:
    """Rank 0's all_reduce result of one two-rank collective (the record rank 0 writes)."""
    port, out = free_port(), tmp_path / f"comm-{len(list(tmp_path.glob('comm-*')))}.json"
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "PYTHONPATH": SRC, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        procs.append(subprocess.Popen([sys.executable, "-c", RANK, str(expect_gbps), str(out), json.dumps(faults)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    texts = [p.communicate(timeout=WAIT_S)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], texts
    doc = json.loads(out.read_text())
    return next(r for r in doc["results"] if r["name"] == "comm.all_reduce")


def busbw(res: dict[str, Any]) -> float:
    return float(next(m["value"] for m in res["metrics"] if m["name"] == "comm_busbw_avg"))


def test_a_slow_fabric_fails_twice_and_a_burst_is_measured_again_and_cleared(tmp_path: Path) -> None:
    healthy = collective(tmp_path, 1e-9, {})
    assert healthy["status"] == "pass" and "measured again" not in healthy["message"], healthy["message"]
    # the bound (x comm.min_fraction 0.8) at a fifth of the healthy figure: load noise stays above it, a 10x
    # slower fabric falls below it
    expect = busbw(healthy) / 4
    slow = collective(tmp_path, expect, {"slow_pct": 900.0})
    assert slow["status"] == "fail", slow["message"]
    assert "measured again: the first run failed it too" in slow["message"], slow["message"]
    burst = collective(tmp_path, expect, {"slow_pct": 900.0, "once": True})
    assert burst["status"] == "pass", burst["message"]
    assert "measured again: the first run's figure was below" in burst["message"] and "not a fault" in burst["message"]
    assert burst["details"]["first_run"]["message"].startswith("all_reduce: busbw"), burst["details"]
