"""Judging on records CAPTURED from a lent 1x H100 machine (NVML + torch, 2026-12-06), not written by hand:
tests/data/env_h100x1_captured.json (`trainready env --json`), node_h100x1_captured.json (`trainready node
--json`, automatic spec) and healthstate_h100x1_captured.json (the state `node --health-check` left)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from trainready.cluster.health import passive
from trainready.cluster.sweep import trend
from trainready.manifest.gpu import NvmlFacts
from trainready.manifest.gpuhealth import HealthReading

DATA = Path(__file__).parent / "data"
SERIAL = "1651424062740"  # what nvmlDeviceGetSerial gave for that board


def captured() -> dict:  # type: ignore[type-arg]
    """A sweep's node record as `cluster sweep` keeps it: the node's report and its manifest."""
    return {"report": json.loads((DATA / "node_h100x1_captured.json").read_text()),
            "manifest": json.loads((DATA / "env_h100x1_captured.json").read_text())}


def test_the_manifest_reads_the_boards_serial_and_its_counters() -> None:
    nvml = NvmlFacts.from_json(captured()["manifest"]["gpu"]["nvml"])
    g = nvml.gpus[0]
    assert (g.name, g.serial, g.pcie_replays, g.xids_this_boot) == ("NVIDIA H100 80GB HBM3", SERIAL, 0, 0), g


def test_the_trend_keys_the_captured_figures_by_serial_and_finds_a_planted_decline_and_swap() -> None:
    rec = captured()
    now = trend.entry("2026-12-06T07:00:00+00:00", "pass", rec, "h100")
    assert now["gpus"] == [SERIAL] and now["uuids"][SERIAL].startswith("GPU-971160e5"), now
    gemm = now["figures"][f"gemm_bf16@{SERIAL}"]
    assert 500 < gemm < 989 and f"hbm_copy@{SERIAL}" in now["figures"] and f"train_tokens_per_s@{SERIAL}" in now["figures"]
    slower = {**now, "when": "2026-12-07T07:00:00+00:00",
              "figures": {n: v * 0.8 for n, v in now["figures"].items()}}  # planted: every figure 20% down
    history = [{**now, "when": f"2026-12-0{d}T07:00:00+00:00"} for d in (4, 5, 6)]  # fleet.trend_min_runs 3
    assert trend.judge(dict(slower), history[1:], 0.10, 5) == []  # two earlier sweeps are no baseline
    said = trend.judge(slower, history, 0.10, 5)
    assert any(s.startswith(f"gemm_bf16@{SERIAL}: ") and "20% below" in s for s in said), said
    assert trend.judge({**now, "when": "2026-12-07T07:00:00+00:00"}, history, 0.10, 5) == []  # the same: nothing
    nvml = rec["manifest"]["gpu"]["nvml"]
    swapped = {**rec, "manifest": {**rec["manifest"], "gpu": {**rec["manifest"]["gpu"], "nvml": {
        **nvml, "gpus": [{**nvml["gpus"][0], "serial": "1651424099999"}]}}}}
    said = trend.judge(trend.entry("2026-12-07T07:00:00+00:00", "pass", swapped, "h100b"), [now], 0.10, 5)
    assert said == [f"GPU(s) changed since 2026-12-06T07:00: {SERIAL} -> 1651424099999 (a part swapped in repair?)"]


def test_the_captured_health_reading_passes_against_itself_and_fails_a_planted_narrow_link() -> None:
    state = json.loads((DATA / "healthstate_h100x1_captured.json").read_text())
    reading = HealthReading.from_json(state["reading"])
    bad = dataclasses.replace(reading, gpus=(dataclasses.replace(reading.gpus[0], pcie_width_current=8),))
    found = passive.judge(bad, state, 1)
    assert found["fail"] == ["GPU 0 (00000000:00:06.0): PCIe link x8, the link's maximum is x16"], found
    ok = passive.judge(reading, state, 1)
    assert ok["fail"] == [] and ok["warn"] == [] and ok["unread"] == [], ok
    grown = dataclasses.replace(reading, gpus=(dataclasses.replace(reading.gpus[0], pcie_replays=12),))
    said = passive.judge(grown, state, 1)["warn"]
    assert said == ["GPU 0 (00000000:00:06.0): pcie_replays grew 0 -> 12 since 2026-12-06T06:35"], said
