"""One node against the reference server's fingerprint (spec init --from-report → node --spec), and
`trainready compare` showing fingerprint changes: a change is caught before the same bits pass."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from trainready.checks import REGISTRY, CheckContext
from trainready.compare.fingerprint import fingerprint_changes, fingerprint_of
from trainready.fingerprint.battery import Plants, run_battery, settings_record
from trainready.fingerprint.key import cpu_key, key_id
from trainready.fingerprint.reference import against_reference
from trainready.records import Status
from trainready.spec import default_spec
from trainready.spec.init import derive
from trainready.spec.model import FingerprintSpec, NodeSpec
from trainready.util.strict import dump_toml, load_dataclass


def _rec(plants: Plants = Plants()) -> dict:
    import torch

    torch.set_num_threads(1)
    key, ident = cpu_key(0, settings_record(False, 1))
    return {"rank": 0, "device": "cpu", **ident, "key": key, "key_id": key_id(key), "size": "cpu",
            **run_battery("cpu", "cpu", 2, plants)}


def _report(rec: dict, status: str = "pass") -> dict:
    return {"results": [{"name": "fingerprint", "status": status, "details": {"devices": [rec]}}]}


@pytest.fixture(scope="module")
def good() -> dict:
    return _rec()


@pytest.fixture(scope="module")
def ref_spec(good) -> NodeSpec:
    return derive({}, _report(good)).spec


def test_spec_init_keeps_the_reference_fingerprint_and_it_loads_back(good, ref_spec):
    fp = ref_spec.fingerprint
    assert fp.key_id == good["key_id"] and fp.size == "cpu" and fp.key == good["key"] and len(fp.entries) == 56
    e = good["entries"][0]
    assert fp.entries[e["id"]] == f"{e['digest']}:{e['chunks']}"
    import tomllib

    back = load_dataclass(NodeSpec, tomllib.loads(dump_toml(ref_spec)), "spec.toml")
    assert back.fingerprint == fp
    failed = derive({}, _report(good, "fail"))
    assert failed.spec.fingerprint == FingerprintSpec()
    assert any(n.startswith("fingerprint: no passed fingerprint check") for n in failed.notes)


def test_a_node_differing_from_the_reference_is_named_before_the_same_bits_pass(good, ref_spec):
    flipped = _rec(Plants(flip="layernorm-fp32/large-exp"))
    bad = against_reference(ref_spec, [flipped], lambda r: f"rank {r['rank']}")
    assert bad.failures == ["rank 0: fp32 layernorm 32x256, pattern large-exp, chunk 13 of 64 differs from the "
                            "reference server's"]
    ok = against_reference(ref_spec, [good], lambda r: f"rank {r['rank']}")
    assert ok.failures == [] and ok.notes[0].startswith("1 device(s) bit for bit against the reference")
    other = copy.deepcopy(flipped)
    other["key_id"] = "0" * 12  # another key: drift, never compared (so the flip is not this comparison's)
    drift = against_reference(ref_spec, [other], lambda r: f"rank {r['rank']}")
    assert drift.failures == [] and "no device has the reference's key" in drift.notes[0]
    none = against_reference(default_spec(), [good], lambda r: "x")
    assert none.failures == [] and none.summary["compared"] is False


def test_compare_fails_changed_bits_under_one_key_and_shows_them_under_a_new_key(good):
    flipped = _rec(Plants(flip="exp-bf16/ones"))
    base, new = fingerprint_of(_report(good)["results"]), fingerprint_of(_report(flipped)["results"])
    d = fingerprint_changes(base, new)
    assert d.same_key and d.changed == ("exp-bf16/ones",) and d.compared == 56
    assert d.failing and "1 of 56 battery entries give other bits under the same group key" in d.failing
    upgraded = dict(new, key=dict(new["key"], torch="2.14.0"), key_id="1" * 12)
    u = fingerprint_changes(base, upgraded)
    assert u.failing is None and "group key changed (torch: " in u.lines()[0] and "not judged" in u.lines()[0]
    same = fingerprint_changes(base, fingerprint_of(_report(good)["results"]))
    assert same.failing is None and "all 56 entries bit for bit identical" in same.lines()[0]


@pytest.mark.slow
def test_node_check_holds_every_rank_to_the_reference(tmp_path, good, ref_spec):
    entries = dict(ref_spec.fingerprint.entries)
    eid = "gemm-fp16/random-7"
    digest, _, chunks = entries[eid].partition(":")
    entries[eid] = f"{'0' * 64}:{chunks[:8 * 5]}{'0' * 8}{chunks[8 * 6:]}"
    wrong = dataclasses.replace(ref_spec, fingerprint=dataclasses.replace(ref_spec.fingerprint, entries=entries))
    spec = dataclasses.replace(default_spec(), fingerprint=wrong.fingerprint)
    bad = REGISTRY["fingerprint"]().execute(CheckContext(spec, tmp_path, {}))
    assert bad.status == Status.FAIL and "fp16 GEMM 96x96x96, pattern random-7, chunk 6 of 64 differs from the " \
        "reference server's" in bad.message
    spec = dataclasses.replace(default_spec(), fingerprint=ref_spec.fingerprint)
    ok = REGISTRY["fingerprint"]().execute(CheckContext(spec, tmp_path, {}))
    assert ok.status == Status.PASS and "8 device(s) bit for bit against the reference fingerprint" in ok.message


def test_a_fleet_side_carries_the_fingerprint_most_nodes_share(good):
    from trainready.compare.sides import Side, fold

    fp = fingerprint_of(_report(good)["results"])
    odd = dict(fp, entries=dict(fp["entries"], **{"exp-bf16/ones": "0" * 64}))
    sides = [Side(f"n{i}", "s", f"n{i}", "t", {}, {}, {}, fingerprint=p) for i, p in enumerate([odd, fp, fp])]
    assert fold(sides, "fleet.json", "trainready.fleet/1", "t", "fleet").fingerprint == fp
    assert fold(sides[:1], "fleet.json", "trainready.fleet/1", "t", "fleet").fingerprint == odd
