"""Fleet aggregation of fingerprints (fingerprint/fleet.py) on real CPU battery records: a deviating GPU rejected
with an actionable line before a healthy fleet passes; a shared wrong answer drains none; drift is not corruption;
a group too small for a strict majority is unknown."""

from __future__ import annotations

import copy

import pytest

from trainready.fingerprint.battery import Plants, run_battery, settings_record
from trainready.fingerprint.fleet import aggregate
from trainready.fingerprint.key import cpu_key, key_id


def _rec(rank: int, plants: Plants = Plants()) -> dict:
    import torch

    torch.set_num_threads(1)
    key, ident = cpu_key(rank, settings_record(False, 1))
    return {"rank": rank, "device": "cpu", **ident, "key": key, "key_id": key_id(key), "size": "cpu",
            **run_battery("cpu", "cpu", 2, plants)}


def _as_gpu(rec: dict, index: int, serial: str) -> dict:
    """A CPU record dressed as GPU `index` with a board serial (the aggregation reads only the record)."""
    out = copy.deepcopy(rec)
    out.update(device=f"cuda:{index}", index=str(index), rank=index, serial=serial)
    return out


@pytest.fixture(scope="module")
def good() -> dict:
    return _rec(0)


def _fleet(good: dict, nodes: int = 4, gpus: int = 2) -> dict[str, list[dict]]:
    return {f"node{n}": [_as_gpu(good, g, f"1651{n}{g}") for g in range(gpus)] for n in range(1, nodes + 1)}


def test_deviating_gpu_is_rejected_with_an_actionable_line_before_a_healthy_fleet_passes(good):
    fleet = _fleet(good)
    fleet["node3"][1] = _as_gpu(_rec(1, Plants(flip="softmax-bf16/walking-bits")), 1, "165131")
    res = aggregate(fleet)
    assert res.drains == ["node3"]
    assert res.rejected["node3"] == ["node3 GPU 1 (serial 165131): bf16 softmax 32x256, pattern walking-bits, "
                                     "chunk 13 of 64 differs from 7 identical GPUs"]
    assert res.mismatches["node3"] == {"0": 0, "1": 1} and res.mismatches["node1"] == {"0": 0, "1": 0}
    assert not res.fleet_wide and not res.drift and not res.unknown
    ok = aggregate(_fleet(good))
    assert ok.drains == [] and ok.lines() == [] and ok.groups == {good["key_id"]: 8}


def test_intermittent_gpu_is_rejected(good):
    fleet = _fleet(good)
    fleet["node2"][0] = _as_gpu(_rec(0, Plants(intermittent=True)), 0, "165120")
    res = aggregate(fleet)
    assert res.drains == ["node2"] and "node2 GPU 0 (serial 165120): intermittent" in res.rejected["node2"][0]


def test_a_wrong_answer_every_gpu_shares_is_fleet_wide_and_drains_none(good):
    bad = _rec(0, Plants(shared=True))
    fleet = _fleet(bad)
    fleet["node4"][1] = _as_gpu(good, 1, "165141")  # the one GPU that is right differs from a wrong majority
    res = aggregate(fleet)
    assert res.drains == []
    assert len(res.fleet_wide) == 1 and "gemm-bf16/random-7" in res.fleet_wide[0]
    assert "a wrong answer they share" in res.fleet_wide[0] and "drains none" in res.lines()[0]
    assert any(u.startswith("node4 GPU 1 (serial 165141): gemm-bf16/random-7 differs from a majority that is itself "
                            "wrong") for u in res.unknown)


def test_drift_is_reported_never_rejected(good):
    fleet = _fleet(good)
    for rec in fleet["node2"]:
        rec["key"] = dict(rec["key"], torch="2.12.0")
        rec["key_id"] = key_id(rec["key"])
    rec = fleet["node2"][0]
    rec["entries"][3]["digest"] = "0" * 64  # other bits under another key: drift, not corruption
    res = aggregate(fleet)
    assert res.drains == [] and sorted(res.drift) == ["node2"] and len(res.drift["node2"]) == 2
    assert "torch: " in res.drift["node2"][0] and "configuration drift" in res.drift["node2"][0]
    assert res.groups[good["key_id"]] == 6
    # the drifted pair is a group of two: their disagreement is unknown, never a failure
    assert any("2 device(s) of key" in u for u in res.unknown)


def test_a_tie_names_no_one(good):
    fleet = _fleet(good, nodes=2, gpus=2)
    flipped = _rec(0, Plants(flip="sum-fp32/ones"))
    fleet["node2"] = [_as_gpu(flipped, 0, "a"), _as_gpu(flipped, 1, "b")]
    res = aggregate(fleet)
    assert res.drains == [] and any(u.startswith("sum-fp32/ones: 4 device(s)") for u in res.unknown)
