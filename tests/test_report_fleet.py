"""Fleet records (trainready cluster run, trainready.fleet/1) in the HTML report, JUnit and Prometheus: per node and
GPU throughput with the outlier bound and the rejected node marked; one suite per node."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from test_evidence_outputs import assert_naming_rules, families

from trainready.report.html import render_html
from trainready.report.junit import junit_xml
from trainready.report.kinds import read_record
from trainready.report.prometheus import exposition

GEMM = {"node1": 760.0, "node2": 755.0, "node3": 610.0, "node4": 758.0}  # TFLOP/s; node3 ~20% slow


def fleet_dir(tmp: Path, planted: dict | None = None) -> Path:
    (tmp / "nodes").mkdir(parents=True)
    nodes = []
    for node, v in GEMM.items():
        report = {"schema": "trainready.report/1", "command": "node", "host": "h", "status": "pass", "results": [
            {"name": "throughput", "status": "pass", "message": "ok", "remedy": "", "duration_s": 2.0,
             "metrics": [{"name": "gemm_bf16", "value": v + g, "unit": "TFLOP/s", "labels": {"gpu": str(g)},
                          "threshold": None} for g in range(2)]}]}
        (tmp / "nodes" / f"{node}.json").write_text(json.dumps({"schema": "trainready.fleetnode/1", "node": node,
                                                                 "report": report, "versions": {}}))
        slow = node == "node3"
        nodes.append({"node": node, "accepted": not slow, "record": str(tmp / "nodes" / f"{node}.json"),
                      "reasons": ["slow: GPU 0 gemm_bf16 610 TFLOP/s < 0.9 x fleet median"] if slow else [],
                      "warnings": [], "slurm": {}})
    doc = {"schema": "trainready.fleet/1", "summary": {"nodes": 4, "accepted": 3, "rejected": 1},
           "drain_list": ["node3"], "nodes": nodes, "planted": planted or {},
           "stats": [{"metric": "gemm_bf16", "unit": "TFLOP/s", "n": 8, "median": 757.0, "mad": 2.0, "floor": 681.3,
                      "robust_bound": 745.0, "judged": True}],
           "cross": [{"name": "cluster.clock", "status": "pass", "message": "offsets < 1 s", "remedy": "",
                      "duration_s": 1.0, "metrics": []}]}
    (tmp / "fleet.json").write_text(json.dumps(doc))
    return tmp / "fleet.json"


def test_fleet_html_marks_the_rejected_node_and_draws_the_bound(tmp_path: Path) -> None:
    rec = read_record(str(fleet_dir(tmp_path)))
    assert rec.kind == "fleet" and rec.status == "fail"
    html = render_html([rec])
    head = html.split("<section")[0]
    assert "Verdict: FAIL" in head and "node node3" in head and "rejected: slow" in head
    chart = html.split("<title>gemm_bf16 across the fleet")[1].split("</svg>")[0]
    assert "outlier bound" in chart and "slow floor" in chart and "fleet median" in chart
    assert chart.count("<rect") >= 8 and chart.count("✗") == 2  # node3's two GPUs marked, nobody else


def test_fleet_junit_and_prometheus(tmp_path: Path) -> None:
    rec = read_record(str(fleet_dir(tmp_path)))
    root = ET.fromstring(junit_xml([rec]))
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {f"trainready cluster node{i}" for i in range(1, 5)} | {"trainready cluster cross-node"}
    verdict = {s.get("hostname"): [c for c in s.iter("testcase") if c.get("name") == "fleet verdict"][0]
               for s in suites.values() if s.get("hostname")}
    assert verdict["node3"].find("failure") is not None and verdict["node1"].find("failure") is None
    text = exposition([rec])
    assert_naming_rules(text)
    fams = families(text)
    acc = {s.labels["node"]: s.value for s in fams["trainready_fleet_node_accepted"].samples}
    assert acc == {"node1": 1.0, "node2": 1.0, "node3": 0.0, "node4": 1.0}
    gemm = {(s.labels["node"], s.labels["gpu"]): s.value for s in fams["trainready_gemm_bf16_flops_per_second"].samples}
    assert gemm[("node3", "0")] == 610.0e12
    stats = {s.labels["stat"]: s.value for s in fams["trainready_fleet_gemm_bf16_flops_per_second"].samples}
    assert stats["robust_bound"] == 745.0e12


def test_a_planted_fleet_record_is_refused_by_bundle(tmp_path: Path) -> None:
    import pytest

    from trainready.bundle.build import read_records
    from trainready.errors import UsageError

    path = fleet_dir(tmp_path / "p", planted={"cluster.slow_node": "node3"})
    with pytest.raises(UsageError, match="planted faults"):
        read_records((str(path),))
    assert read_records((str(fleet_dir(tmp_path / "ok")),))[0].kind == "fleet"


def test_fleet_html_lists_the_earlier_runs_of_the_latest_record(tmp_path: Path) -> None:
    path = fleet_dir(tmp_path)
    doc = json.loads(path.read_text())
    assert "earlier runs under this --results" not in render_html([read_record(str(path))])  # a run's own record
    doc["history"] = [{"run": "20261203T210512Z-run", "kind": "run", "verdict": "reject", "rejected": ["node2"],
                       "record": "/acc/runs/20261203T210512Z-run/fleet.json", "planted": {"cluster.fail": "node2"}},
                      {"run": "20261203T200000Z-run", "record": None,
                       "verdict": "none: the run ended before its verdict (no record at /acc/runs/x/fleet.json)"}]
    path.write_text(json.dumps(doc))
    html = render_html([read_record(str(path))])
    table = html.split("earlier runs under this --results")[1].split("</table>")[0]
    assert "20261203T210512Z-run" in table and "/acc/runs/20261203T210512Z-run/fleet.json" in table
    assert "node2" in table and "planted: a test" in table and "none: the run ended before its verdict" in table
