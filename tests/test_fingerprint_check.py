"""The fingerprint check: a planted flipped bit in one rank is named (rank, op, pattern, chunk) before healthy runs
pass; intermittent repeats, a wrong answer every rank shares (float64) and key drift are each told apart."""

from __future__ import annotations

import pytest

from trainready.checks import REGISTRY, CheckContext
from trainready.fingerprint.battery import Plants, digest, first_diff_chunk, flip, plant_index, run_battery
from trainready.fingerprint.judge import judge
from trainready.fingerprint.key import cpu_key, key_id
from trainready.fingerprint.battery import settings_record
from trainready.records import Status
from trainready.spec import default_spec


def _rec(rank: int, plants: Plants = Plants(), drift: bool = False) -> dict:
    """One CPU 'rank' computed in this process (the same battery the check's rank processes run)."""
    import torch

    torch.set_num_threads(1)
    res = run_battery("cpu", "cpu", 2, plants)
    key, ident = cpu_key(rank, settings_record(False, 1))
    if drift:
        key["torch"] += "+other"
    return {"rank": rank, "device": "cpu", **ident, "key": key, "key_id": key_id(key), "size": "cpu", **res}


@pytest.fixture(scope="module")
def healthy() -> list[dict]:
    return [_rec(r) for r in range(4)]


def test_chunk_digests_name_the_region_of_a_flipped_bit():
    import torch

    a = torch.randn(4096)
    b = a.clone()
    flip(b, plant_index(b.numel()), 0)
    da, db = digest(a), digest(b)
    assert da[0] != db[0]  # whole digest differs...
    diff = [i for i in range(64) if da[1][8 * i:8 * i + 8] != db[1][8 * i:8 * i + 8]]
    assert diff == [12]  # ...in chunk 13 (1-based) only
    assert first_diff_chunk(a, b) == 12 and first_diff_chunk(a, a.clone()) is None
    assert digest(a) == digest(a.clone())


def test_flipped_bit_in_one_rank_is_named_before_healthy_ranks_agree(healthy):
    bad = healthy[:2] + [_rec(2, Plants(flip="gemm-bf16/random-7"))] + healthy[3:]
    j = judge([(f"rank {r['rank']}", r) for r in bad])
    assert [d.line() for d in j.deviations] == [
        "rank 2: bf16 GEMM 96x96x96, pattern random-7, chunk 13 of 64 differs from 3 identical devices"]
    assert j.mismatches == {"rank 0": 0, "rank 1": 0, "rank 2": 1, "rank 3": 0}
    assert not j.shared and not j.intermittent and not j.drift
    ok = judge([(f"rank {r['rank']}", r) for r in healthy])
    assert not ok.deviations and not ok.intermittent and not ok.shared and not ok.unknown and not ok.drift
    assert len(healthy[0]["entries"]) == 56 and all(e["ratio"] <= 1.0 for e in healthy[0]["entries"])
    # every op really computed something: the ratio is non-zero somewhere, the digests differ between ops
    assert len({e["digest"] for e in healthy[0]["entries"]}) > 40


def test_intermittent_shared_and_drift_are_told_apart(healthy):
    inter = judge([(f"rank {r['rank']}", r) for r in healthy[:3] + [_rec(3, Plants(intermittent=True))]])
    assert [i.who for i in inter.intermittent] == ["rank 3"] and not inter.deviations
    assert "intermittent, gemm-bf16/random-7 gave other bits in 1 repeat(s)" in inter.intermittent[0].line()
    shared = judge([(f"rank {r}", _rec(r, Plants(shared=True))) for r in range(3)])
    assert not shared.deviations and [s.entry for s in shared.shared] == ["gemm-bf16/random-7"]
    assert shared.shared[0].ratio > 1.0 and "a wrong answer they share" in shared.shared[0].line()
    drift = judge([(f"rank {r['rank']}", r) for r in healthy[:3] + [_rec(3, drift=True)]])
    assert not drift.deviations and len(drift.groups) == 2
    assert drift.drift[0].startswith("rank 3: group key ") and "torch: " in drift.drift[0]
    assert "configuration drift" in drift.drift[0]


def test_too_few_devices_or_a_tie_is_unknown_never_a_failure(healthy):
    flipped = _rec(1, Plants(flip="exp-fp32/ones"))
    two = judge([("rank 0", healthy[0]), ("rank 1", flipped)])
    assert not two.deviations and two.unknown and two.unknown[0].startswith("exp-fp32/ones: 2 device(s)")
    tie = judge([(f"rank {i}", r) for i, r in enumerate([healthy[0], healthy[1], flipped, _rec(3, Plants(
        flip="exp-fp32/ones"))])])
    assert not tie.deviations and any(u.startswith("exp-fp32/ones") for u in tie.unknown)


def _run(tmp_path, faults=None):
    return REGISTRY["fingerprint"]().execute(CheckContext(default_spec(), tmp_path, faults or {}))


@pytest.mark.slow
def test_check_fails_naming_the_rank_then_healthy_runs_pass(tmp_path):
    bad = _run(tmp_path, {"fingerprint.bitflip": "5"})
    assert bad.status == Status.FAIL, bad.message
    assert "rank 5: bf16 GEMM 96x96x96, pattern random-7, chunk 13 of 64 differs from 7 identical devices" in bad.message
    per = {m.label_dict["rank"]: m.value for m in bad.metrics if m.name == "fingerprint_mismatches"}
    assert per["5"] == 1 and sum(per.values()) == 1
    for _ in range(2):  # healthy runs stay green run after run, and give the same bits
        good = _run(tmp_path)
        assert good.status == Status.PASS, good.message
        assert "56 entries (cpu battery, 2 repeats) on 8 device(s)" in good.message
    assert len({d["key_id"] for d in good.details["devices"]}) == 1


@pytest.mark.slow
def test_check_names_drift_as_a_warning_and_shared_as_a_failure(tmp_path):
    drift = _run(tmp_path, {"fingerprint.drift": "2"})
    assert drift.status == Status.WARN and "rank 2: group key" in drift.message and "drift" in drift.message
    shared = _run(tmp_path, {"fingerprint.shared": "1"})
    assert shared.status == Status.FAIL and "a wrong answer they share" in shared.message
