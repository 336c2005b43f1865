"""`trainready compare`: regressions (direction-aware, per-metric tolerance), version changes, refusals."""

from __future__ import annotations

import copy
import json

import pytest

from trainready.compare.result import compare
from trainready.compare.sides import node_side, read_side
from trainready.errors import UsageError
from trainready.records import CheckResult, Level, Metric, Report, Status, Threshold
from trainready.spec.model import CompareSpec, MetricTolerance

VERSIONS = {"versions": {"python": "3.11.7", "torch": "2.13.0+cu130", "torch_cuda": "13.0", "cudnn": "9.10.2",
                         "nccl": "2.27.5"}, "driver": "580.65.06", "cuda_driver_version": "13.0",
            "os": "Ubuntu 24.04", "packages": {}, "image_digest": "sha256:" + "a" * 64,
            "key_packages": {"numpy": "2.3.1"}, "package_set_sha256": "sha256:" + "b" * 64}


def record(tps: float = 1000.0, busbw: float = 350.0, t_ms: float = 2.0, rel_err: float = 1e-7,
           torch: str = "2.13.0+cu130", host: str = "ref", **ctx: object) -> dict:
    details = copy.deepcopy(VERSIONS)
    details["versions"]["torch"] = torch
    r = lambda name, ms, det=None: CheckResult(name, name, Level.QUICK, Status.PASS, "ok", "", tuple(ms), 1.0, det or {})  # noqa: E731
    results = (
        r("versions", [], details),
        r("matmul", [Metric.of("matmul_rel_err", rel_err, "1", Threshold("<=", 1e-3, "1", "bound"), dtype="bf16")]),
        r("train_step", [Metric.of("train_tokens_per_s", tps, "tokens/s", device="cuda"),
                         Metric.of("train_loss_last", 4.8, "nats", device="cuda")]),
        r("allreduce", [Metric.of("comm_busbw_avg", busbw, "GB/s", Threshold(">=", 280.0, "GB/s", "spec"), op="all_reduce"),
                        Metric.of("allreduce_time", t_ms, "ms", backend="nccl"),
                        Metric.of("gpu_count", 8, "GPUs", Threshold("==", 8, "GPUs", "spec"))]),
    )
    return Report("node", host, "2026-01-01T00:00:00+00:00", 10.0, "0.1", {}, results, dict(ctx)).to_json()


def run(base: dict, new: dict, spec: CompareSpec | None = None, allow: tuple[str, ...] = ()):
    return compare(node_side(base, "base.json", "BASELINE"), node_side(new, "new.json", "NEW"),
                   spec or CompareSpec(), "test", allow)


def verdicts(c) -> dict[str, str]:
    return {m.name: m.verdict for m in c.metrics}


def test_planted_regression_fails_then_noise_passes():
    bad = run(record(), record(tps=500.0))
    assert bad.exit_code == 1 and verdicts(bad)["train_tokens_per_s"] == "regression"
    assert any("train_tokens_per_s" in r and "regression" in r for r in bad.reasons)
    ok = run(record(), record(tps=970.0, busbw=340.0))
    assert ok.exit_code == 0 and ok.reasons == ()
    assert verdicts(ok)["train_tokens_per_s"] == "noise" and verdicts(ok)["comm_busbw_avg"] == "noise"


def test_direction_aware_time_lower_is_better_throughput_higher():
    slower = run(record(), record(t_ms=3.0))
    assert verdicts(slower)["allreduce_time"] == "regression" and slower.exit_code == 1
    faster = run(record(), record(t_ms=1.0, tps=1500.0, busbw=420.0))
    v = verdicts(faster)
    assert (v["allreduce_time"], v["train_tokens_per_s"], v["comm_busbw_avg"]) == ("improvement",) * 3
    assert faster.exit_code == 0
    assert v["train_loss_last"] in ("info", "unchanged")


