"""Each GPU's fingerprint mismatches in the sweep's trend (cluster history) and the Prometheus counter (a running total that never falls): a node
whose GPU was off in one sweep shows it in its history and counter, a healthy node shows zeros."""

from __future__ import annotations

from pathlib import Path

from trainready.cluster.sweep import monitor, trend


def _record(mismatch: int) -> dict:
    gpus = [{"index": 0, "serial": "1651A", "uuid": "GPU-a"}, {"index": 1, "serial": "1651B", "uuid": "GPU-b"}]
    metrics = [{"name": "fingerprint_mismatches", "value": v, "unit": "entries", "labels": {"gpu": str(i)}}
               for i, v in ((0, 0), (1, mismatch))]
    return {"manifest": {"gpu": {"nvml": {"gpus": gpus}}},
            "report": {"results": [{"name": "fingerprint", "status": "pass", "metrics": metrics}]}}


def test_mismatches_are_kept_per_gpu_and_counted_for_prometheus(tmp_path: Path):
    e1 = trend.entry("2026-12-01T00:00:00Z", "fail", _record(1), "r1", {"1": 3, "0": 0})
    assert e1["mismatches"] == {"1651A": 0, "1651B": 3}  # the larger of the node's and the fleet's count
    e2 = trend.entry("2026-12-02T00:00:00Z", "pass", _record(0), "r2")
    assert e2["mismatches"] == {"1651A": 0, "1651B": 0}
    trend.save(tmp_path, "node7", [e1, e2])
    rows = trend.table(trend.load(tmp_path, "node7"))
    assert "fingerprint_mismatches@1651B" in rows[0] and rows[1].split()[-1] == "3" and rows[3].split()[-1] == "0"
    assert rows[2] == "    FAIL (strike ?): no reason recorded", rows  # a failing sweep says why under its row
    samples = list(monitor._node("node7", {"runs": [{"when": "2026-12-02T00:00:00Z", "verdict": "pass"}]},
                                 trend.load(tmp_path, "node7"), None))
    total = {dict(s.labels)["device"]: s.value for s in samples
             if s.name.endswith("sweep_fingerprint_mismatches_total")}
    assert total == {"1651A": 0.0, "1651B": 3.0}  # a history written with no running total: its kept sweeps
    assert "# TYPE trainready_sweep_fingerprint_mismatches_total counter" in monitor.render(samples)
    cpu = trend.mismatches({"report": {"results": [{"name": "fingerprint", "metrics": [
        {"name": "fingerprint_mismatches", "value": 1, "labels": {"rank": "1"}}]}]}}, {"0": 2})
    assert cpu == {"rank 1": 1, "rank 0": 2}


def test_the_counter_never_falls_when_old_sweeps_are_dropped(tmp_path: Path):
    """The running total is carried in the newest entry: after the sweep with 3 mismatches falls out of the kept
    history, the counter still says 3 (a falling counter reads as a reset to Prometheus's rate())."""
    runs = []
    for k, n in enumerate([3, 0, 1]):
        e = trend.entry(f"2026-12-0{k + 1}T00:00:00Z", "pass", _record(0), f"r{k}", {"1": n})
        e["mismatches_total"] = trend.cumulative(runs, e["mismatches"])
        runs.append(e)
    assert runs[-1]["mismatches_total"] == {"1651A": 0, "1651B": 4}
    kept = runs[1:]  # the first sweep dropped (trend.KEEP)
    samples = list(monitor._node("node7", {"runs": [{"when": "2026-12-03T00:00:00Z", "verdict": "pass"}]}, kept, None))
    total = {dict(s.labels)["device"]: s.value for s in samples if s.name.endswith("mismatches_total")}
    assert total == {"1651A": 0.0, "1651B": 4.0}
    assert trend.cumulative(kept[:1], {"1651B": 2}) == {"1651A": 0, "1651B": 5}
