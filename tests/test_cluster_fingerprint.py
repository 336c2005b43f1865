"""The fleet's fingerprints on the local 3-node Slurm cluster (scripts/local-slurm.sh, 2 gloo ranks a node): a
flipped bit in one rank of one node is named by the fleet (its node has only 2 ranks: too few to judge alone)
and rejects that node, before a healthy run accepts all three with every rank of every node agreeing; a node
whose key drifted is warned as drift, never rejected for its bits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.slow


def _run(res: Path, *extra: str):
    return run_cli("cluster", "run", "-w", "alt1,alt2,alt3", "--results", str(res), "--spec", "example:local-slurm",
                   "--only", "versions,fingerprint", "--reference", "alt1", "--time", "4:00", "--no-collective",
                   *extra, timeout=600)


def test_a_flipped_bit_in_one_node_is_named_by_the_fleet_then_all_agree(alt_slurm, tmp_path):
    bad = _run(tmp_path / "bad", "--plant", "cluster.fail=alt2:fingerprint")
    assert bad.returncode == 3, bad.stderr[-2000:]  # planted: records.PLANTED_EXIT
    doc = json.loads((tmp_path / "bad" / "fleet.json").read_text())
    verdict = {n["node"]: n for n in doc["nodes"]}
    assert [n for n, v in verdict.items() if v["verdict"] == "reject"] == ["alt2"]
    assert verdict["alt2"]["reasons"] == ["fingerprint: alt2 rank 0: bf16 GEMM 96x96x96, pattern random-7, chunk 13 "
                                          "of 64 differs from 5 identical devices"]
    fp = next(c for c in doc["cross"] if c["name"] == "cluster.fingerprint")
    assert fp["status"] == "fail"
    good = _run(tmp_path / "good")
    assert good.returncode == 0, good.stderr[-2000:]
    doc = json.loads((tmp_path / "good" / "fleet.json").read_text())
    assert all(n["verdict"] == "accept" for n in doc["nodes"])
    fp = next(c for c in doc["cross"] if c["name"] == "cluster.fingerprint")
    assert fp["status"] == "pass" and fp["message"].startswith("6 device(s) in 1 key group(s)")


def test_a_node_whose_key_drifted_is_reported_as_drift_never_as_corruption(alt_slurm, tmp_path):
    r = _run(tmp_path / "drift", "--plant", "cluster.drift=alt3")
    assert r.returncode == 3, r.stderr[-2000:]
    doc = json.loads((tmp_path / "drift" / "fleet.json").read_text())
    alt3 = next(n for n in doc["nodes"] if n["node"] == "alt3")
    assert not any(x.startswith("fingerprint") for x in alt3["reasons"])  # rejected for its versions, not its bits
    drift = [w for w in alt3["warnings"] if w.startswith("fingerprint: alt3 rank")]
    assert len(drift) == 2 and all("configuration drift" in w for w in drift), alt3["warnings"]
    fp = next(c for c in doc["cross"] if c["name"] == "cluster.fingerprint")
    assert fp["status"] == "warn" and "1 node(s) drifted" in fp["message"]
