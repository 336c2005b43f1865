"""The fleet's fabric drift (cluster/judge/fabricdrift.py) through the fleet verdict: a node with a NIC missing, a
NIC on other firmware, or a port trained to HDR on an NDR fleet is rejected against the fleet majority (or
--reference), class `fab` for its drain; identical nodes and records without a fabric section are not."""

from __future__ import annotations

import dataclasses

from trainready.cluster.repair import reasons
from trainready.cluster.judge import fabricdrift, synthetic
from trainready.cluster.judge.verdict import decide
from trainready.spec import load_spec

SPEC = load_spec("example:h200-8x")[0]


def _ports(n: int = 8, fw: str = "28.39.1002", rate: float = 400.0, odd: dict[int, dict] | None = None) -> list[dict]:
    out = []
    for i in range(n):
        p = {"device": f"mlx5_{i}", "port": 1, "rate": f"{rate:g} Gb/sec (4X NDR)", "rate_gbps": rate, "fw_ver": fw,
             "board_id": "MT_0000000838", "state": "ACTIVE"}
        out.append({**p, **(odd or {}).get(i, {})})
    return out


def _fleet(odd: dict[str, list[dict]] | None = None, n: int = 4):
    inputs = synthetic.fleet(n, 2)
    out = []
    for ni in inputs:
        ports = (odd or {}).get(ni.node, _ports())
        manifest = {**(ni.record.get("manifest") or {}), "fabric": {"rdma": True, "ports": ports}}
        out.append(dataclasses.replace(ni, record={**ni.record, "manifest": manifest}))
    return out


def _reasons(inputs, **kw):
    return {n.node: n.reasons for n in decide(inputs, SPEC, [], [], **kw).nodes}


def test_a_missing_nic_other_firmware_and_a_half_rate_port_are_drift():
    fleet = _fleet({"gpu0002": _ports(7), "gpu0003": _ports(odd={5: {"fw_ver": "28.36.1010"}}),
                    "gpu0004": _ports(odd={2: {"rate_gbps": 200.0}})}, n=6)
    r = _reasons(fleet)
    assert r["gpu0002"] == ("fabric: nics 8 (fleet majority) ≠ 7",)
    assert r["gpu0003"] == ("fabric: fw_ver 28.39.1002 (fleet majority) ≠ 28.36.1010 | 28.39.1002",)
    assert r["gpu0004"] == ("fabric: rate 400 (fleet majority) ≠ 200 | 400",)
    assert r["gpu0001"] == () and r["gpu0005"] == ()
    v = {n.node: n for n in decide(fleet, SPEC, [], []).nodes}
    assert reasons.class_of_causes(v["gpu0002"].causes) == "fabric"
    assert reasons.class_of("check fabric") == "fabric"


def test_identical_nodes_and_records_without_the_section_are_not_drift():
    assert all(r == () for r in _reasons(_fleet()).values())
    bare = synthetic.fleet(3, 2)  # records written before the manifest had a fabric section
    assert fabricdrift.judge(bare, None) == {} and all(r == () for r in _reasons(bare).values())


def test_the_reference_node_and_the_spec_s_compute_nics():
    fleet = _fleet({"gpu0001": _ports(fw="28.40.1000")})
    r = _reasons(fleet, reference="gpu0001")
    assert r["gpu0001"] == () and r["gpu0002"] == ("fabric: fw_ver 28.40.1000 (gpu0001) ≠ 28.39.1002",)
    extra = _ports() + [{"device": "mlx5_bond_0", "port": 1, "rate_gbps": 25.0, "fw_ver": "14.32.1010"}]
    assert fabricdrift.summary({"manifest": {"fabric": {"ports": extra}}}, ("mlx5_0", "mlx5_1"))["nics"] == "2"
    assert fabricdrift.summary({"manifest": {"fabric": {"ports": extra}}})["nics"] == "9"
