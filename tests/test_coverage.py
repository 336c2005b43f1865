"""Coverage (cluster/repair/coverage.py): each node's last active and passive pass, the nodes past the window named by
`cluster history --coverage`, carried in the sweep's Prometheus textfile; and the shipped Grafana dashboard
(docs/grafana/trainready.json), whose every query must name a metric that textfile really has."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

from conftest import REPO, run_cli

from trainready.cluster.repair import coverage
from trainready.cluster.control.slurm import NodeInfo
from trainready.cluster.sweep import monitor, state, trend

NOW = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.timezone.utc)
DASHBOARD = REPO / "docs" / "grafana" / "trainready.json"


def _results(tmp: Path, now: dt.datetime = NOW) -> Path:
    """n1: run-accepted 1 day ago, health pass 1 h ago; n2: swept-passed 9 days ago, never a passive pass;
    n3: rejected by the run (no active pass), passive pass 10 days ago."""
    run = tmp / "runs" / "20261205T120000Z-run"
    run.mkdir(parents=True)
    run.joinpath("fleet.json").write_text(json.dumps({"schema": "trainready.fleet/1", "planted": {},
        "context": {"finished": (now - dt.timedelta(days=1)).isoformat()},
        "nodes": [{"node": "n1", "verdict": "accept"}, {"node": "n3", "verdict": "reject"}]}))
    (tmp / "sweep").mkdir()
    (tmp / "sweep" / "state.json").write_text(json.dumps({"schema": "trainready.sweepstate/1", "nodes": {
        "n2": {"last_pass": state.stamp(now - dt.timedelta(days=9)), "strikes": 1,
               "runs": [{"when": state.stamp(now - dt.timedelta(days=1)), "verdict": "fail", "text": "x"}]}}}))
    (tmp / "health").mkdir()
    for node, ago in (("n1", dt.timedelta(hours=1)), ("n3", dt.timedelta(days=10))):
        (tmp / "health" / f"{node}.json").write_text(json.dumps({"schema": "trainready.report/1",
            "time": (now - ago).isoformat(), "context": {"node": node},
            "results": [{"name": "health", "status": "pass"}]}))
    trend.save(tmp, "n2", [{"when": state.stamp(now), "verdict": "fail", "run": "r",
                            "figures": {"gemm_bf16@GPU 0": 700.0, "hbm_copy@GPU 0": 4000.0,
                                        "train_tokens_per_s@node": 1e4}, "counters": {}, "gpus": ["GPU 0"],
                            "uuids": {}, "mismatches": {"GPU 0": 1}, "trend": ["x"]}])
    return tmp


def test_last_passes_and_the_nodes_past_the_window(tmp_path: Path):
    r = _results(tmp_path)
    passes = coverage.last_passes(r)
    assert passes["n1"]["active"] == NOW - dt.timedelta(days=1)
    assert passes["n3"]["active"] is None  # rejected is not a pass
    late = {(n, k) for n, k, _ in coverage.stale(passes, 7, NOW)}
    assert ("n1", "active") not in late and ("n1", "passive") not in late
    assert late == {("n2", "active"), ("n2", "passive"), ("n3", "active"), ("n3", "passive")}
    assert {(n, k) for n, k, _ in coverage.stale(passes, 30, NOW)} == {("n2", "passive"), ("n3", "active")}


def test_history_coverage_names_them(tmp_path: Path):
    r = _results(tmp_path, dt.datetime.now(dt.timezone.utc))
    p = run_cli("cluster", "history", "--coverage", "--results", str(r))
    assert p.returncode == 1, p.stderr
    assert "n2: active: last passed" in p.stdout and "n3: active: never passed" in p.stdout
    assert not re.search(r"^n1:", p.stdout, re.M)


def _textfile(tmp_path: Path) -> str:
    r = _results(tmp_path)
    out = tmp_path / "trainready.prom"
    # n2 drained by the sweep, as `sinfo` reports it (the drained_info gauge carries Slurm's reason)
    info = {"n2": NodeInfo("n2", "drained", "n2", "trainready: [sweep] 2026-12-06: check matmul")}
    monitor.write(str(out), r, state.load(r), info)
    return out.read_text()


def test_prometheus_carries_the_last_pass(tmp_path: Path):
    text = _textfile(tmp_path)
    t = (NOW - dt.timedelta(days=1)).timestamp()
    m = re.search(r'^trainready_node_last_pass_timestamp_seconds\{node="n1",kind="active"\} (\S+)$', text, re.M)
    assert m is not None and float(m.group(1)) == t
    assert 'last_pass_timestamp_seconds{node="n3",kind="passive"}' in text
    assert 'last_pass_timestamp_seconds{node="n3",kind="active"}' not in text  # no time to give: the gauge below
    assert 'trainready_node_never_passed{node="n3",kind="active"} 1' in text


def test_every_dashboard_query_names_a_metric_the_textfile_has(tmp_path: Path):
    have = set(re.findall(r"^(trainready_\w+)", _textfile(tmp_path), re.M))
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    named = {m for e in exprs for m in re.findall(r"\btrainready_\w+", e)}
    assert "trainready_no_such_metric" not in have  # the check below can fail: a made-up name is not there
    assert all(re.search(r"\btrainready_\w+", e) for e in exprs), "a query without a trainready metric"
    assert named - have == set(), f"dashboard queries name metrics the textfile lacks: {sorted(named - have)}"
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for part in ("active pass", "verdicts", "strikes", "per-gpu"):
        assert part in titles


def test_a_partition_node_no_record_names_is_named(tmp_path: Path):
    r = _results(tmp_path)
    without = coverage.lines(r, 7, NOW)
    assert not any(x.startswith("n9:") for x in without)  # no record names n9: unseen
    with_partition = coverage.lines(r, 7, NOW, nodes=["n1", "n9"])
    assert "n9: active: never passed (window 7 days)" in with_partition
    assert "n9: passive: never passed (window 7 days)" in with_partition
    assert not any(x.startswith("n1:") for x in with_partition)  # its records still count


def _series(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for m in re.finditer(r"^(trainready_\w+)(?:\{([^}]*)\})? (\S+)$", text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return out


def _not_covered(text: str, now: float) -> set[str]:
    """The stat panel's PromQL, evaluated over the textfile as Prometheus would (its expr is asserted below):
    count(count by (node) ((time() - last_pass) > scalar(window)) or count by (node) (never_passed == 1))."""
    s = _series(text)
    window = s["trainready_coverage_window_seconds"][0][1]
    late = {lb["node"] for lb, v in s["trainready_node_last_pass_timestamp_seconds"] if now - v > window}
    never = {lb["node"] for lb, v in s["trainready_node_never_passed"] if v == 1}
    return late | never  # `or` on the one label `node`: the union, each node once


def test_the_not_covered_panel_counts_nodes_a_never_passed_one_too(tmp_path: Path):
    """n2 (passed 9 days ago, never passively), n3 (never actively) and n9 (in the partition, in no record):
    3 nodes not covered, each counted once though both its kinds are; the window is the spec's, carried."""
    r = _results(tmp_path)
    out = tmp_path / "trainready.prom"
    monitor.write(str(out), r, state.load(r), {"n9": NodeInfo("n9", "idle", "n9", "")}, window_days=7.0)
    text = out.read_text()
    assert 'trainready_node_never_passed{node="n9",kind="active"} 1' in text  # a node no record names: there
    assert "trainready_coverage_window_seconds 604800" in text
    panel = next(p for p in json.loads(DASHBOARD.read_text())["panels"] if "not covered" in p["title"].lower())
    expr = panel["targets"][0]["expr"]
    assert "7 * 86400" not in expr and "scalar(trainready_coverage_window_seconds)" in expr
    assert expr == ("count(count by (node) ((time() - trainready_node_last_pass_timestamp_seconds) > "
                    "scalar(trainready_coverage_window_seconds)) or count by (node) (trainready_node_never_passed == 1)) "
                    "or vector(0)")
    assert _not_covered(text, NOW.timestamp()) == {"n2", "n3", "n9"}
    monitor.write(str(out), r, state.load(r), {}, window_days=30.0)  # a spec with a 30-day window
    assert _not_covered(out.read_text(), NOW.timestamp()) == {"n2", "n3"}  # n2 passed actively 9 days ago, never passively
