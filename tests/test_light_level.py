"""The `light` level: the version chain and the manifest alone, for exercising fleet orchestration on many
nodes, yet a real node record per node (the same schema, report and manifest as any level)."""

from __future__ import annotations

import json

from conftest import run_cli
from trainready.checks import select
from trainready.cluster.tasks.layout import NODE_SCHEMA
from trainready.records import Level


def test_light_is_versions_alone_and_every_deeper_level_includes_it():
    light = [c.name for c in select(None, None, Level.LIGHT)]
    quick = {c.name for c in select(None, None, Level.QUICK)}
    standard = {c.name for c in select(None, None, Level.STANDARD)}
    assert "matmul" not in light and "allreduce" not in light  # the seconds-long checks are quick's
    assert light == ["versions", "fabric"]  # the fabric reads files and NVML: milliseconds, at every level
    assert set(light) < quick < standard
    assert [c.name for c in select(["matmul"], None, Level.LIGHT)] == ["matmul"]  # --only wins over the level


def test_light_node_task_writes_a_real_node_record(tmp_path):
    env = {"SLURMD_NODENAME": "node7", "SLURM_ARRAY_TASK_ID": "6", "SLURM_JOB_ID": "4242"}
    p = run_cli("cluster", "node-task", "--results", str(tmp_path), "--level", "light", "--spec",
                "example:local-slurm", env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads((tmp_path / "nodes" / "node7.json").read_text())
    assert doc["schema"] == NODE_SCHEMA and doc["node"] == "node7"
    assert doc["slurm"]["SLURM_JOB_ID"] == "4242"
    ran = {r["name"]: r["status"] for r in doc["report"]["results"]}
    assert ran == {"versions": "pass", "fabric": "skip"}  # no RDMA device, no NVLink here: not applicable
    assert doc["versions"]["torch"] and doc["manifest"]["host"]


def test_light_is_offered_by_node_and_cluster_run():
    for cmd in (("node",), ("cluster", "run")):
        p = run_cli(*cmd, "--help")
        assert "light" in p.stdout, cmd
    bad = run_cli("node", "--level", "feather")
    assert bad.returncode == 2 and "light" in bad.stderr + bad.stdout
