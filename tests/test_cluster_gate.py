"""cluster pairs / rollout: the pure parts (argv, record reading, waves, ledger), then, on the second local
3-node Slurm cluster (alt1..alt3: `scripts/local-slurm.sh up --cluster alt`), the real thing: a planted slow node named alone, a rollout
stopped by its reject rate and resumed from its ledger after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainready.cluster.options import FleetOptions
from trainready.cluster.pairs.pairing import PairingOptions
from trainready.cluster.pairs.search import PairsOptions, busbw_of, pair_argv
from trainready.cluster.rollout import load_ledger, parse_waves, plan
from trainready.errors import UsageError
from trainready.records import CheckResult, Level, Metric, Report, Status

REPO = Path(__file__).resolve().parents[1]


def test_pair_step_is_one_srun_over_the_two_nodes(tmp_path):
    fo = FleetOptions(results=tmp_path, partition="gpu", time_limit="5:00", plants={"cluster.slow": "node2"})
    argv = pair_argv(PairsOptions(fo, PairingOptions(), gpus_per_node=8), 2, "node1", "node2")
    assert argv[:4] == ["srun", "--nodes=2", "--ntasks-per-node=8", "--nodelist=node1,node2"]
    assert "--partition=gpu" in argv and "--time=5:00" in argv and "--gpus-per-node=8" in argv
    tail = argv[argv.index("pair-task") + 1:]
    assert tail == ["--results", str(tmp_path), "--round", "2", "--pair", "node1,node2", "--plant", "cluster.slow=node2"]


def test_busbw_read_from_the_pair_record_or_why_not(tmp_path):
    assert busbw_of(tmp_path / "none.json") == (None, f"no record at {tmp_path / 'none.json'}")
    m = Metric.of("comm_busbw_avg", 12.5, "GB/s", op="all_reduce")
    rep = Report("comm", "h", "t", 1.0, "0", {}, (CheckResult("comm.all_reduce", "", Level.QUICK, Status.WARN, "",
                                                               "", (m,), 1.0),))
    (tmp_path / "p.json").write_text(json.dumps(rep.to_json()))
    assert busbw_of(tmp_path / "p.json") == (12.5, "")
    bad = Report("comm", "h", "t", 1.0, "0", {}, (CheckResult("comm.all_reduce", "", Level.QUICK, Status.FAIL,
                                                               "rank 1: 3 wrong elements", "", (m,), 1.0),))
    (tmp_path / "w.json").write_text(json.dumps(bad.to_json()))
    assert busbw_of(tmp_path / "w.json")[0] is None


def test_waves_parse_and_plan():
    assert parse_waves("1,8,64,all") == (1, 8, 64, None)
    for bad in ("0,all", "all,1", "x", ""):
        with pytest.raises(UsageError, match="--waves"):
            parse_waves(bad)
    nodes = [f"n{i}" for i in range(10)]
    assert plan(nodes, (1, 2, None)) == [["n0"], ["n1", "n2"], nodes[3:]]
    assert plan(nodes[:3], (1, 8, 64, None)) == [["n0"], ["n1", "n2"]]  # empty waves dropped
    with pytest.raises(UsageError, match="cover 3 of 10"):
        plan(nodes, (1, 2))


def test_ledger_belongs_to_one_rollout(tmp_path):
    from trainready.cluster.rollout import save

    doc = load_ledger(tmp_path, ["a", "b"], [["a"], ["b"]], 0.1)
    assert [w["state"] for w in doc["waves"]] == ["pending", "pending"]
    doc["waves"][0]["state"] = "done"
    save(tmp_path, doc)
    again = load_ledger(tmp_path, ["a", "b"], [["a"], ["b"]], 0.1)
    assert again["waves"][0]["state"] == "done"
    with pytest.raises(UsageError, match="another rollout"):
        load_ledger(tmp_path, ["a", "b", "c"], [["a"], ["b", "c"]], 0.1)


def test_pairs_names_the_planted_slow_node_only(cli, tmp_path, alt_slurm):
    r = cli("cluster", "pairs", "-w", "alt[1-3]", "--results", str(tmp_path / "acc"), "--spec", "example:local-slurm",
            "--plant", "cluster.slow=alt2", "--json", str(tmp_path / "p.json"), timeout=900)
    doc = json.loads((tmp_path / "p.json").read_text())
    assert r.returncode == 1 and doc["culprits"] == ["alt2"] and doc["undecided"] == [], r.stdout + r.stderr
    assert {n["node"]: n["status"] for n in doc["nodes"]} == {"alt1": "good", "alt2": "bad", "alt3": "good"}
    assert doc["rounds"] <= 3 and all(Path(p["record"]).is_file() for p in doc["pairs"] if p["busbw_gbps"])


ROLL = ("cluster", "rollout", "-w", "alt[1-3]", "--waves", "1,2,all", "--max-reject", "0.4", "--spec",
        "example:local-slurm", "--level", "quick", "--only", "versions,matmul", "--time", "5:00",
        "--no-collective")


def test_rollout_stops_on_reject_rate_and_resumes_from_its_ledger(cli, tmp_path, alt_slurm):
    res = tmp_path / "roll"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    p = subprocess.Popen([sys.executable, "-m", "trainready", *ROLL, "--results", str(res), "--plant",
                          "cluster.fail=alt2"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    ledger = res / "rollout.json"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # kill it once wave 1 is done and wave 2 has started
        doc = json.loads(ledger.read_text()) if ledger.is_file() else None
        if doc and doc["waves"][0]["state"] == "done" and doc["waves"][1]["state"] == "running":
            break
        time.sleep(1)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    first = json.loads(ledger.read_text())["waves"][0]
    assert first["state"] == "done" and first["accepted"] == ["alt1"]
    # the killed collector's array job runs on: the same command picks that run up (its state file), not a new one
    r = cli(*ROLL, "--results", str(res), "--plant", "cluster.fail=alt2", timeout=900)
    doc = json.loads(ledger.read_text())
    assert "wave 1/2: done earlier" in r.stderr, r.stderr
    assert doc["waves"][0]["finished_at"] == first["finished_at"]  # not redone
    assert r.returncode == 1 and doc["status"] == "stopped" and doc["waves"][1]["state"] == "stopped"
    assert list(doc["waves"][1]["rejected"]) == ["alt2"] and "50%" in doc["stopped_reason"]
    assert "alt2: check matmul: FAIL" in doc["stopped_reason"]


def test_rollout_drains_then_revalidates_the_repaired_node(cli, tmp_path, alt_slurm):
    from trainready.cluster.control import slurm as sl

    res = tmp_path / "roll"
    r = cli(*ROLL, "--results", str(res), "--drain", "--plant", "cluster.fail=alt2", timeout=900)
    assert r.returncode == 1, r.stderr
    try:
        info = sl.nodes(["alt2"])["alt2"]
        assert info.drained and info.reason.startswith("trainready:") and "matmul" in info.reason
        r = cli(*ROLL, "--results", str(res), "--drain", "--revalidate", timeout=900)  # alt2 "repaired": no plant
        doc = json.loads((res / "rollout.json").read_text())
        assert r.returncode == 0 and doc["status"] == "done", r.stderr
        assert doc["events"][-1]["action"] == "revalidate" and doc["events"][-1]["resumed"] == ["alt2"]
        assert not sl.nodes(["alt2"])["alt2"].drained
    finally:
        if sl.nodes(["alt2"])["alt2"].ours:
            sl.undrain("alt2")