def test_error_metric_judged_by_its_own_bound():
    assert verdicts(run(record(), record(rel_err=2e-3)))["matmul_rel_err"] == "regression"
    assert verdicts(run(record(), record(rel_err=5e-7)))["matmul_rel_err"] == "noise"  # 5x, still far within 1e-3


def test_exact_metric_any_change_is_a_regression():
    new = record()
    new["results"][3]["metrics"][2]["value"] = 7
    assert verdicts(run(record(), new))["gpu_count"] == "regression"


def test_changed_torch_version_fails_unless_declared():
    c = run(record(), record(torch="2.11.0+cu130"))
    assert c.exit_code == 1 and [v.key for v in c.versions] == ["torch"] and not c.versions[0].declared
    assert any("torch" in r and "not declared" in r for r in c.reasons)
    assert run(record(), record(torch="2.11.0+cu130"), allow=("torch",)).exit_code == 0
    spec = CompareSpec(allow_changes=("torch",))
    assert run(record(), record(torch="2.11.0+cu130"), spec).exit_code == 0


def test_package_change_names_the_package():
    new = record()
    new["results"][0]["details"]["key_packages"]["numpy"] = "2.4.0"
    c = run(record(), new)
    assert [v.key for v in c.versions] == ["packages.numpy"] and c.exit_code == 1
    assert run(record(), new, allow=("packages",)).exit_code == 0


def test_spec_tolerance_overrides_default():
    loose = CompareSpec(metrics={"train_tokens_per_s": MetricTolerance(rel=0.6)})
    assert run(record(), record(tps=500.0)).exit_code == 1
    assert run(record(), record(tps=500.0), loose).exit_code == 0
    tight = CompareSpec(metrics={"train_tokens_per_s": MetricTolerance(rel=0.01)})
    assert verdicts(run(record(), record(tps=970.0), tight))["train_tokens_per_s"] == "regression"
    flipped = CompareSpec(metrics={"allreduce_time": MetricTolerance(direction="higher")})
    assert verdicts(run(record(), record(t_ms=3.0), flipped))["allreduce_time"] == "improvement"


def test_missing_metric_and_failed_check_fail():
    new = record()
    new["results"][2]["metrics"] = new["results"][2]["metrics"][1:]
    new["results"][1]["status"] = "fail"
    c = run(record(), new)
    assert verdicts(c)["train_tokens_per_s"] == "missing"
    assert [(x.name, x.verdict) for x in c.checks] == [("matmul", "regression")]
    assert c.exit_code == 1


def fleet(tmp_path, tag: str, records: list[dict], **top: object) -> str:
    """A trainready.fleet/1 record as `cluster run` writes it: nodes name their fleetnode/1 records by path."""
    (tmp_path / tag / "nodes").mkdir(parents=True)
    entries = []
    for i, rep in enumerate(records):
        p = tmp_path / tag / "nodes" / f"node{i}.json"
        p.write_text(json.dumps({"schema": "trainready.fleetnode/1", "node": f"node{i}", "report": rep,
                                 "versions": {"kernel": "6.1.0", "torch": rep["results"][0]["details"]["versions"]["torch"]}}))
        entries.append({"node": f"node{i}", "accepted": True, "reasons": [], "record": str(p)})
    doc = {"schema": "trainready.fleet/1", "nodes": entries, "planted": {}, **top}
    (tmp_path / tag / "fleet.json").write_text(json.dumps(doc))
    return str(tmp_path / tag / "fleet.json")


def test_fleet_records_fold_to_medians_and_mixed_versions(tmp_path):
    base = read_side(fleet(tmp_path, "a", [record(tps=t) for t in (1000.0, 990.0, 10.0)]), "BASELINE")
    assert base.metrics[("train_tokens_per_s", (("device", "cuda"),))].value == 990.0  # one slow node: median holds
    assert base.nodes == 3 and base.versions["kernel"] == "6.1.0"
    mixed = read_side(fleet(tmp_path, "b", [record(), record(), record(torch="2.11.0")]), "NEW")
    assert mixed.versions["torch"].startswith("mixed: ")
    c = compare(base, mixed, CompareSpec(), "test", ())
    assert [v.key for v in c.versions] == ["torch"] and c.exit_code == 1
    with pytest.raises(UsageError, match="planted faults: cluster.slow=node1"):
        read_side(fleet(tmp_path, "c", [record()], planted={"cluster.slow": "node1"}), "NEW")


