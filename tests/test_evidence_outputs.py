"""--junit and --prometheus: one testcase per check with the right failure/skipped/error children;
a textfile that prometheus_client's parser reads, with trainready's naming rules.  Unit tests on a
planted failing record (the mismatch first), then the real CPU run records (tests/evidence_records)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from trainready.records import CheckResult, Level, Metric, Report, Status, Threshold
from trainready.report.junit import junit_xml
from trainready.report.kinds import record_of
from trainready.report.prometheus import exposition, metric_name

prom_parser = pytest.importorskip("prometheus_client.parser", reason="prometheus_client is a test dependency")

NAME_RULE = re.compile(r"^trainready_[a-z][a-z0-9_]*$")
BASE_SUFFIXES = ("_seconds", "_bytes", "_bytes_per_second", "_ratio", "_flops_per_second", "_tokens_per_second",
                 "_nats", "_info")
LOW_CARDINALITY = {"node", "check", "command", "status", "version", "gpu", "op", "dtype", "backend", "run",
                   "component", "stat", "rank", "ratio", "device", "tensor", "kind", "plant", "driver",
                   "cuda_driver_version", "torch", "torch_cuda", "cudnn", "nccl", "python", "os", "cuda"}


def _res(name: str, status: Status, msg: str, remedy: str = "", metrics: tuple[Metric, ...] = ()) -> CheckResult:
    return CheckResult(name, name, Level.QUICK, status, msg, remedy, metrics, 0.25)


def planted_failing_record() -> dict:
    busbw = Metric.of("comm_busbw_avg", 80.0, "GB/s", Threshold(">=", 293.6, "GB/s", "spec"), op="all_reduce",
                      dtype="float", from_bytes=1 << 27, to_bytes=1 << 30)
    per_size = Metric.of("comm_busbw", 12.0, "GB/s", None, op="all_reduce", size_bytes=1024)
    rep = Report("node", "node7", "2026-01-01T00:00:00+00:00", 3.0, "0.1.0", {"name": "h200-8x"}, (
        _res("gpus", Status.PASS, "8 GPUs healthy"),
        _res("matmul", Status.FAIL, "GPU 3 bf16: integer product wrong in 1 element(s)", "Drain the node; run dcgmi diag -r 3.",
             (Metric.of("matmul_exact_mismatches", 1, "elements", Threshold("==", 0, "elements", "exact"), gpu=3),)),
        _res("throughput", Status.SKIP, "no GPU: throughput probes are GPU-only"),
        _res("allreduce", Status.ERROR, "timed out after 300 s", "Look for a hung device."),
        _res("comm", Status.WARN, "no busbw expectation", "set comm.expected_busbw_gbps", (busbw, per_size)),
        _res("resume", Status.PASS, "matches", "", (Metric.of("resume_wall_time", 11.5, "s", None, run="A"),)),
    ), {"planted": {"matmul.corrupt": "3"}})
    return rep.to_json()


def test_junit_one_testcase_per_check_with_the_right_children() -> None:
    doc = planted_failing_record()
    root = ET.fromstring(junit_xml([record_of(doc)]))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert list(cases) == [r["name"] for r in doc["results"]]
    failing = cases["matmul"]
    assert failing.find("failure") is not None  # the mismatch first: the failing check carries a failure ...
    assert cases["gpus"].find("failure") is None and cases["gpus"].find("error") is None  # ... the passing one none
    assert "GPU 3 bf16" in failing.find("failure").get("message")
    assert "remedy: Drain the node" in failing.find("failure").text
    assert cases["allreduce"].find("error").get("message") == "timed out after 300 s"
    assert "remedy: Look for a hung device." in cases["allreduce"].find("error").text
    assert cases["throughput"].find("skipped").get("message").startswith("no GPU")
    assert cases["comm"].find("failure") is None and "WARN" in cases["comm"].find("system-out").text
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("6", "1", "1", "1")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["planted"] == "matmul.corrupt=3" and props["verdict"] == "error"


def test_junit_survives_control_characters_in_messages() -> None:
    doc = planted_failing_record()
    doc["results"][1]["message"] = "bad \x1b[31mcolour\x00 and <xml> & \"quotes\""
    root = ET.fromstring(junit_xml([record_of(doc)]))
    msg = [c for c in root.iter("testcase") if c.get("name") == "matmul"][0].find("failure").get("message")
    assert msg == 'bad [31mcolour and <xml> & "quotes"'


def families(text: str) -> dict:
    return {f.name: f for f in prom_parser.text_string_to_metric_families(text)}


def assert_naming_rules(text: str) -> None:
    fams = families(text)
    assert fams, "nothing parsed"
    for name, fam in fams.items():
        assert NAME_RULE.match(name) and "trainready_trainready" not in name, name
        assert fam.type == "gauge", name
        for s in fam.samples:
            assert set(s.labels) <= LOW_CARDINALITY, (name, s.labels)
            if name.endswith("_info"):
                assert s.value == 1.0
    for bad in ("_gbps", "_ms", "_us", "_per_s_", "size_bytes", "_tflops"):
        assert not any(bad in n for n in fams), bad
    assert not any(n.endswith(("_per_s", "_gb")) for n in fams)


def test_prometheus_names_units_and_labels_on_a_planted_record() -> None:
    text = exposition([record_of(planted_failing_record())])
    fams = families(text)
    assert_naming_rules(text)
    busbw = fams["trainready_comm_busbw_avg_bytes_per_second"].samples
    assert [s.value for s in busbw] == [80.0e9]  # GB/s → bytes per second (GB = 1e9 B)
    assert set(busbw[0].labels) == {"node", "check", "op", "dtype"}  # byte ranges dropped: not labels
    assert "trainready_comm_busbw_bytes_per_second" not in fams  # per-size rows are not exported
    status = {(s.labels["check"], s.labels["status"]): s.value for s in fams["trainready_check_status"].samples}
    assert status[("matmul", "fail")] == 1.0 and status[("matmul", "pass")] == 0.0
    assert status[("gpus", "pass")] == 1.0
    assert fams["trainready_planted"].samples[0].value == 1.0
    assert fams["trainready_resume_wall_time_seconds"].samples[0].value == 11.5
    assert fams["trainready_info"].samples[0].labels["version"] == "0.1.0"


@pytest.mark.parametrize("name, unit, want", [
    ("train_tokens_per_s", "tokens/s", "trainready_train_tokens_per_second"),
    ("ckpt_gbps", "GB/s", "trainready_ckpt_bytes_per_second"),
    ("allreduce_time", "ms", "trainready_allreduce_time_seconds"),
    ("trainready_resume_wall_time", "s", "trainready_resume_wall_time_seconds"),
    ("gemm_bf16_fraction_of_peak", "1", "trainready_gemm_bf16_fraction_of_peak_ratio"),
    ("gpu_memory_total", "GiB", "trainready_gpu_memory_total_bytes"),
    ("comm_wrong_elements", "1", "trainready_comm_wrong_elements"),
    ("train_params_unchanged", "tensors", "trainready_train_params_unchanged"),
])
def test_metric_names_have_one_prefix_and_a_base_unit(name: str, unit: str, want: str) -> None:
    assert metric_name(name, unit) == want


def test_junit_of_a_compare_record_fails_on_a_regression() -> None:
    cmp = {"schema": "trainready.compare/1", "verdict": "fail", "new": {"host": "n2"},
           "versions_changed": [{"key": "torch", "baseline": "2.11", "new": "2.13", "declared": False}],
           "metrics": [{"name": "comm_busbw_avg", "labels": {"op": "all_reduce"}, "unit": "GB/s", "baseline": 360.0,
                        "new": 288.0, "verdict": "regression", "tolerance": 18.0},
                       {"name": "hbm_copy", "labels": {"gpu": "0"}, "unit": "GB/s", "baseline": 4000.0, "new": 4010.0,
                        "verdict": "noise", "tolerance": 200.0},
                       {"name": "gpu_count", "labels": {}, "unit": "GPUs", "baseline": 8, "new": 8, "verdict": "unchanged"}]}
    root = ET.fromstring(junit_xml([record_of(cmp)]))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert set(cases) == {"torch", "comm_busbw_avg[op=all_reduce]", "hbm_copy[gpu=0]"}
    assert cases["comm_busbw_avg[op=all_reduce]"].find("failure") is not None
    assert cases["hbm_copy[gpu=0]"].find("failure") is None
    assert "not declared" in cases["torch"].find("failure").get("message")
