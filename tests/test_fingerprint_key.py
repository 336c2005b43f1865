"""The group key compares devices on what determines their bits (fingerprint/key.py, judge.py): model, SM count,
compute capability, MIG, CUDA runtime, cuBLAS, torch, the battery's version and settings.  VBIOS, driver and ECC
mode are recorded facts, drift on their own; groups whose majorities are identical are judged as one; a device
alone in its group is unknown, said; a reference of another battery version is not compared, said."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from fingerprint_records import flip_chunk
from trainready.checks.fingerprint import outcome_of
from trainready.fingerprint import battery
from trainready.fingerprint.battery import Plants, run_battery, settings_record
from trainready.fingerprint.fleet import aggregate
from trainready.fingerprint.judge import judge
from trainready.fingerprint.key import KEY_FIELDS_CPU, KEY_FIELDS_GPU, compute_key, cpu_key, facts_of, key_id
from trainready.fingerprint.reference import against_reference
from trainready.records import Status
from trainready.spec import default_spec
from trainready.spec.init import derive

DATA = Path(__file__).parent / "data"


def _rec(rank: int, plants: Plants = Plants()) -> dict:
    import torch

    torch.set_num_threads(1)
    key, ident = cpu_key(rank, settings_record(False, 1))
    return {"rank": rank, "device": "cpu", **ident, "key": key, "key_id": key_id(key), "size": "cpu",
            **run_battery("cpu", "cpu", 2, plants)}


def _as_gpu(rec: dict, index: int, serial: str, **key: str) -> dict:
    out = copy.deepcopy(rec)
    out["key"] = dict(out["key"], **key)
    out.update(device=f"cuda:{index}", index=str(index), rank=index, serial=serial, key_id=key_id(out["key"]))
    return out


@pytest.fixture(scope="module")
def good() -> dict:
    return _rec(0)


@pytest.fixture(scope="module")
def flipped() -> dict:
    return _rec(1, Plants(flip="gemm-fp32/ones"))  # a last-bit flip within the float64 bound


@pytest.fixture(scope="module")
def captured() -> list[dict]:
    """Three H100 records: one machine twice (VBIOS 96.00.CF.00.01), another machine (VBIOS 96.00.DA.00.0C)."""
    return json.loads((DATA / "fingerprint_h100x1_quick_captured.json").read_text()) + \
        json.loads((DATA / "fingerprint_h100x1b_quick_captured.json").read_text())


def _who(r: dict, n: int) -> str:
    return f"GPU {n} (PCI {r['pci_bus_id']}, serial {r['serial']})"



def test_two_vbios_versions_are_one_group_so_a_flip_among_them_is_named(captured):
    """Measured: H100s with VBIOS 96.00.CF.00.01 and 96.00.DA.00.0C give all 56 quick digests identical; a
    VBIOS in the key made the second one 'drift, not compared', so a flipped bit there was never judged."""
    p0, p1, m2 = captured
    assert m2["key"]["vbios"] != p0["key"]["vbios"] and m2["serial"] != p0["serial"]
    bad = flip_chunk(m2, "gemm-bf16/random-7", 12)
    j = judge([(_who(p0, 0), p0), (_who(p1, 1), p1), (_who(bad, 2), bad)])
    assert [d.line() for d in j.deviations] == [
        f"{_who(m2, 2)}: bf16 GEMM 2048x2048x2048, pattern random-7, chunk 12 of 64 differs from 2 identical GPUs"]
    ok = judge([(_who(p0, 0), p0), (_who(p1, 1), p1), (_who(m2, 2), m2)])
    assert not ok.deviations and not ok.unknown and not ok.small and len(ok.judged) == 1
    assert ok.drift == [f"{_who(m2, 2)}: VBIOS 96.00.DA.00.0C vs 96.00.CF.00.01 of 2 devices of its group: "
                        "configuration drift (a recorded fact, not in the group key: its bits are compared with "
                        "theirs)"]
    assert facts_of(m2) == {"vbios": "96.00.DA.00.0C", "driver": "580.159.04", "ecc_mode": "enabled"}


def test_driver_and_ecc_are_facts_judged_as_drift_not_a_key(captured):
    """A record of this build: the facts beside the key; another driver and ECC off on one GPU of four."""
    base = captured[2]
    now = dict(base, key=dict(compute_key(base["key"]), battery=battery.VERSION), **facts_of(base))
    recs = [dict(copy.deepcopy(now), index=str(g), serial=f"SN{g}") for g in range(4)]
    recs[3].update(driver="575.57.08", ecc_mode="disabled")
    who = lambda r: f"GPU {r['index']} (PCI {r['pci_bus_id']}, serial {r['serial']})"  # noqa: E731
    bad = outcome_of(default_spec(), recs[:3] + [flip_chunk(recs[3], "exp-fp32/ones", 5)], "quick", 2)
    assert bad.status == Status.FAIL and "GPU 3 (PCI 00000000:00:06.0, serial SN3): fp32 exp 1024x4096, pattern " \
        "ones, chunk 5 of 64 differs from 3 identical GPUs" in bad.message
    ok = outcome_of(default_spec(), recs, "quick", 2)
    assert ok.status == Status.WARN and ok.message.startswith(
        f"{who(recs[3])}: driver 575.57.08 vs 580.159.04 of 3 devices; ECC mode disabled vs enabled of 3 devices of "
        "its group: configuration drift")
    assert outcome_of(default_spec(), recs[:3], "quick", 2).status == Status.PASS


def test_a_device_alone_in_its_group_is_unknown_said_on_its_node(good, flipped):
    fleet = {f"node{n}": [_as_gpu(good, g, f"SN{n}{g}") for g in range(2)] for n in (1, 2, 3)}
    fleet["node3"][1] = _as_gpu(flipped, 1, "SN31", torch="2.12.0")  # replaced: its own torch and a flipped bit
    res = aggregate(fleet)
    assert res.drains == [] and sorted(res.alone) == ["node3"]
    assert res.alone["node3"] == [f"unknown: node3 GPU 1 (serial SN31): alone in its group key "
                                  f"{key_id(compute_key(fleet['node3'][1]['key']))}: no identical device to compare "
                                  "its bits with (unknown; its answers held to float64 only)"]
    assert "not compared with them" in res.drift["node3"][0]
    same = {n: [_as_gpu(good, g, f"SN{n}{g}") for g in range(2)] for n in ("node1", "node2", "node3")}
    same["node3"][1] = _as_gpu(good, 1, "SN31", torch="2.12.0")  # its own torch, the same bits: merged, judged
    ok = aggregate(same)
    assert ok.alone == {} and ok.unknown == [] and ok.drains == []
    assert ok.drift["node3"][0].endswith("configuration drift, its bits identical to theirs: compared with them")


def test_groups_whose_majorities_are_identical_are_judged_as_one(good, flipped):
    two_and_two = [("a0", _as_gpu(good, 0, "a0")), ("a1", _as_gpu(good, 1, "a1")),
                   ("b0", _as_gpu(good, 0, "b0", torch="2.12.0")), ("b1", _as_gpu(flipped, 1, "b1", torch="2.12.0"))]
    split = judge(two_and_two)  # b's two disagree: no majority of b to merge, each group too small to judge
    assert len(split.judged) == 2 and len(split.small) == 2 and not split.deviations
    merged = judge(two_and_two[:3] + [("b2", _as_gpu(good, 2, "b2", torch="2.12.0")),
                                      ("b1", _as_gpu(flipped, 1, "b1", torch="2.12.0"))])
    assert len(merged.judged) == 1 and not merged.small
    assert [d.line() for d in merged.deviations] == [
        "b1: fp32 GEMM 96x96x96, pattern ones, chunk 13 of 64 differs from 4 identical devices"]


def test_a_reference_of_another_battery_version_is_not_compared_and_said(good, flipped):
    ref = derive({}, {"results": [{"name": "fingerprint", "status": "pass", "details": {"devices": [
        dict(good, rank=r) for r in range(3)]}}]}).spec
    assert ref.fingerprint.key["battery"] == battery.VERSION
    later = dict(flipped, key=dict(flipped["key"], battery=battery.VERSION + 1))
    later["key_id"] = key_id(later["key"])
    res = against_reference(ref, [later], lambda r: f"rank {r['rank']}")
    assert res.failures == [] and res.warnings[0].startswith(
        f"reference fingerprint not compared: battery {battery.VERSION} vs {battery.VERSION + 1}")
    out = outcome_of(ref, [dict(later, rank=r) for r in range(3)], "cpu", 2)
    assert out.status == Status.WARN and "not compared: battery 1 vs 2" in out.message
    old = dict(ref.fingerprint.key)
    old.pop("battery")  # a spec written before the battery had a version
    import dataclasses

    unversioned = dataclasses.replace(ref, fingerprint=dataclasses.replace(ref.fingerprint, key=old))
    assert against_reference(unversioned, [good], str).warnings[0].startswith(
        "reference fingerprint not compared: battery unversioned vs 1")
    same = against_reference(ref, [flipped], lambda r: f"rank {r['rank']}")
    assert same.warnings == [] and len(same.failures) == 1


def test_the_key_is_pinned_to_the_battery_version():
    """The key's wording is part of the battery's version: a change to a field or a setting's text without a new
    battery.VERSION would silently make every earlier reference 'another key'."""
    assert battery.VERSION == 1
    assert KEY_FIELDS_GPU == ("model", "sm_count", "compute_capability", "mig_mode", "cuda_runtime", "cublas", "torch",
                              "battery", "settings")
    assert KEY_FIELDS_CPU == ("model", "cpu_capability", "blas", "torch", "battery", "settings")
    common = {"fp32_gemm": "ieee (tf32 for the TF32 GEMM)", "reduced_precision_reduction": "off",
              "deterministic_algorithms": "on", "stream": "default",
              "inputs": "host float64, random in 4194304-element seeded blocks, cast on the device"}
    assert settings_record(False, 1) == {**common, "cublas_workspace_config": "n/a", "sdpa_backend": "math",
                                         "intra_op_threads": "1"}
    gpu = settings_record(True, 16)
    assert {k: v for k, v in gpu.items() if k != "cublas_workspace_config"} == {**common, "sdpa_backend": "flash"}
    key, _ = cpu_key(0, settings_record(False, 1))
    assert tuple(key) == KEY_FIELDS_CPU and key["battery"] == 1
