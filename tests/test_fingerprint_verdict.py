"""The fleet verdict with fingerprints (cluster/judge/fingerprints.py), each node's `fingerprint` result made by the
real check from real battery records (checks/fingerprint.py `outcome_of`, as `trainready node` writes it): a node
whose GPU computes other bits than its identical peers is rejected for its own reason before a healthy fleet is
accepted; a wrong answer devices of several nodes share fails the fleet and rejects (drains) none, though every
node's own check failed for it; one node alone with such an answer is rejected for it as software; a drifted
node is warned, not rejected."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from trainready.checks import REGISTRY
from trainready.checks.fingerprint import outcome_of
from trainready.cluster.judge import synthetic
from trainready.cluster.judge.verdict import decide
from trainready.cluster.repair.reasons import SOFTWARE, class_of
from trainready.fingerprint.battery import Plants, run_battery, settings_record
from trainready.fingerprint.key import cpu_key, key_id
from trainready.records import CheckResult, Status
from trainready.spec import load_spec

SPEC = load_spec("example:h200-8x")[0]


def _rec(plants: Plants = Plants()) -> dict:
    import torch

    torch.set_num_threads(1)
    key, ident = cpu_key(0, settings_record(False, 1))
    return {"rank": 0, "device": "cpu", **ident, "key": key, "key_id": key_id(key), "size": "cpu",
            **run_battery("cpu", "cpu", 2, plants)}


@pytest.fixture(scope="module")
def recs() -> dict[str, dict]:
    return {"good": _rec(), "flip": _rec(Plants(flip="gemm-fp32/ones")), "shared": _rec(Plants(shared=True))}


def _gpu(rec: dict, g: int, **key: str) -> dict:
    out = dict(rec, device=f"cuda:{g}", index=str(g), rank=g, serial=f"SN{g}", pci_bus_id=f"0000:{g:02X}:00.0")
    if key:
        out["key"] = dict(rec["key"], **key)
        out["key_id"] = key_id(out["key"])
    return out


def _result(devices: list[dict]) -> dict:
    """The node's `fingerprint` result as the check writes it into the node's record."""
    check = REGISTRY["fingerprint"]
    o = outcome_of(SPEC, devices, "cpu", 2)
    return CheckResult(check.name, check.title, check.level, o.status, o.message, o.remedy, o.metrics, 0.0,
                       o.details).to_json()


def _fleet(per_node: dict[str, list[dict]]):
    inputs = synthetic.fleet(len(per_node), 2)
    out = []
    for ni in inputs:
        rec = copy.deepcopy(ni.record)
        rec["report"]["results"].append(_result(per_node[ni.node]))
        out.append(dataclasses.replace(ni, record=rec))
    return out


def _own(v, node: str) -> dict:
    return next(r for r in v.nodes if r.node == node).to_json()


def test_a_gpu_outside_its_peers_rejects_its_node_before_a_healthy_fleet_passes(recs):
    g = recs["good"]
    per = {f"gpu000{i}": [_gpu(g, 0), _gpu(g, 1)] for i in range(1, 4)}
    per["gpu0002"][1] = _gpu(recs["flip"], 1)
    fleet = _fleet(per)
    node = next(r for r in fleet[1].record["report"]["results"] if r["name"] == "fingerprint")
    assert node["status"] == "warn"  # two GPUs: no majority within the node names one; the fleet's does
    v = decide(fleet, SPEC, [], [])
    assert v.rejected == ["gpu0002"]
    assert _own(v, "gpu0002")["causes"] == ["fingerprint"]
    assert _own(v, "gpu0002")["reasons"] == ["fingerprint: gpu0002 GPU 1 (serial SN1): fp32 GEMM 96x96x96, pattern "
                                             "ones, chunk 13 of 64 differs from 5 identical GPUs"]
    cr = next(c for c in v.cross if c.name == "cluster.fingerprint")
    assert cr.status == Status.FAIL and not v.fleet_failures
    ok = decide(_fleet({f"gpu000{i}": [_gpu(g, 0), _gpu(g, 1)] for i in range(1, 4)}), SPEC, [], [])
    assert ok.rejected == [] and ok.exit_code == 0
    assert next(c for c in ok.cross if c.name == "cluster.fingerprint").status == Status.PASS


def test_a_wrong_answer_several_nodes_share_fails_the_fleet_and_rejects_no_node(recs):
    s = recs["shared"]
    fleet = _fleet({f"gpu000{i}": [_gpu(s, 0), _gpu(s, 1)] for i in range(1, 4)})
    for ni in fleet:  # every node's own check failed for it: the input is what the check writes
        r = next(r for r in ni.record["report"]["results"] if r["name"] == "fingerprint")
        assert r["status"] == "fail" and "a wrong answer they share" in r["message"]
        assert r["details"]["failed_for"] == ["shared"]
    v = decide(fleet, SPEC, [], [])
    assert v.rejected == [] and v.exit_code == 1
    assert [c.name for c in v.fleet_failures] == ["cluster.fingerprint"]
    msg = v.fleet_failures[0].message
    assert msg.startswith("fleet-wide: all 6 devices of key") and "(on 3 node(s)); drains none" in msg


def test_a_wrong_answer_of_one_node_alone_rejects_it_as_software(recs):
    g, s = recs["good"], recs["shared"]
    per = {f"gpu000{i}": [_gpu(g, 0), _gpu(g, 1)] for i in (1, 2)}
    per["gpu0003"] = [_gpu(s, k, torch="2.12.0+other") for k in (0, 1)]  # its own image: another torch
    v = decide(_fleet(per), SPEC, [], [])
    assert v.rejected == ["gpu0003"] and not v.fleet_failures
    own = _own(v, "gpu0003")
    assert own["causes"] == ["fingerprint answer"] and class_of(own["causes"][0]) == SOFTWARE
    assert "only this node's devices give it" in own["reasons"][0]
    assert any("configuration drift" in w for w in own["warnings"])


def test_a_reference_mismatch_is_still_the_node_s_own(recs):
    """A failed check for anything but a shared answer stays its node's reason (the fleet cannot re-judge it)."""
    g = recs["good"]
    fleet = _fleet({f"gpu000{i}": [_gpu(g, 0), _gpu(g, 1)] for i in range(1, 4)})
    r = next(r for r in fleet[0].record["report"]["results"] if r["name"] == "fingerprint")
    r.update(status="fail", message="GPU 0: fp32 GEMM ... differs from the reference server's")
    r["details"]["failed_for"] = ["reference"]
    v = decide(fleet, SPEC, [], [])
    assert v.rejected == ["gpu0001"] and _own(v, "gpu0001")["causes"] == ["check fingerprint"]