def test_planted_and_non_records_refused(tmp_path):
    p = tmp_path / "planted.json"
    p.write_text(json.dumps(record(planted={"train.slow": "1"})))
    with pytest.raises(UsageError, match="made with --plant train.slow; a test record is not evidence"):
        read_side(str(p), "NEW")  # refused by the one reader of records (records.read_report)
    q = tmp_path / "other.json"
    q.write_text(json.dumps({"schema": "trainready.env/1"}))
    with pytest.raises(UsageError, match="expected 'trainready.report/1'"):
        read_side(str(q), "NEW")


@pytest.mark.slow
def test_cli_exit_codes_and_json(cli, tmp_path):
    base, new, bad = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    base.write_text(json.dumps(record()))
    new.write_text(json.dumps(record(tps=1020.0)))
    bad.write_text(json.dumps(record(torch="2.11.0+cu130", busbw=200.0)))  # -43%: > the 10% default
    r = cli("compare", str(base), str(bad), "--json", str(tmp_path / "cmp.json"))
    assert r.returncode == 1, r.stderr
    doc = json.loads((tmp_path / "cmp.json").read_text())
    assert doc["schema"] == "trainready.compare/1" and doc["verdict"] == "fail"
    assert [v["key"] for v in doc["versions_changed"]] == ["torch"]
    assert {m["name"]: m["verdict"] for m in doc["metrics"]}["comm_busbw_avg"] == "regression"
    r = cli("compare", str(base), str(new))
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr
    r = cli("compare", str(base), str(tmp_path / "nope.json"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "NEW" in r.stderr
    r = cli("compare", str(base), str(new), "--allow-change", "firmware")
    assert r.returncode == 2 and "--allow-change firmware" in r.stderr
    spec = tmp_path / "s.toml"
    spec.write_text("[compare.metrics.comm_busbw_avg]\nrel = -1\n")
    r = cli("compare", str(base), str(new), "--spec", str(spec))
    assert r.returncode == 2 and "compare.metrics.comm_busbw_avg.rel" in r.stderr


def test_compare_table_round_trips_through_spec_show(cli, tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('[compare]\nallow_changes = ["torch"]\nmetrics = { comm_busbw_avg = { rel = 0.05 } }\n')
    r = cli("spec", "show", str(spec))
    assert r.returncode == 0, r.stderr
    again = tmp_path / "again.toml"
    again.write_text(r.stdout)
    from trainready.spec import load_spec

    assert load_spec(again)[0].compare == load_spec(spec)[0].compare
    assert load_spec(again)[0].compare.metrics["comm_busbw_avg"].rel == 0.05


def test_default_tolerances_come_from_the_baselines_recorded_spec():
    from trainready.errors import ConfigError
    from trainready.spec.load import compare_table

    table, source = compare_table({"rate_rel_tol": 0.5, "metrics": {"x": {"rel": 0.2}}}, "BASELINE a.json")
    assert table.rate_rel_tol == 0.5 and table.metrics["x"].rel == 0.2 and "recorded spec" in source
    assert compare_table(None, "BASELINE a.json")[0] == CompareSpec()
    with pytest.raises(ConfigError, match="rate_rel_tol"):
        compare_table({"rate_rel_tol": 1.5}, "BASELINE a.json")
    base = record()
    base["spec"] = {"compare": {"rate_rel_tol": 0.6}}
    side = node_side(base, "a.json", "BASELINE")
    assert side.spec_compare == {"rate_rel_tol": 0.6}
