"""The fingerprint captured on a 1x H100 (benchmarks/fingerprint_repeat.py: two processes, each the battery run
several times, every digest identical), with its group key: judged as a reference here, and on a GPU of the same
key (a later run, another machine of the same model) compared with it bit for bit."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from trainready.fingerprint.judge import judge
from trainready.fingerprint.reference import against_reference
from trainready.spec.init import derive

DATA = Path(__file__).parent / "data" / "fingerprint_h100x1_quick_captured.json"


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return json.loads(DATA.read_text())


def _who(r: dict) -> str:
    return f"GPU {r['index']} (PCI {r['pci_bus_id']}, serial {r['serial']})"


def test_the_captured_record_is_an_h100_with_its_whole_key(records):
    a, b = records
    assert a["key_id"] == b["key_id"] and a["key"] == b["key"]
    k = a["key"]
    assert k["model"] == "NVIDIA H100 80GB HBM3" and k["sm_count"] == 132 and k["compute_capability"] == "9.0"
    assert k["mig_mode"] == "disabled" and k["ecc_mode"] == "enabled" and k["driver"] == "580.159.04"
    assert k["cublas"] == "13.1.0" and k["cuda_runtime"] == "13.0" and k["torch"].startswith("2.11.0")
    assert k["settings"]["cublas_workspace_config"] == ":4096:8" and k["settings"]["sdpa_backend"] == "flash"
    assert a["left_out"] == {} and len(a["entries"]) == 56  # FP8 ran: nothing left out on the H100
    assert all(e["ratio"] <= 1.0 and e["repeat_mismatches"] == 0 for e in a["entries"])


def test_a_changed_chunk_is_named_before_two_processes_agree_bit_for_bit(records):
    a, b = records
    ref = derive({}, {"results": [{"name": "fingerprint", "status": "pass", "details": {"devices": [a]}}]}).spec
    bad = copy.deepcopy(b)
    e = next(x for x in bad["entries"] if x["id"] == "gemm-bf16/random-7")
    e["digest"] = "f" * 64
    e["chunks"] = e["chunks"][:8 * 11] + "00000000" + e["chunks"][8 * 12:]
    res = against_reference(ref, [bad], _who)
    assert res.failures == [f"{_who(b)}: bf16 GEMM 2048x2048x2048, pattern random-7, chunk 12 of 64 differs from the "
                            "reference server's"]
    ok = against_reference(ref, [b], _who)
    assert ok.failures == [] and ok.summary["devices"] == 1
    assert [e["digest"] for e in a["entries"]] == [e["digest"] for e in b["entries"]]
    three = judge([("p0", a), ("p1", b), ("p2", bad)])
    assert [d.line() for d in three.deviations] == [
        "p2: bf16 GEMM 2048x2048x2048, pattern random-7, chunk 12 of 64 differs from 2 identical devices"]


def test_a_gpu_of_the_same_key_gives_the_captured_bits(records):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here: the captured H100 record is judged as a reference above")
    import os

    from trainready.fingerprint.battery import INPUTS, run_battery, settings_record
    from trainready.fingerprint.key import gpu_key, key_id, key_diff

    if os.environ.get("CUBLAS_WORKSPACE_CONFIG") != ":4096:8":
        pytest.skip("run with CUBLAS_WORKSPACE_CONFIG=:4096:8 (the check's ranks set it before cuBLAS starts)")
    res = run_battery("cuda:0", "quick", 2)
    key, _ = gpu_key(0, settings_record(True, torch.get_num_threads()))
    want = records[0]
    # captured with the host's intra-op threads in the GPU key's settings, which GPU keys now leave out (a GPU's
    # bits do not depend on them): the captured key without that field is the one a run of this build records
    # and without the inputs field, which marks the standard battery's block-drawn inputs: the quick battery's
    # operands are one block each, so its inputs are those of the capture (the host cast and the device cast of
    # the same float64 values agree bit for bit: both IEEE round-to-nearest-even)
    captured = dict(want["key"], settings={**{k: v for k, v in want["key"]["settings"].items()
                                              if k != "intra_op_threads"}, "inputs": INPUTS})
    if key_id(key) != key_id(captured):
        pytest.skip(f"another group key than the captured H100's: {'; '.join(key_diff(captured, key)[:3])}")
    got = {e["id"]: e["digest"] for e in res["entries"]}
    assert got == {e["id"]: e["digest"] for e in want["entries"]}


def test_a_second_h100_of_the_same_model_gives_the_same_bits(records):
    """Another machine, another H100 80GB HBM3 (another serial, VBIOS 96.00.DA.00.0C against 96.00.CF.00.01),
    same driver, CUDA, cuBLAS, torch and settings: its quick battery gave every one of the 56 digests of the
    captured record (benchmarks/fingerprint_repeat.py, 2 processes x 3 runs there, all identical).  A changed chunk
    in it is still named: the agreement is not a comparison that cannot fail."""
    other = json.loads((DATA.parent / "fingerprint_h100x1b_quick_captured.json").read_text())[0]
    a = records[0]
    assert other["serial"] != a["serial"] and other["key"]["vbios"] != a["key"]["vbios"]
    same_but_vbios = {k for k in other["key"] if other["key"][k] != a["key"][k]}
    assert same_but_vbios == {"vbios", "settings"}, same_but_vbios  # settings: the captured key's thread field
    assert {k: v for k, v in a["key"]["settings"].items() if k != "intra_op_threads"} == other["key"]["settings"]
    bad = copy.deepcopy(other)
    bad["entries"][3]["digest"] = "0" * 64
    assert [e["digest"] for e in bad["entries"]] != [e["digest"] for e in a["entries"]]
    assert [e["digest"] for e in other["entries"]] == [e["digest"] for e in a["entries"]]
    assert [e["chunks"] for e in other["entries"]] == [e["chunks"] for e in a["entries"]]
