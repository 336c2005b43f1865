"""The fingerprint captured on H100s (benchmarks/fingerprint_repeat.py: two processes on one machine, each the battery
run several times, every digest identical; and a second machine, another serial and VBIOS), with their group keys:
judged together through the real judge and reference code, and on a GPU here compared with them bit for bit."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from fingerprint_records import flip_chunk
from trainready.fingerprint import battery
from trainready.fingerprint.judge import judge
from trainready.fingerprint.key import compute_key, facts_of, group_of, key_diff, key_id
from trainready.fingerprint.reference import against_reference
from trainready.spec.init import derive

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def records() -> list[dict]:
    """[machine 1 process 0, machine 1 process 1, machine 2]."""
    return json.loads((DATA / "fingerprint_h100x1_quick_captured.json").read_text()) + \
        json.loads((DATA / "fingerprint_h100x1b_quick_captured.json").read_text())


def _who(r: dict) -> str:
    return f"GPU {r['index']} (PCI {r['pci_bus_id']}, serial {r['serial']})"


def _as_battery_1(rec: dict) -> dict:
    """A captured record as this build records it: the captures precede the battery's version and its `inputs`
    setting, and their bits are battery 1's (its quick operands are one seeded block each, cast on the device:
    the host's cast and the device's agree bit for bit, docs/measurements.md)."""
    key = compute_key(rec["key"])
    key = dict(key, battery=battery.VERSION, settings={**key["settings"], "inputs": battery.INPUTS})
    return dict(copy.deepcopy(rec), key=key, key_id=key_id(key), **facts_of(rec))



def test_the_captured_records_are_h100s_with_their_whole_key(records):
    a, b, other = records
    assert a["key"] == b["key"] and other["key"]["vbios"] != a["key"]["vbios"] and other["serial"] != a["serial"]
    k = a["key"]
    assert k["model"] == "NVIDIA H100 80GB HBM3" and k["sm_count"] == 132 and k["compute_capability"] == "9.0"
    assert k["mig_mode"] == "disabled" and k["ecc_mode"] == "enabled" and k["driver"] == "580.159.04"
    assert k["cublas"] == "13.1.0" and k["cuda_runtime"] == "13.0" and k["torch"].startswith("2.11.0")
    assert k["settings"]["cublas_workspace_config"] == ":4096:8" and k["settings"]["sdpa_backend"] == "flash"
    assert a["left_out"] == {} and len(a["entries"]) == 56  # FP8 ran: nothing left out on the H100
    assert all(e["ratio"] <= 1.0 and e["repeat_mismatches"] == 0 for e in a["entries"])


def test_two_machines_two_vbios_one_group_a_changed_chunk_named_before_they_agree(records):
    """Machine 2 differs in VBIOS only (and machine 1's record carries the host's threads, which a GPU's key
    leaves out): one group, judged together, so a changed chunk on either machine is named."""
    a, b, other = records
    assert group_of(a) == group_of(b) == group_of(other)
    assert key_diff(a["key"], other["key"]) == ["settings.intra_op_threads: 16 vs None",
                                                "vbios: 96.00.CF.00.01 vs 96.00.DA.00.0C"]
    bad = flip_chunk(other, "gemm-bf16/random-7", 12)
    three = judge([("p0", a), ("p1", b), ("m2", bad)])
    assert [d.line() for d in three.deviations] == [
        "m2: bf16 GEMM 2048x2048x2048, pattern random-7, chunk 12 of 64 differs from 2 identical devices"]
    ok = judge([("p0", a), ("p1", b), ("m2", other)])
    assert ok.deviations == [] and ok.unknown == [] and ok.small == [] and ok.drifted == ["m2"]


def test_the_reference_from_three_agreeing_h100_records_holds_the_other_machine(records):
    """spec init from the three records: two processes of one GPU are one device, and the records' own key ids
    (written when the VBIOS was in the key) differ: one device per key, not written.  From three distinct GPUs of
    one key: written, and another machine compared with it bit for bit."""
    report = {"results": [{"name": "fingerprint", "status": "pass", "details": {"devices": records}}]}
    one = derive({}, report)
    assert one.spec.fingerprint.key_id == "" and any(n.startswith("fingerprint: not written: 1 distinct device(s)")
                                                     for n in one.notes)
    three = [_as_battery_1(records[0]), _as_battery_1(records[2]),
             dict(_as_battery_1(records[2]), serial="1650000000001", uuid="GPU-third")]
    ref = derive({}, {"results": [{"name": "fingerprint", "status": "pass", "details": {"devices": three}}]}).spec
    assert ref.fingerprint.key == three[0]["key"] and len(ref.fingerprint.entries) == 56
    res = against_reference(ref, [flip_chunk(three[1], "gemm-bf16/random-7", 12)], _who)
    assert res.failures == [f"{_who(three[1])}: bf16 GEMM 2048x2048x2048, pattern random-7, chunk 12 of 64 differs "
                            "from the reference server's"]
    ok = against_reference(ref, [three[1]], _who)
    assert ok.failures == [] and ok.warnings == [] and ok.summary["devices"] == 1


def test_a_gpu_here_gives_the_captured_bits_or_says_why_it_is_not_compared(records):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here: the captured H100 records are judged as records above")
    import os

    from trainready.fingerprint.battery import run_battery, settings_record
    from trainready.fingerprint.key import gpu_key

    if os.environ.get("CUBLAS_WORKSPACE_CONFIG") != ":4096:8":
        pytest.skip("run with CUBLAS_WORKSPACE_CONFIG=:4096:8 (the check's ranks set it before cuBLAS starts)")
    key, ident = gpu_key(0, settings_record(True, torch.get_num_threads()))
    live = {"rank": 0, "device": "cuda:0", **ident, "key": key, "key_id": key_id(key), "size": "quick",
            **run_battery("cuda:0", "quick", 2)}
    want = [_as_battery_1(r) for r in records]
    j = judge([(f"captured {i}", r) for i, r in enumerate(want)] + [("here", live)])
    if group_of(live) != group_of(want[0]):  # another model, toolkit or torch: the judge says so, compares nothing
        assert "here" in j.drifted and "here" not in j.named
        assert any(ln.startswith("here: group key") for ln in j.drift)
        return
    assert j.deviations == [] and j.named == set()
    assert {e["id"]: e["digest"] for e in live["entries"]} == {e["id"]: e["digest"] for e in want[0]["entries"]}
