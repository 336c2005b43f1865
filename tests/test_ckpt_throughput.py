"""The throughput measurement runs end to end on a small state and reports every figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainready.checks.base import CheckContext
from trainready.ckpt.throughput import ThroughputCheck, measure
from trainready.records import Status
from trainready.spec import load_spec


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_measure_reports_all_variants_and_cleans_up(tmp_path: Path) -> None:
    res = measure(tmp_path, 8 << 20, rounds=1, device="cpu")
    assert set(res["gbps"]) == {"raw_write", "dcp_plain", "dcp_tuned", "save", "raw_read", "load"}
    assert all(v > 0 for v in res["gbps"].values())
    assert res["ratio"]["save/raw_write"] == pytest.approx(res["gbps"]["save"] / res["gbps"]["raw_write"])
    assert list(tmp_path.iterdir()) == []  # nothing left behind on the target directory


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_check_judges_the_save_ratio(tmp_path: Path) -> None:
    spec, _ = load_spec(None)
    ctx = CheckContext(spec, tmp_path, {}, {"throughput.bytes": 8 << 20, "throughput.rounds": 1})
    res = ThroughputCheck().execute(ctx)
    assert res.status in (Status.PASS, Status.WARN), res.message
    ratio = next(m for m in res.metrics if m.name == "ckpt_ratio" and m.label_dict["ratio"] == "save/raw_write")
    assert ratio.threshold is not None and ratio.threshold.bound == 0.85
    assert (res.status == Status.PASS) == (ratio.value >= 0.85)
