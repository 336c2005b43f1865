"""The fleet verdict with fingerprints (cluster/judge/fingerprints.py): a node whose GPU computes other bits than
its identical peers is rejected for its own reason before a healthy fleet is accepted; a wrong answer every GPU
shares fails the fleet and rejects (drains) no node; a drifted node is warned, not rejected."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from trainready.cluster.judge import synthetic
from trainready.cluster.judge.verdict import decide
from trainready.fingerprint.battery import Plants, run_battery, settings_record
from trainready.fingerprint.key import cpu_key, key_id
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


def _with_prints(ni, devices: list[dict]):
    rec = copy.deepcopy(ni.record)
    rec["report"]["results"].append({"name": "fingerprint", "status": "pass", "message": "", "metrics": [],
                                     "details": {"devices": devices}})
    return dataclasses.replace(ni, record=rec)


def _gpu(rec: dict, g: int) -> dict:
    return dict(rec, device=f"cuda:{g}", index=str(g), rank=g, serial=f"SN{g}")


def _fleet(per_node: dict[str, list[dict]]):
    inputs = synthetic.fleet(len(per_node), 2)
    return [_with_prints(ni, per_node[ni.node]) for ni in inputs]


def test_a_gpu_outside_its_peers_rejects_its_node_before_a_healthy_fleet_passes(recs):
    g = recs["good"]
    per = {f"gpu000{i}": [_gpu(g, 0), _gpu(g, 1)] for i in range(1, 4)}
    per["gpu0002"][1] = _gpu(recs["flip"], 1)
    v = decide(_fleet(per), SPEC, [], [])
    assert v.rejected == ["gpu0002"]
    node = next(n for n in v.nodes if n.node == "gpu0002")
    assert node.causes == ("fingerprint",)
    assert node.reasons == ("fingerprint: gpu0002 GPU 1 (serial SN1): fp32 GEMM 96x96x96, pattern ones, chunk 13 "
                            "of 64 differs from 5 identical GPUs",)
    cr = next(c for c in v.cross if c.name == "cluster.fingerprint")
    assert cr.status.value == "fail" and not v.fleet_failures
    ok = decide(_fleet({f"gpu000{i}": [_gpu(g, 0), _gpu(g, 1)] for i in range(1, 4)}), SPEC, [], [])
    assert ok.rejected == [] and ok.exit_code == 0
    assert next(c for c in ok.cross if c.name == "cluster.fingerprint").status.value == "pass"


def test_a_shared_wrong_answer_fails_the_fleet_and_drains_none(recs):
    s = recs["shared"]
    v = decide(_fleet({f"gpu000{i}": [_gpu(s, 0), _gpu(s, 1)] for i in range(1, 4)}), SPEC, [], [])
    assert v.rejected == [] and v.exit_code == 1
    assert [c.name for c in v.fleet_failures] == ["cluster.fingerprint"]
    assert "fleet-wide" in v.fleet_failures[0].message and "drains none" in v.fleet_failures[0].message


def test_drift_warns_and_rejects_no_node(recs):
    g = recs["good"]
    per = {f"gpu000{i}": [_gpu(g, 0), _gpu(g, 1)] for i in range(1, 4)}
    other = dict(g["key"], torch="2.12.0")
    per["gpu0003"] = [dict(_gpu(g, k), key=other, key_id=key_id(other)) for k in (0, 1)]
    v = decide(_fleet(per), SPEC, [], [])
    assert v.rejected == []
    node = next(n for n in v.nodes if n.node == "gpu0003")
    assert any("configuration drift" in w for w in node.warnings)


def test_one_device_alone_is_still_held_to_float64(recs):
    """A 1-GPU node (or two GPUs, too few for a majority): no peer says which bits are right, but a wrong answer
    is wrong on its own: the selftest's fingerprint.shared was missed on a 1x H100 (every answer 'within its
    float64 rounding bound' while the flip was planted)."""
    from trainready.fingerprint.judge import judge

    alone = judge([("GPU 0", _gpu(recs["shared"], 0))])
    assert [s.entry for s in alone.shared] == ["gemm-bf16/random-7"] and alone.shared[0].devices == 1
    assert "the one device of key" in alone.shared[0].line() and "a wrong answer" in alone.shared[0].line()
    two = judge([("GPU 0", _gpu(recs["shared"], 0)), ("GPU 1", _gpu(recs["shared"], 1))])
    assert [s.devices for s in two.shared] == [2] and "all 2 devices" in two.shared[0].line()
    assert judge([("GPU 0", _gpu(recs["good"], 0))]).shared == []


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