def test_drift_warns_and_rejects_no_node(recs):
    g = recs["good"]
    per = {f"gpu000{i}": [_gpu(g, 0), _gpu(g, 1)] for i in range(1, 4)}
    per["gpu0003"] = [_gpu(g, k, torch="2.12.0") for k in (0, 1)]
    v = decide(_fleet(per), SPEC, [], [])
    assert v.rejected == []
    assert any("configuration drift" in w for w in _own(v, "gpu0003")["warnings"])


def test_one_device_alone_is_still_held_to_float64(recs):
    """A 1-GPU node (or two GPUs, too few for a majority): no peer says which bits are right, but a wrong answer
    is wrong on its own: the selftest's fingerprint.shared was missed on a 1x H100 (every answer 'within its
    float64 rounding bound' while the flip was planted)."""
    alone = outcome_of(SPEC, [_gpu(recs["shared"], 0)], "cpu", 2)
    assert alone.status == Status.FAIL and "the one device of key" in alone.message
    two = outcome_of(SPEC, [_gpu(recs["shared"], 0), _gpu(recs["shared"], 1)], "cpu", 2)
    assert two.status == Status.FAIL and "all 2 devices" in two.message
    ok = outcome_of(SPEC, [_gpu(recs["good"], 0)], "cpu", 2)
    assert ok.status == Status.PASS and "1 device(s) of one key, fewer than 3" in ok.message


def _off(rec: dict, ids: set[str]) -> dict:
    """The record with other bits in the first chunk of each entry of `ids` (as a GPU computing them wrongly)."""
    out = copy.deepcopy(rec)
    for e in out["entries"]:
        if e["id"] in ids:
            e["digest"] = "f" * 64
            e["chunks"] = "0" * 64 + e["chunks"][64:]
    return out


def test_a_gpu_off_in_many_entries_is_said_once_per_op_with_a_count(recs):
    """The node's causes, its reasons (Slurm's reason, the drain text, INDEX.md start from them): one line per GPU
    and op; every entry stays in the fleet check's details."""
    g = recs["good"]
    fp32 = sorted(e["id"] for e in g["entries"] if e["id"].startswith("gemm-fp32/"))[:3]
    bf16 = sorted(e["id"] for e in g["entries"] if e["id"].startswith("gemm-bf16/"))[:2]
    assert len(fp32) == 3 and len(bf16) == 2
    per = {f"gpu000{i}": [_gpu(g, 0), _gpu(g, 1)] for i in range(1, 4)}
    per["gpu0002"][1] = _gpu(_off(g, set(fp32) | set(bf16)), 1)
    v = decide(_fleet(per), SPEC, [], [])
    node = next(n for n in v.nodes if n.node == "gpu0002")
    assert len(node.causes) != 5  # not one cause per battery entry
    assert node.causes == ("fingerprint", "fingerprint") and len(node.reasons) == 2
    fp32_line = next(r for r in node.reasons if "fp32 GEMM" in r)
    assert fp32_line.startswith("fingerprint: gpu0002 GPU 1 (serial SN1): fp32 GEMM")
    assert fp32_line.endswith("(+2 more fp32 GEMM entries on this GPU)")
    assert next(r for r in node.reasons if "bf16 GEMM" in r).endswith("(+1 more bf16 GEMM entry on this GPU)")
    check = next(r for r in v.cross if r.name == "cluster.fingerprint")
    assert len(check.details["rejected"]["gpu0002"]) == 5  # the full list stays in the record
