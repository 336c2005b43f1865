"""A timing below its floor is measured again before the comm check fails; correctness never is."""

from __future__ import annotations

from trainready.comm.remeasure import is_timing_failure, merge, needs_remeasure
from trainready.records import Metric, Outcome, Status, Threshold


def _op(status: Status, wrong: int, busbw: float) -> Outcome:
    m = (Metric.of("comm_wrong_elements", wrong, "1", Threshold("==", 0, "1", "exact"), op="all_reduce"),)
    return Outcome(status, f"all_reduce: busbw {busbw} GB/s", m)


def test_wrong_elements_fail_at_once_and_a_slow_figure_is_measured_again() -> None:
    wrong = [("comm.all_reduce", "t", _op(Status.FAIL, 3, 1.0))]
    slow = [("comm.all_reduce", "t", _op(Status.FAIL, 0, 1.0)), ("comm.pairs", "t", Outcome(Status.PASS, "ok"))]
    assert not needs_remeasure(wrong) and not is_timing_failure(*wrong[0][::2])
    assert needs_remeasure(slow)
    assert not needs_remeasure([("comm.pairs", "t", Outcome(Status.FAIL, "straggler: rank 3"))])  # confirmed already
    mixed = slow + [("comm.broadcast", "t", _op(Status.FAIL, 1, 9.0))]
    assert not needs_remeasure(mixed)  # a wrong element fails the check whatever a second run says


def test_a_figure_that_meets_its_floor_the_second_time_passes_with_both_figures() -> None:
    first = [("comm.all_reduce", "t", _op(Status.FAIL, 0, 1.0)), ("comm.pairs", "t", Outcome(Status.PASS, "p1"))]
    healthy = [("comm.all_reduce", "t", _op(Status.PASS, 0, 5.0)), ("comm.pairs", "t", Outcome(Status.PASS, "p2"))]
    slow = [("comm.all_reduce", "t", _op(Status.FAIL, 0, 0.9)), ("comm.pairs", "t", Outcome(Status.PASS, "p2"))]
    cleared = dict((n, o) for n, _, o in merge(first, healthy))
    assert cleared["comm.all_reduce"].status == Status.PASS and "not a fault" in cleared["comm.all_reduce"].message
    assert "busbw 1.0" in cleared["comm.all_reduce"].message and "busbw 5.0" in cleared["comm.all_reduce"].message
    assert cleared["comm.pairs"].message == "p1"  # only the failed timings take the second run's verdict
    kept = dict((n, o) for n, _, o in merge(first, slow))
    assert kept["comm.all_reduce"].status == Status.FAIL and "failed it too" in kept["comm.all_reduce"].message
