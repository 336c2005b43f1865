"""Drain reasons a program can sort (cluster/repair/reasons.py): 'trainready:SOURCE/CLASS DATE: CAUSE', whose first 20
characters (what `sinfo -R` shows: sinfo(1) "%20E") tell what drained the node and the class of its fault; the
class comes from the failing check's name or the fleet verdict's cause key, never from the message; reasons of
earlier versions stay trainready's own."""

from __future__ import annotations

import datetime as dt

import pytest

from trainready.cluster.repair import ledger

from trainready.cluster.repair import reasons
from trainready.cluster.control import slurm
from trainready.cluster.judge.verdict import NodeVerdict

DAY = dt.date(2026, 12, 6)


def test_an_administrators_reason_is_not_ours_and_earlier_formats_are_with_an_unknown_class() -> None:
    for admin in ("admin: psu", "NHC: check_hw_gpu failed", "[node_problem] xid 79", "Kill task failed", ""):
        assert reasons.parse(admin) == reasons.Reason(False)
        assert not slurm.NodeInfo("n", "drained", "h", admin).ours
    dated = reasons.parse("trainready: [sweep] 2026-12-01: check matmul: FAIL: 3 elements off (+1 more)")
    assert dated.ours and dated.form == "dated" and dated.klass == ""  # written before the classes: not known
    assert (dated.source, dated.date, dated.cause) == ("sweep", dt.date(2026, 12, 1),
                                                       "check matmul: FAIL: 3 elements off (+1 more)")
    plain = reasons.parse("trainready: check matmul: FAIL")
    assert plain.ours and plain.form == "plain" and (plain.source, plain.klass, plain.date) == ("", "", None)
    assert plain.cause == "check matmul: FAIL"
    assert slurm.NodeInfo("n", "drained", "h", "trainready: not re-validated").ours


def test_the_first_20_characters_tell_source_and_class_for_every_pair() -> None:
    old = ledger.reason_text(["check matmul: FAIL"]).replace("trainready:run/sw", "trainready: [sweep]")
    assert reasons.parse(old[:20]).klass == ""  # the earlier dated form: 20 characters hold no class
    for source in reasons.SOURCES:
        for klass in reasons.CODE:
            text = reasons.compose(source, klass, "check matmul: FAIL: 3 elements off", DAY)
            shown = text[: reasons.HEAD_MAX]  # what `sinfo -R` prints
            got = reasons.parse(shown)
            assert got.ours and (got.source, got.klass) == (source, klass), (shown, got)
            whole = reasons.parse(text)
            assert (whole.source, whole.klass, whole.date, whole.cause, whole.form) == (
                source, klass, DAY, "check matmul: FAIL: 3 elements off", "classed")
    assert reasons.compose("sweep", "hardware", "x", DAY) == "trainready:sweep/hw 2026-12-06: x"
    with pytest.raises(ValueError):
        reasons.compose("cron", "hardware", "x", DAY)


def test_the_class_comes_from_the_check_or_cause_key_never_from_the_message() -> None:
    from trainready.checks import REGISTRY

    missing = sorted(set(REGISTRY) - set(reasons.CHECK_CLASS))
    assert missing == [], f"checks without a drain class in reasons.CHECK_CLASS: {missing}"
    text = "check matmul: FAIL: 3 of 4096 elements off"  # the same words under three causes
    for causes, klass in ((("check matmul",), "hardware"), (("collective",), "fabric"), (("drift torch",), "software"),
                          (("check allreduce",), "fabric"), (("slow comm_busbw_avg",), "fabric"),
                          (("slow gemm_bf16",), "hardware"), (("no result: hung in matmul",), "hardware"),
                          (("no result: hung in allreduce",), "fabric"), (("no result: hung in start-up",), "software"),
                          (("no result: did not finish within --time 0:20",), "software"),
                          (("storage",), "fabric"), (("host pin vm.swappiness",), "software"), ((), "software")):
        nv = NodeVerdict("n1", False, (text,), (), "", {}, causes)
        assert reasons.class_of_causes(nv.causes) == klass, causes
    assert ledger.reason_text([text], "run", reasons.class_of("collective"), DAY).startswith("trainready:run/fab ")


def test_a_reason_stays_within_slurms_bound_and_the_ledger_keeps_the_whole_text() -> None:
    long = ["check matmul: FAIL: " + "x" * 500, "drift: torch 2.5 != 2.6"]
    r = ledger.reason_text(long, "run", "hardware", DAY)
    assert len(r) <= ledger.REASON_MAX and r.endswith("(+1 more)") and r.startswith("trainready:run/hw 2026-12-06: ")
    kept = ledger.whole("run", "hardware", long)
    assert len(kept["reason"]) > ledger.REASON_MAX and kept["reason"].endswith("drift: torch 2.5 != 2.6")
    assert (kept["source"], kept["class"]) == ("run", "hardware")
    assert ledger.dated_reason("health", ["gpus: FAIL"], DAY, "hardware") == "trainready:health/hw 2026-12-06: gpus: FAIL"


def test_the_sweeps_prometheus_drain_reads_both_the_old_and_the_new_reason() -> None:
    from trainready.cluster.sweep import monitor

    def drained(reason: str) -> float:
        info = slurm.NodeInfo("n1", "drained", "h", reason)
        return next(s.value for s in monitor._node("n1", {"strikes": 2}, [], info)
                    if s.name == "trainready_sweep_drained")

    assert drained("admin: psu") == 0.0 and drained("trainready:run/hw 2026-12-06: x") == 0.0  # not the sweep's
    assert drained("trainready: [sweep] 2026-12-01: check matmul") == 1.0  # an earlier version's sweep drain
    assert drained("trainready:sweep/hw 2026-12-06: check matmul") == 1.0
