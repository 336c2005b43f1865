"""The throughput measurement runs end to end on a small state and reports every figure."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trainready.checks.ckpt_throughput import CkptThroughputCheck
from trainready.ckpt.throughput import measure
from trainready.records import Status
from trainready.spec import load_spec
from trainready.suite.base import CheckContext
from trainready.suite.options import CheckOptions, ThroughputOptions


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_measure_reports_all_variants_and_cleans_up(tmp_path: Path) -> None:
    res = measure(tmp_path, 8 << 20, rounds=1, device="cpu")
    assert set(res["gbps"]) == {"raw_write", "dcp_plain", "dcp_tuned", "save", "save_steady", "raw_read", "load"}
    assert all(v > 0 for v in res["gbps"].values())
    assert res["ratio"]["save/raw_write"] == pytest.approx(res["gbps"]["save"] / res["gbps"]["raw_write"])
    assert list(tmp_path.iterdir()) == []  # nothing left behind on the target directory


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_check_judges_the_save_ratio(tmp_path: Path) -> None:
    spec, _ = load_spec(None)
    ctx = CheckContext(spec, tmp_path, {}, CheckOptions(throughput=ThroughputOptions(nbytes=8 << 20, rounds=1)))
    res = CkptThroughputCheck().execute(ctx)
    assert res.status in (Status.PASS, Status.WARN), res.message
    ratio = next(m for m in res.metrics if m.name == "ckpt_ratio" and m.label_dict["ratio"] == "save/raw_write")
    assert ratio.threshold is not None and ratio.threshold.bound == 0.85
    assert (res.status == Status.PASS) == (ratio.value >= 0.85)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_no_timed_save_reuses_a_staging_buffer_from_an_earlier_step(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-off pinned allocation must be inside every timing.  On CPU nothing is pinned, so
    each staging call here leaves a stand-in buffer behind, as a CUDA staging does."""
    from trainready.ckpt import save, throughput

    held_at_entry: list[tuple[str, bool]] = []

    def staging(real):  # type: ignore[no-untyped-def]
        def f(state):  # type: ignore[no-untyped-def]
            out = real(state)
            save._PINNED["buf"] = torch.empty(16, dtype=torch.uint8)
            return out
        return f

    def timed(name, real):  # type: ignore[no-untyped-def]
        def f(*args, **kw):  # type: ignore[no-untyped-def]
            held_at_entry.append((name, bool(save._PINNED)))
            return real(*args, **kw)
        return f

    monkeypatch.setattr(save, "stage_to_cpu", staging(save.stage_to_cpu))  # inside save_state
    monkeypatch.setattr(throughput, "stage_to_cpu", timed("dcp_tuned", staging(throughput.stage_to_cpu)))
    monkeypatch.setattr(throughput, "save_state", timed("save", throughput.save_state))
    save._PINNED["buf"] = torch.empty(16, dtype=torch.uint8)  # left by an earlier save in this process
    measure(tmp_path, 1 << 20, rounds=2, device="cpu")
    # per round: dcp_tuned, the first save, then the steady-state save that reuses the buffer
    assert [n for n, _ in held_at_entry] == ["dcp_tuned", "save", "save"] * 2
    # the first-save figures start without a buffer; only the steady-state one reuses it
    assert [held for _, held in held_at_entry] == [False, False, True] * 2


def _res(save_ratio: float, load_ratio: float) -> dict:
    g = {"raw_write": 1.0, "dcp_plain": 0.5, "dcp_tuned": 0.8, "save": save_ratio, "save_steady": 1.0,
         "raw_read": 2.0, "load": 2.0 * load_ratio}
    r = {"save/raw_write": save_ratio, "save_steady/raw_write": 1.0, "dcp_plain/raw_write": 0.5,
         "dcp_tuned/raw_write": 0.8, "load/raw_read": load_ratio, "load/raw_write": 2.0 * load_ratio}
    return {"gbps": g, "ratio": r, "bytes": 1 << 28, "device": "cpu", "rounds": 3}


def test_message_shows_the_threshold_it_was_judged_by(tmp_path: Path) -> None:
    """A PASS at 0.36 x raw read used to show no threshold: the message names the one judged
    (save >= 0.85 x raw write+fsync) and says the load ratio is shown, not judged."""
    from trainready.ckpt.throughput import TARGET, judge

    low = judge(_res(0.60, 0.36), tmp_path)
    assert low.status == Status.WARN and f">= {TARGET} x (NOT met" in low.message
    ok = judge(_res(0.91, 0.36), tmp_path)
    assert ok.status == Status.PASS
    assert f"0.91 x raw write+fsync 1.00 GB/s, judged against >= {TARGET} x (met" in ok.message
    assert "0.36 x raw read (shown, not judged)" in ok.message
    assert ok.details["threshold"] == {"save/raw_write": f">= {TARGET}"}
    judged = [m for m in ok.metrics if m.threshold is not None]
    assert [m.label_dict["ratio"] for m in judged] == ["save/raw_write"]
    assert "issue" not in judged[0].threshold.source  # a public statement of the rule, not the project's notes
