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


def _report(rec: dict, status: str = "pass", devices: int = 1, host: str = "ref") -> dict:
    """A node record's `fingerprint` result with `devices` ranks of `rec`'s bits."""
    return {"host": host, "results": [{"name": "fingerprint", "status": status, "details": {"devices": [
        dict(rec, rank=r, index=str(r)) for r in range(devices)]}}]}


@pytest.fixture(scope="module")
def good() -> dict:
    return _rec()


@pytest.fixture(scope="module")
def ref_spec(good) -> NodeSpec:
    return derive({}, _report(good, devices=3)).spec


def test_spec_init_keeps_the_reference_fingerprint_and_it_loads_back(good, ref_spec):
    fp = ref_spec.fingerprint
    assert fp.key_id == good["key_id"] and fp.size == "cpu" and fp.key == good["key"] and len(fp.entries) == 56
    e = good["entries"][0]
    assert fp.entries[e["id"]] == f"{e['digest']}:{e['chunks']}"
    import tomllib

    back = load_dataclass(NodeSpec, tomllib.loads(dump_toml(ref_spec)), "spec.toml")
    assert back.fingerprint == fp
    failed = derive({}, _report(good, "fail", devices=8))
    assert failed.spec.fingerprint == FingerprintSpec()
    assert "fingerprint: not written: no passed fingerprint check in the record(s)" in failed.notes


def test_spec_init_writes_the_reference_only_from_three_agreeing_distinct_devices(good):
    """A lone device's bits would become the standard, a flipped bit in it included: one device is not written,
    nor one device in three records; three devices of one record, or of three records, are."""
    one = derive({}, _report(good))
    assert one.spec.fingerprint == FingerprintSpec()
    assert any(n.startswith("fingerprint: not written: 1 distinct device(s) of group key") for n in one.notes)
    again = derive({}, [_report(good), _report(good), _report(good)])  # one GPU run three times: one device
    assert again.spec.fingerprint == FingerprintSpec()
    three_hosts = derive({}, [_report(good, host=h) for h in ("a", "b", "c")])
    assert three_hosts.spec.fingerprint.key_id == good["key_id"]
    assert "fingerprint: the reference's bits from 3 distinct device(s) of group key " \
        f"{good['key_id']} that agree on every entry of the cpu battery" in three_hosts.said
    eight = derive({}, _report(good, devices=8))
    assert len(eight.spec.fingerprint.entries) == 56
    flipped = _rec(Plants(flip="sum-fp32/ones"))
    split = derive({}, [_report(good, devices=3, host="a"), _report(flipped, devices=3, host="b")])
    assert split.spec.fingerprint == FingerprintSpec()  # 3 against 3: no strict majority says which is right
    assert any("3 distinct device(s)" in n and "6 of that key" in n for n in split.notes)


def test_a_node_differing_from_the_reference_is_named_before_the_same_bits_pass(good, ref_spec):
    flipped = _rec(Plants(flip="layernorm-fp32/large-exp"))
    bad = against_reference(ref_spec, [flipped], lambda r: f"rank {r['rank']}")
    assert bad.failures == ["rank 0: fp32 layernorm 32x256, pattern large-exp, chunk 13 of 64 differs from the "
                            "reference server's"]
    ok = against_reference(ref_spec, [good], lambda r: f"rank {r['rank']}")
    assert ok.failures == [] and ok.notes[0].startswith("1 device(s) bit for bit against the reference")
    other = copy.deepcopy(flipped)
    other["key"] = dict(other["key"], torch="2.12.0")  # another key: drift, never compared (the flip is not its)
    other["key_id"] = key_id(other["key"])
    drift = against_reference(ref_spec, [other], lambda r: f"rank {r['rank']}")
    assert drift.failures == [] and drift.notes == []
    assert drift.warnings == [f"reference fingerprint not compared on 1 device(s): group key {other['key_id']} differs "
                              f"from the reference's {good['key_id']} (torch: {good['key']['torch']} vs 2.12.0): "
                              "configuration drift"]
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
