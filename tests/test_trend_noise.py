"""The sweep's trend judge knows its own noise: a short history, a fall inside the node's own spread and a noisy
figure never raise a trend WARN; a steady decline of a stable figure still does (cluster/sweep/trend.py)."""

from __future__ import annotations

from typing import Any

from trainready.cluster.sweep import trend

NAME = "train_tokens_per_s@cpu"


def sweep(k: int, value: float) -> dict[str, Any]:
    return {"when": f"2026-12-{k + 1:02d}T03:00:00+00:00", "verdict": "pass", "run": f"r{k}",
            "figures": {NAME: value}, "counters": {}, "gpus": []}


def history(values: list[float]) -> list[dict[str, Any]]:
    """Each value judged against the earlier ones, as `cluster sweep` does, its WARNs kept in its entry."""
    runs: list[dict[str, Any]] = []
    for k, v in enumerate(values):
        now = sweep(k, v)
        now["trend"] = trend.judge(now, runs, 0.10, 5)
        runs.append(now)
    return runs


def test_a_fall_is_not_judged_before_three_earlier_sweeps() -> None:
    runs = history([5000.0, 5000.0, 2500.0])  # half the median, but two earlier sweeps only
    assert [r["trend"] for r in runs] == [[], [], []]
    runs = history([5000.0, 5000.0, 5000.0, 2500.0])  # the same fall with three
    assert runs[3]["trend"] and runs[3]["trend"][0].startswith(f"{NAME}: 2500 tokens/s is 50% below"), runs[3]
    assert trend.judge(sweep(3, 2500.0), runs[:2], 0.10, 5, min_runs=2)  # the spec's trend_min_runs is the rule


def test_a_fall_inside_the_nodes_own_spread_is_not_a_warning_and_one_beyond_it_is() -> None:
    past = history([100.0, 93.0, 107.0, 100.0, 92.0])  # median 100, MAD 7 (7%: not noisy against 10%)
    assert trend.judge(sweep(5, 88.0), past, 0.10, 5) == []  # 12% below, but within 2 x MAD = 14
    said = trend.judge(sweep(5, 85.0), past, 0.10, 5)  # 15% below: beyond both
    assert len(said) == 1 and said[0].startswith(f"{NAME}: 85 tokens/s is 15% below this node's median 100"), said


def test_a_noisy_figure_is_said_at_every_sweep_with_its_count_never_a_fall() -> None:
    """The CPU train-step figures of one node across seven sweeps on a loaded 2-core host (1,261 to 46,840)."""
    runs = history([5071.0, 46840.0, 1261.0, 4800.0, 3511.0, 9000.0, 2000.0])
    said = [r["trend"] for r in runs]
    assert said[:3] == [[], [], []] and all(len(w) == 1 for w in said[3:]), said  # never a fall, said each time
    assert all(w[0].startswith(f"{NAME}: not judged: noisy: its own spread") for w in said[3:]), said
    assert "wider than fleet.trend_fraction 10%" in said[3][0] and "from 1261 to 4.684e+04" in said[3][0], said
    assert [w[0].endswith(f"(not judged for {k} sweep(s) in a row)") for k, w in enumerate(said[3:], 1)] == [True] * 4
    assert runs[3]["judged"] == {NAME: False}
    settled = history([5071.0, 46840.0, 1261.0, 4800.0] + [5000.0] * 5 + [4000.0])
    assert settled[-1]["judged"] == {NAME: True}  # a figure that settled is judged again ...
    assert settled[-1]["trend"][0].startswith(f"{NAME}: 4000 tokens/s is 20% below"), settled[-1]


def busy_record(value: float, busy: str) -> dict[str, Any]:
    """A node record as the node task writes it: train_step's tokens/s and the machine state its check read."""
    return {"report": {"results": [{"name": "train_step", "status": "warn" if busy else "pass", "metrics": [
        {"name": "train_tokens_per_s", "value": value, "unit": "tokens/s", "labels": {"device": "cpu"}}],
        "details": {"machine": {"busy": busy}}}]}}


def test_busy_figures_are_recorded_and_marked_but_never_in_the_baseline(tmp_path) -> None:  # type: ignore
    import json

    busy = "other processes kept 1.8 of 2 CPU cores busy"
    values = [(5000.0, ""), (1200.0, busy), (1100.0, busy), (1300.0, busy), (5100.0, ""), (4900.0, ""),
              (5000.0, ""), (4950.0, "")]  # three busy sweeps at a quarter of the node's figure
    for k, (v, why) in enumerate(values):
        rec = tmp_path / f"r{k}.json"
        rec.write_text(json.dumps(busy_record(v, why)))
        said = trend.follow(tmp_path, "n1", str(rec), trend.Sweep("pass", f"2026-12-0{k + 1}T03:00:00+00:00", f"r{k}"),
                            {}, trend.Rule(0.10, 5))
    runs = trend.load(tmp_path, "n1")
    assert not any("noisy" in w for r in runs for w in r["trend"]), [r["trend"] for r in runs]  # kept out ...
    assert said == [] and runs[-1]["judged"] == {NAME: True}  # ... the quiet sweeps' baseline is steady
    assert [r["figures"][NAME] for r in runs] == [v for v, _ in values]  # ... recorded, and marked
    assert [bool(r["busy"]) for r in runs] == [bool(w) for _, w in values] and runs[1]["busy"] == {NAME: busy}


def test_a_steady_five_percent_decline_of_a_stable_figure_warns_by_the_fifth_sweep() -> None:
    runs = history([5000.0 * 0.95 ** k for k in range(6)])
    assert [bool(r["trend"]) for r in runs] == [False, False, False, False, True, True], runs
    assert runs[4]["trend"][0].startswith(f"{NAME}: 4073 tokens/s is 12% below this node's median 4631 of its "
                                          "last 4 sweep(s)"), runs[4]["trend"]


def test_history_names_the_failing_check_its_reason_and_the_strikes(tmp_path) -> None:  # type: ignore
    import json

    record = tmp_path / "node.json"
    record.write_text(json.dumps({"report": {"results": []}}))
    why = "check matmul: FAIL: bf16 GEMM max error 3.1e-01 > bound 1.2e-02"
    for k, (verdict, strikes) in enumerate((("pass", 0), ("fail", 1), ("fail", 2))):
        trend.follow(tmp_path, "gpu017", str(record), trend.Sweep(verdict, f"2026-12-0{k + 1}T03:00:00+00:00",
                     f"r{k}", why if verdict == "fail" else "", strikes), {}, trend.Rule(0.10, 5))
    rows = trend.table(trend.load(tmp_path, "gpu017"))
    assert rows[1].split()[2] == "pass" and not rows[2].startswith("    ")
    assert rows[3] == f"    FAIL (strike 1): {why}" and rows[5] == f"    FAIL (strike 2): {why}", rows
