"""The fabric in the fleet's evidence: Prometheus gauges per RDMA port (state, error counters, rate) and per GPU
(active NVLinks, their error counters) from a node record's fabric check, on a ConnectX-7 sysfs tree and NVML
through the stand-in; a port down and a counter that rose show as such."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric_nvml import FabricNvml
from fabric_tree import hgx_tree
from trainready.fabric.facts import read_facts, snapshot
from trainready.fabric.judge.verdict import judge
from trainready.records import CheckResult, Level, Report
from trainready.report.kinds import record_of
from trainready.report.prometheus import exposition
from trainready.spec.fabric import FabricSpec

prom_parser = pytest.importorskip("prometheus_client.parser", reason="prometheus_client is a test dependency")


def node_record(root: Path, nv: FabricNvml) -> dict:
    facts = read_facts(root, nv=nv, environ={}, proc=root / "proc")
    out = judge(facts, FabricSpec(), snapshot(facts.ports, facts.gpus))
    res = CheckResult("fabric", "fabric", Level.QUICK, out.status, out.message, out.remedy, tuple(out.metrics), 0.01,
                      out.details)
    return Report("node", "gpu017", "2026-12-07T00:00:00+00:00", 1.0, "0.1.0", {"name": "b200"}, (res,)).to_json()


def _samples(doc: dict) -> dict:
    fams = {f.name: f for f in prom_parser.text_string_to_metric_families(exposition([record_of(doc)]))}
    return {name: {tuple(sorted(s.labels.items())): s.value for s in fam.samples} for name, fam in fams.items()}


def test_ports_and_nvlinks_are_gauges_with_a_port_down_and_errors_shown(tmp_path: Path):
    nv = FabricNvml()
    nv.down.add((2, 7))
    nv.errors[(2, 3, 0)] = 5  # on an active link (a down link's counters are not read)
    root = hgx_tree(tmp_path, nics={3: {"state": "1: DOWN", "phys_state": "3: Disabled"},
                                    5: {"counters": {"symbol_error": 12}}})
    s = _samples(node_record(root, nv))
    active = s["trainready_fabric_port_active"]
    assert active[(("nic", "mlx5_3"), ("node", "gpu017"), ("port", "1"))] == 0.0
    assert active[(("nic", "mlx5_0"), ("node", "gpu017"), ("port", "1"))] == 1.0 and len(active) == 8
    errors = s["trainready_fabric_port_errors"]
    assert errors[(("counter", "symbol_error"), ("nic", "mlx5_5"), ("node", "gpu017"), ("port", "1"))] == 12.0
    assert errors[(("counter", "symbol_error"), ("nic", "mlx5_0"), ("node", "gpu017"), ("port", "1"))] == 0.0
    links = s["trainready_fabric_nvlink_active_links"]
    assert links[(("gpu", "2"), ("node", "gpu017"))] == 17.0 and links[(("gpu", "0"), ("node", "gpu017"))] == 18.0
    assert any(v == 5.0 and ("gpu", "2") in k for k, v in s["trainready_fabric_nvlink_errors"].items())
    rate = s["trainready_nic_rate_bits_per_second"]  # the check's own metric, one series per port
    assert len(rate) == 8 and set(rate.values()) == {400e9}


def test_the_rma_folder_lists_each_port_and_nvlink_with_its_counters(tmp_path: Path):
    from trainready.cluster.repair.rma.fabric import fabric_md
    from trainready.cluster.repair.rma.render import _table

    nv = FabricNvml()
    nv.down.add((2, 7))
    nv.errors[(2, 3, 0)] = 5
    root = hgx_tree(tmp_path, nics={5: {"counters": {"symbol_error": 12, "link_downed": 1}}})
    text = "\n".join(fabric_md({"report": node_record(root, nv)}, _table))
    assert "| mlx5_5:1 | ACTIVE (LinkUp) | 400 Gb/sec (4X NDR) | InfiniBand | 28.39.1002 | MT_0000000838 | " \
           "link_downed 1, symbol_error 12 |" in text
    assert "| mlx5_0:1 | ACTIVE (LinkUp) | 400 Gb/sec (4X NDR) | InfiniBand | 28.39.1002 | MT_0000000838 | all 0 |" in text
    assert "| 2 | 17 of 18 active | 7 | link 3: " in text and "| 0 | 18 of 18 active | none | all 0 |" in text
    assert "Not recorded" in "\n".join(fabric_md({"report": {"results": []}}, _table))


def test_the_html_report_has_the_fabric_tables(tmp_path: Path):
    from trainready.report.html import render_html

    nv = FabricNvml()
    nv.down.add((2, 7))
    nv.errors[(2, 3, 0)] = 5
    root = hgx_tree(tmp_path, nics={3: {"state": "1: DOWN", "phys_state": "3: Disabled"}})
    html = render_html([record_of(node_record(root, nv))])
    assert "fabric: RDMA ports" in html and "fabric: NVLink (GPU x link)" in html
    assert "<td>mlx5_3:1</td><td><b>DOWN (Disabled)</b></td>" in html
    assert "<td>mlx5_0:1</td><td>ACTIVE (LinkUp)</td><td>400 Gb/sec (4X NDR)</td>" in html
    assert html.count("<b>down</b>") == 1 and "<td>up<br><small>" in html  # GPU 2: link 7 down, link 3 erroring
    healthy = render_html([record_of(node_record(hgx_tree(tmp_path / "h"), FabricNvml()))])
    assert "<b>down</b>" not in healthy and "<b>DOWN" not in healthy
