"""A node's page (`trainready report RESULTS/sweep/trend/NODE.json --html`) and `cluster history NODE` say the
node's state first: drained by the sweep and why, its strikes, the trend WARNs, its last pass; the chart marks
each sweep's verdict and the drain over a time axis in hours or dates (report/node_state.py, timechart.py).
The scenario: two failing sweeps (check matmul, strikes 2 of 2) drained the node, with two trend WARNs."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli
from test_report_html import _chromium
from trainready.cluster.sweep import trend
from trainready.report.timechart import time_ticks

NODE = "gpu017"
WHY = "check matmul: FAIL: 3 of 4096 elements off"
REASON = f"trainready:sweep/hw 2026-12-05: {WHY}"


def _history(root: Path, drained_in_trend: bool = True) -> Path:
    runs: list[dict] = []  # type: ignore[type-arg]
    for k in range(5):
        fail = k >= 3
        now = {"when": f"2026-12-0{k + 1}T03:00:00+00:00", "verdict": "fail" if fail else "pass", "run": f"r{k}",
               "figures": {"gemm_bf16@SER0": 700.0 * (0.8 if fail else 1.0), "gemm_bf16@SER1": 702.0},
               "counters": {}, "gpus": ["SER0", "SER1"]}
        if fail:
            now.update(why=WHY, strikes=k - 2, strikes_of=2)
        now["trend"] = trend.judge(now, runs, 0.10, 5)
        runs.append(now)
    trend.save(root, NODE, runs)
    if drained_in_trend:
        trend.mark_drained(root, NODE, "2026-12-05T03:20:00+00:00", REASON)
    else:  # a history written before the drain was kept in it: the sweep's state beside it says so
        (root / "sweep" / "state.json").write_text(json.dumps({"schema": "trainready.sweepstate/1", "drains": [],
                                                               "nodes": {NODE: {"drained": {
                                                                   "when": "2026-12-05T03:20:00+00:00",
                                                                   "reason": REASON}}}}))
    return trend.path(root, NODE)


def _page(path: Path, out: Path) -> str:
    p = run_cli("report", str(path), "--html", str(out))
    assert p.returncode == 0, p.stderr
    return out.read_text()


@pytest.mark.parametrize("in_trend", [True, False])
def test_a_node_drained_by_two_failing_sweeps_says_so_first(tmp_path: Path, in_trend: bool) -> None:
    page = _page(_history(tmp_path, in_trend), tmp_path / "node.html")
    assert "days since the first sweep" not in page and 'class="verdict v-pass' not in page  # the old page's
    first = re.search(r'<div class="verdict v-(\w+) node-state">([^<]*)<ul class="state">(.*?)</ul>', page)
    assert first is not None and page.index(first.group(0)) < page.index("Verdict: ")  # the state comes first
    assert first.group(1) == "fail" and first.group(2) == f"{NODE}: DRAINED by the sweep on 2026-12-05 03:20 UTC"
    items = re.findall(r"<li>(.*?)</li>", first.group(3))
    assert items[0] == f"why: {REASON}"
    assert items[1] == "failing sweeps: 2 (2026-12-04 03:00 UTC strike 1 of 2; 2026-12-05 03:00 UTC strike 2 of 2)"
    assert items[2].startswith("trend WARNs: 2 (latest 2026-12-05 03:00 UTC: gemm_bf16@SER0: 560 TFLOP/s is 20% below")
    assert items[3] == "last pass 2026-12-03 03:00 UTC"
    assert "Verdict: FAIL — 1 failed, 2 warning(s)" in page
    assert f"{tmp_path.resolve() / 'rma' / NODE}/INDEX.md" in page  # where its RMA evidence is
    svg = page[page.index("<svg"):page.index("</svg>")]
    marks = re.findall(r'class="sweep-mark" data-verdict="(\w+)"><title>([^<]*)</title>', svg)
    assert [v for v, _ in marks] == ["pass", "pass", "pass", "fail", "fail"]
    assert marks[4][1] == f"2026-12-05 03:00 UTC: fail (strike 2 of 2): {WHY}"
    assert '<g class="event">' in svg and ">drained</text>" in svg
    assert ">2026-12-01</text>" in svg and ">2026-12-05</text>" in svg and "time (UTC)" in svg


def test_the_time_axis_is_in_hours_or_dates_never_fractions_of_a_day() -> None:
    t0 = 1765000800.0  # 2025-12-06 06:00 UTC
    ticks, fmt = time_ticks(t0, t0 + 10 * 3600)
    assert fmt == "%m-%d %H:%M" and [t % 3600 for t in ticks] == [0.0] * len(ticks) and 5 <= len(ticks) <= 8
    ticks, fmt = time_ticks(t0, t0 + 30 * 86400)
    assert fmt == "%Y-%m-%d" and all(t % 86400 == 0 for t in ticks) and len(ticks) <= 8


def test_a_resumed_node_that_passed_again_is_back_and_cluster_history_says_the_state_first(tmp_path: Path) -> None:
    path = _history(tmp_path)
    p = run_cli("cluster", "history", NODE, "--results", str(tmp_path))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"{NODE}: DRAINED by the sweep on 2026-12-05 03:20 UTC" and lines[1] == f"  why: {REASON}"
    assert lines[4] == "  last pass 2026-12-03 03:00 UTC" and lines[6].startswith("when (UTC)")
    doc = json.loads(path.read_text())
    doc["runs"].append({"when": "2026-12-06T09:00:00+00:00", "verdict": "pass", "figures": {}, "counters": {},
                        "gpus": [], "trend": []})
    path.write_text(json.dumps(doc))
    page = _page(path, tmp_path / "back.html")
    assert f'node-state">{NODE}: PASSING<ul' in page and "DRAINED" not in page
    assert run_cli("cluster", "history", NODE, "--results", str(tmp_path)).stdout.startswith(f"{NODE}: PASSING\n")


@pytest.mark.slow
def test_chromium_shows_the_state_first_and_the_marked_chart(tmp_path: Path) -> None:
    exe = _chromium()
    page = tmp_path / "node.html"
    _page(_history(tmp_path), page)
    common = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
              "--disable-background-networking", "--disable-component-update", f"--user-data-dir={tmp_path / 'p'}"]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180).stdout
    body = dom[dom.index("<body>"):]
    assert body.index("DRAINED by the sweep") < body.index("Verdict: FAIL")  # as the browser parsed the page
    assert len(re.findall(r'<g class="sweep-mark" data-verdict="fail">', body)) == 2 and '<g class="event">' in body
    shot = tmp_path / "shot.png"
    subprocess.run([*common, f"--screenshot={shot}", "--window-size=1100,1800", page.as_uri()],
                   capture_output=True, text=True, timeout=180)
    assert shot.stat().st_size > 30_000  # a rendered page with its chart, not a blank one
